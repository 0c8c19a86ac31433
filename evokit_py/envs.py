"""The environment a candidate is evaluated on: making it, the one check of its spaces, and the one
map from a policy's output to an action.

evokit_py takes observations that are a flat Box (a vector of numbers) and actions that are
Discrete or a flat Box; :func:`make_env` refuses any other environment before anything runs, so
that everything built on its spaces can rely on them.
"""
import gymnasium as gym
import numpy as np

from evokit_py.sections import EnvConfig, MLPConfig, PolicyConfig

__all__ = ["make_env", "observation_size", "action_size", "mlp_output_activation", "ActionMap"]


def make_env(config: EnvConfig) -> gym.Env:
    """The environment of the ``env`` block, its spaces checked; ``env.max_steps`` is its horizon
    (gymnasium's ``max_episode_steps``: it shortens or lengthens the env's own time limit).

    Raises:
        ValueError: naming ``env.id`` / ``env.kwargs``: the environment cannot be made, or its
            observations are not a flat Box or its actions neither Discrete nor a flat Box.
    """
    try:
        env = gym.make(config.id, max_episode_steps=config.max_steps, **config.kwargs)  # None: the env's own
    except gym.error.Error as error:
        raise ValueError(f"env.id / env.kwargs: cannot make {config.id!r} with {config.kwargs}: {error}") from error
    except TypeError as error:
        raise ValueError(f"env.kwargs: {config.kwargs} do not fit {config.id!r}: {error}") from error
    try:
        observation_size(env.observation_space)
        action_size(env.action_space)
    except ValueError as error:
        env.close()
        raise ValueError(f"env.id: {config.id} {error}") from None
    return env


def _flat_box_size(space: gym.Space) -> int | None:
    """The length of a flat Box's vectors (``None`` for any other space)."""
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return int(space.shape[0])
    return None


def observation_size(space: gym.Space) -> int:
    """The length of the observations of ``space``.

    Raises:
        ValueError: ``space`` is not a flat Box.
    """
    size = _flat_box_size(space)
    if size is None:
        raise ValueError(f"has the observation space {space}; evokit_py needs a flat Box (a vector of numbers)")
    return size


def action_size(space: gym.Space) -> int:
    """The policy outputs ``space`` needs: one score per action (Discrete), one per dimension (Box).

    Raises:
        ValueError: ``space`` is neither Discrete nor a flat Box.
    """
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    size = _flat_box_size(space)
    if size is None:
        raise ValueError(f"has the action space {space}; evokit_py needs Discrete or a flat Box")
    return size


def mlp_output_activation(mlp: MLPConfig, space: gym.Space) -> str:
    """The output activation of the ``policy.mlp`` block's MLP for the action ``space`` (``auto``:
    none, the argmax, for Discrete; tanh, scaled to the bounds, for Box)."""
    if mlp.output_activation != "auto":
        return mlp.output_activation
    return "none" if isinstance(space, gym.spaces.Discrete) else "tanh"


class ActionMap:
    """Policy output row -> environment action: argmax for Discrete; for Box, a tanh output in
    [-1, 1] is scaled to finite bounds, anything else is clipped to them.

    Args:
        space: the action space (checked by :func:`make_env`).
        policy: the ``policy`` block: an MLP's tanh output is scaled (:func:`mlp_output_activation`),
            an ONNX file's output is clipped.
    """

    def __init__(self, space: gym.Space, policy: PolicyConfig):
        self.discrete = isinstance(space, gym.spaces.Discrete)
        if not self.discrete:
            assert isinstance(space, gym.spaces.Box), "make_env checked the action space"
            self.low, self.high = space.low.astype(np.float32), space.high.astype(np.float32)
            finite = bool(np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high)))
            self.scale = finite and not policy.onnx and mlp_output_activation(policy.mlp, space) == "tanh"

    def __call__(self, output: np.ndarray):
        if self.discrete:
            return int(output.argmax())
        if self.scale:
            return self.low + (output + 1.0) * 0.5 * (self.high - self.low)
        return np.minimum(np.maximum(output, self.low), self.high)  # np.clip's bits, in a third of its time
