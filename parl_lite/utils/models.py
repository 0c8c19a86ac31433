"""Ready-made networks for the example scripts and tests (importable in actor processes too)."""
import math
from collections.abc import Sequence

import paddle
import paddle.nn.functional as F

from parl_lite.core.model import Model
from parl_lite.utils.layers import Conv2D, Linear
from parl_lite.utils.normalization import ObsNormalizer

__all__ = ["orthogonal_linear", "linear", "mlp", "MLPActorCritic", "MLPQNetwork", "MLPActorQ", "NatureCNN",
           "CompactCNN", "CNNQNetwork", "CNNActorCritic"]


def orthogonal_linear(in_dim: int, out_dim: int, gain: float) -> Linear:
    """A linear layer with orthogonal weights scaled by ``gain`` and zero bias (the usual
    actor-critic initialisation)."""
    return Linear(
        in_dim, out_dim,
        weight_attr=paddle.ParamAttr(initializer=paddle.nn.initializer.Orthogonal(float(gain))),
        bias_attr=paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.0)))


_ACTIVATIONS = {"tanh": paddle.nn.Tanh, "relu": paddle.nn.ReLU}
INITS = ("default", "orthogonal", "torch")


def linear(in_dim: int, out_dim: int, init: str = "default", gain: float = 1.0) -> Linear:
    """A linear layer initialised as ``init`` says: ``"default"`` (paddle's: Xavier-uniform
    weights, zero bias), ``"orthogonal"`` (orthogonal weights scaled by ``gain``, zero bias: the
    usual actor-critic initialisation, SB3's ``ortho_init=True``) or ``"torch"`` (torch's default,
    which SB3 keeps with ``ortho_init=False`` and for its off-policy networks: weights and bias
    uniform in ``±1/sqrt(in_dim)``)."""
    if init == "orthogonal":
        return orthogonal_linear(in_dim, out_dim, gain)
    if init == "torch":
        bound = 1.0 / math.sqrt(in_dim)
        uniform = {"weight_attr": paddle.ParamAttr(initializer=paddle.nn.initializer.Uniform(-bound, bound)),
                   "bias_attr": paddle.ParamAttr(initializer=paddle.nn.initializer.Uniform(-bound, bound))}
        return Linear(in_dim, out_dim, **uniform)
    if init != "default":
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    return Linear(in_dim, out_dim)


def _arch(name: str, arch: "int | Sequence[int]") -> list[int]:
    sizes = [arch] if isinstance(arch, int) else list(arch)
    if not sizes or not all(isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in sizes):
        raise ValueError(f"{name} must be a positive number of units or a list of them, got {arch!r}")
    return sizes


def _activation(name: str) -> type[paddle.nn.Layer]:
    if name not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {name!r}")
    return _ACTIVATIONS[name]


def mlp(in_dim: int, hidden: "int | Sequence[int]", out_dim: int, activation: str = "relu",
        init: str = "default") -> paddle.nn.Sequential:
    """Hidden layers of ``hidden`` units each (an int: two such layers; a list: one layer per
    entry, e.g. TD3's ``[400, 300]``), ``activation`` after each, then a linear output."""
    sizes = [hidden, hidden] if isinstance(hidden, int) else _arch("net_arch", hidden)
    layers: list[paddle.nn.Layer] = []
    for size in sizes:
        layers += [linear(in_dim, size, init), _activation(activation)()]
        in_dim = size
    return paddle.nn.Sequential(*layers, linear(in_dim, out_dim, init))


class MLPActorCritic(Model):
    """MLPs for the policy and the value (SB3's ``MlpPolicy``): by default two tanh layers of 64
    units each, orthogonally initialised.

    ``policy(obs)`` returns logits, or ``(mean, std)`` with a state-independent ``std =
    exp(log_std)`` when ``continuous`` (PARL's PPO convention); ``value(obs)`` returns ``[batch, 1]``.

    Args:
        obs_dim: observation size.
        act_dim: number of actions (discrete) or action dimensions (continuous).
        hidden: units per hidden layer (two layers), unless ``pi_arch`` / ``vf_arch`` say otherwise.
        continuous: Gaussian policy instead of categorical.
        shared: policy and value heads on one trunk (the policy's) instead of two MLPs.
        pi_arch, vf_arch: units of each hidden layer of the policy and of the value (SB3's
            ``net_arch=dict(pi=..., vf=...)``).
        activation: ``"tanh"`` or ``"relu"`` (SB3's ``activation_fn``).
        ortho_init: orthogonal initialisation (gains sqrt(2), 0.01 for the policy's output, 1 for
            the value's); False: torch's default, as SB3 with ``ortho_init=False``.
        log_std_init: the initial log standard deviation of a continuous policy.
        normalize_obs: standardise observations by running statistics first (an
            :class:`parl_lite.utils.normalization.ObsNormalizer`, updated by the training loop).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 64, continuous: bool = False,
                 shared: bool = False, *, pi_arch: "Sequence[int] | None" = None,
                 vf_arch: "Sequence[int] | None" = None, activation: str = "tanh", ortho_init: bool = True,
                 log_std_init: float = 0.0, normalize_obs: bool = False) -> None:
        super().__init__()
        self.continuous, self.shared = continuous, shared
        self._activation = _activation(activation)()
        init = "orthogonal" if ortho_init else "torch"
        self._pi = self._layers("pi", obs_dim, _arch("pi_arch", pi_arch or [hidden, hidden]), init)
        self.pi_out = linear(self._width("pi", obs_dim), act_dim, init, 0.01)
        if not shared:
            self._vf = self._layers("vf", obs_dim, _arch("vf_arch", vf_arch or [hidden, hidden]), init)
        self.vf_out = linear(self._width("pi" if shared else "vf", obs_dim), 1, init, 1.0)
        if continuous:
            self.log_std = self.create_parameter(
                [act_dim], default_initializer=paddle.nn.initializer.Constant(float(log_std_init)))
        self.obs_normalizer = ObsNormalizer(obs_dim) if normalize_obs else None

    def _layers(self, prefix: str, in_dim: int, sizes: list[int], init: str) -> list[str]:
        """Hidden layers ``{prefix}1``, ``{prefix}2``, ... (their names in checkpoints)."""
        names = []
        for index, size in enumerate(sizes, start=1):
            setattr(self, f"{prefix}{index}", linear(in_dim, size, init, math.sqrt(2)))
            names.append(f"{prefix}{index}")
            in_dim = size
        return names

    def _width(self, prefix: str, obs_dim: int) -> int:
        names = self._pi if prefix == "pi" else self._vf
        return getattr(self, names[-1]).weight.shape[1] if names else obs_dim

    def _through(self, names: list[str], obs: paddle.Tensor) -> paddle.Tensor:
        x = self.obs_normalizer(obs) if self.obs_normalizer is not None else obs
        for name in names:
            x = self._activation(getattr(self, name)(x))
        return x

    def _trunk(self, obs: paddle.Tensor) -> paddle.Tensor:
        return self._through(self._pi, obs)

    def policy(self, obs: paddle.Tensor):
        out = self.pi_out(self._trunk(obs))
        return (out, paddle.exp(self.log_std)) if self.continuous else out

    def value(self, obs: paddle.Tensor) -> paddle.Tensor:
        return self.vf_out(self._through(self._pi if self.shared else self._vf, obs))

    def forward(self, obs: paddle.Tensor):
        return self.policy(obs)


class MLPQNetwork(Model):
    """A two-hidden-layer ReLU MLP from observations to one Q-value per action (SB3's DQN
    ``MlpPolicy``).

    Args:
        obs_dim: observation size.
        act_dim: number of actions.
        hidden: units per hidden layer.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 256) -> None:
        super().__init__()
        self.fc1 = Linear(obs_dim, hidden)
        self.fc2 = Linear(hidden, hidden)
        self.fc3 = Linear(hidden, act_dim)

    def forward(self, obs: paddle.Tensor) -> paddle.Tensor:
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(obs)))))


class MLPActorQ(Model):
    """An actor and one or two Q critics for DDPG, TD3 and SAC, each an :func:`mlp`, with PARL's
    roles.

    ``policy(obs)`` is ``tanh(actor(obs))`` in [-1, 1], or with ``gaussian`` the pair
    ``(mean, log_std)`` before SAC's tanh squash; ``value(obs, action)`` is ``Q`` ``[batch, 1]``,
    or ``(Q1, Q2)`` with ``twin_q`` (``Q1(obs, action)`` the first alone);
    ``get_actor_params()`` / ``get_critic_params()`` feed the two optimizers.

    Args:
        obs_dim: observation size.
        act_dim: action dimensions.
        hidden: units per hidden layer (two layers), unless ``net_arch`` says otherwise.
        twin_q: two critics (TD3, SAC) instead of one (DDPG).
        gaussian: a Gaussian policy head (SAC) instead of a deterministic one.
        net_arch: units of each hidden layer of the actor and of each critic (SB3's ``net_arch``
            list, e.g. TD3's ``[400, 300]``).
        activation: ``"relu"`` (SB3's) or ``"tanh"``.
        init: the layers' initialisation (:func:`linear`; ``"torch"`` is SB3's).
        normalize_obs: standardise observations by running statistics first (an
            :class:`parl_lite.utils.normalization.ObsNormalizer`, updated by the training loop).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 64, twin_q: bool = False,
                 gaussian: bool = False, *, net_arch: "Sequence[int] | None" = None, activation: str = "relu",
                 init: str = "default", normalize_obs: bool = False) -> None:
        super().__init__()
        self.twin_q, self.gaussian = twin_q, gaussian
        arch: int | Sequence[int] = hidden if net_arch is None else _arch("net_arch", net_arch)
        self.actor = mlp(obs_dim, arch, 2 * act_dim if gaussian else act_dim, activation, init)
        if twin_q:
            self.critic1 = mlp(obs_dim + act_dim, arch, 1, activation, init)
            self.critic2 = mlp(obs_dim + act_dim, arch, 1, activation, init)
        else:
            self.critic = mlp(obs_dim + act_dim, arch, 1, activation, init)
        self.obs_normalizer = ObsNormalizer(obs_dim) if normalize_obs else None

    def _obs(self, obs: paddle.Tensor) -> paddle.Tensor:
        return self.obs_normalizer(obs) if self.obs_normalizer is not None else obs

    def policy(self, obs: paddle.Tensor):
        if self.gaussian:
            mean, log_std = self.actor(self._obs(obs)).chunk(2, axis=-1)
            return mean, log_std
        return paddle.tanh(self.actor(self._obs(obs)))

    def _obs_action(self, obs: paddle.Tensor, action: paddle.Tensor) -> paddle.Tensor:
        return paddle.concat([self._obs(obs), action], axis=-1)

    def value(self, obs: paddle.Tensor, action: paddle.Tensor):
        obs_action = self._obs_action(obs, action)
        if self.twin_q:
            return self.critic1(obs_action), self.critic2(obs_action)
        return self.critic(obs_action)

    def Q1(self, obs: paddle.Tensor, action: paddle.Tensor) -> paddle.Tensor:  # noqa: N802 - PARL's name
        """The first critic alone (PARL's TD3 models' ``Q1``): ``[batch, 1]``."""
        critic = self.critic1 if self.twin_q else self.critic
        return critic(self._obs_action(obs, action))

    def forward(self, obs: paddle.Tensor):
        return self.policy(obs)

    def get_actor_params(self):
        return self.actor.parameters()

    def get_critic_params(self):
        critics = (self.critic1, self.critic2) if self.twin_q else (self.critic,)
        return [parameter for critic in critics for parameter in critic.parameters()]


def _orthogonal(gain: float) -> dict[str, paddle.ParamAttr]:
    return {"weight_attr": paddle.ParamAttr(initializer=paddle.nn.initializer.Orthogonal(float(gain))),
            "bias_attr": paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.0))}


class NatureCNN(paddle.nn.Layer):
    """The convolutional torso of the Nature DQN (Mnih et al. 2015), as SB3's ``NatureCNN``: three
    ReLU convolutions (32 8×8 stride 4, 64 4×4 stride 2, 64 3×3 stride 1) and a 512-unit ReLU layer,
    orthogonal initialisation with gain √2.

    Its input is a batch of stacked frames, channel first, ``uint8`` as the environment gives them
    (or float in [0, 255]): it scales them to [0, 1] itself, so that observations stay ``uint8``
    (a quarter of float32's bytes) through replay memories and between processes.

    Args:
        obs_shape: ``(channels, height, width)`` of one observation, e.g. ``(4, 84, 84)``.
        features: units of the last layer.
    """

    def __init__(self, obs_shape: tuple[int, ...], features: int = 512) -> None:
        super().__init__()
        channels, height, width = obs_shape
        gain = _orthogonal(math.sqrt(2))
        self.conv1 = Conv2D(channels, 32, 8, stride=4, **gain)
        self.conv2 = Conv2D(32, 64, 4, stride=2, **gain)
        self.conv3 = Conv2D(64, 64, 3, stride=1, **gain)
        for kernel, stride in ((8, 4), (4, 2), (3, 1)):
            height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
        if height <= 0 or width <= 0:
            raise ValueError(f"NatureCNN: observations of shape {tuple(obs_shape)} are too small for its convolutions "
                             "(at least 36 x 36)")
        self.fc = Linear(64 * height * width, features, **gain)
        self.features = features

    def forward(self, obs: paddle.Tensor) -> paddle.Tensor:
        x = obs.astype("float32") * (1.0 / 255.0)
        x = F.relu(self.conv3(F.relu(self.conv2(F.relu(self.conv1(x))))))
        return F.relu(self.fc(x.flatten(1)))


class CompactCNN(paddle.nn.Layer):
    """The smaller torso of PARL's IMPALA and A2C Atari examples (``AtariModel``), for 42×42 frames:
    ReLU convolutions of 16 4×4 stride 2 (padding 1), 32 4×4 stride 2 (padding 2), and 256 over the
    whole remaining map (11×11 for 42×42 frames), about a quarter of :class:`NatureCNN`'s
    arithmetic per frame at 42×42. Input as :class:`NatureCNN`'s (``uint8`` frames, scaled here).

    Args:
        obs_shape: ``(channels, height, width)`` of one observation, e.g. ``(4, 42, 42)``.
    """

    def __init__(self, obs_shape: tuple[int, ...]) -> None:
        super().__init__()
        channels, height, width = obs_shape
        gain = _orthogonal(math.sqrt(2))
        self.conv1 = Conv2D(channels, 16, 4, stride=2, padding=1, **gain)
        self.conv2 = Conv2D(16, 32, 4, stride=2, padding=2, **gain)
        for padding in (1, 2):
            height, width = (height + 2 * padding - 4) // 2 + 1, (width + 2 * padding - 4) // 2 + 1
        self.conv3 = Conv2D(32, 256, (height, width), **gain)
        self.features = 256

    def forward(self, obs: paddle.Tensor) -> paddle.Tensor:
        x = obs.astype("float32") * (1.0 / 255.0)
        return F.relu(self.conv3(F.relu(self.conv2(F.relu(self.conv1(x)))))).flatten(1)


_TORSOS = {"nature": NatureCNN, "compact": CompactCNN}


class CNNQNetwork(Model):
    """The Nature DQN: :class:`NatureCNN` and one Q-value per action (SB3's DQN ``CnnPolicy``).

    Args:
        obs_shape: ``(channels, height, width)``.
        act_dim: number of actions.
    """

    def __init__(self, obs_shape: tuple[int, ...], act_dim: int) -> None:
        super().__init__()
        self.torso = NatureCNN(obs_shape)
        self.q = Linear(self.torso.features, act_dim)

    def forward(self, obs: paddle.Tensor) -> paddle.Tensor:
        return self.q(self.torso(obs))


class CNNActorCritic(Model):
    """A policy and a value on one convolutional torso, :class:`NatureCNN` (SB3's A2C/PPO
    ``CnnPolicy``) or :class:`CompactCNN` (PARL's IMPALA and A2C examples), with PARL's
    ``AtariModel`` roles: ``policy(obs)`` gives the logits, ``value(obs)`` ``[batch, 1]``, and
    ``policy_and_value(obs)`` both from one pass through the torso (what the actor-critic
    algorithms' updates call); the heads are orthogonal with gains 0.01 and 1.

    Args:
        obs_shape: ``(channels, height, width)``.
        act_dim: number of actions.
        torso: ``"nature"`` or ``"compact"``.
    """

    def __init__(self, obs_shape: tuple[int, ...], act_dim: int, torso: str = "nature") -> None:
        super().__init__()
        if torso not in _TORSOS:
            raise ValueError(f"CNNActorCritic: torso must be one of {sorted(_TORSOS)}, got {torso!r}")
        self.torso = _TORSOS[torso](obs_shape)
        self.pi_out = orthogonal_linear(self.torso.features, act_dim, 0.01)
        self.vf_out = orthogonal_linear(self.torso.features, 1, 1.0)

    def policy(self, obs: paddle.Tensor) -> paddle.Tensor:
        return self.pi_out(self.torso(obs))

    def value(self, obs: paddle.Tensor) -> paddle.Tensor:
        return self.vf_out(self.torso(obs))

    def policy_and_value(self, obs: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        features = self.torso(obs)
        return self.pi_out(features), self.vf_out(features)

    def forward(self, obs: paddle.Tensor) -> paddle.Tensor:
        return self.policy(obs)
