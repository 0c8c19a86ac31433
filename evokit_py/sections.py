"""The sections of the ES config that are not the solver's: the environment, the policy, the
observation statistics and the training run (each a dataclass read by :func:`evokit_py.schema.build`);
and :class:`WorkerConfig`, what a sampling worker needs of them. :mod:`evokit_py.config` puts them
together with the ``solver`` block.
"""
from dataclasses import dataclass, field
from typing import Any, Literal

from evokit_py.schema import NON_NEGATIVE, POSITIVE, ConfigError, check

__all__ = ["EnvConfig", "MLPConfig", "PolicyConfig", "ObservationStatsConfig", "TrainConfig", "WorkerConfig"]

# a shift cancels a per-step bonus, of a reward's order; one of 1e300 leaves float64 returns holding only
# the episode lengths (returns differing by 1 need |shift| * steps < 2**52): no learning signal at all
_MAX_REWARD_SHIFT = 1e6
_REWARD_SHIFT = check(lambda v: abs(v) <= _MAX_REWARD_SHIFT,
                      f"must be within [-{_MAX_REWARD_SHIFT:g}, {_MAX_REWARD_SHIFT:g}] (it is subtracted from every "
                      f"step's reward; a larger shift drowns the rewards' differences in float64 rounding)")


@dataclass
class EnvConfig:
    """The gymnasium environment a candidate is evaluated on."""
    id: str = "CartPole-v1"
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_steps: int | None = field(default=None, metadata=POSITIVE)  # None: the env's own limit
    episodes_per_candidate: int = field(default=1, metadata=POSITIVE)
    # every candidate of a generation starts from the same states (common random numbers)
    common_episode_seeds: bool = True
    # subtracted from every step's reward of the candidates' episodes (a survival bonus cancelled during
    # training, as ARS does); evaluations and the reported returns are the environment's own
    reward_shift: float = field(default=0.0, metadata=_REWARD_SHIFT)


@dataclass
class MLPConfig:
    """A multilayer perceptron built into an ONNX graph (``hidden: []`` is a linear policy)."""
    hidden: list[int] = field(default_factory=list)
    activation: Literal["tanh", "relu"] = "tanh"
    # "auto": none (argmax) for discrete actions, tanh (scaled to the bounds) for continuous ones
    output_activation: Literal["auto", "none", "tanh", "softmax"] = "auto"
    init_std: float = field(default=0.0, metadata=NON_NEGATIVE)  # 0: all-zero initial weights
    bias: bool = True  # false: no bias in any layer (ARS's linear policy is x @ W)

    def __post_init__(self) -> None:
        bad = [size for size in self.hidden if size <= 0]
        if bad:
            raise ConfigError(f"hidden: layer sizes must be > 0, got {self.hidden}")


@dataclass
class PolicyConfig:
    """Either an ONNX file (its float weights become the parameters) or an MLP spec."""
    onnx: str | None = None
    mlp: MLPConfig = field(default_factory=MLPConfig)


@dataclass
class TrainConfig:
    # sync: whole generations, exact resume; async: every worker takes the next candidate as soon as it is
    # free, the solver updates whenever population_size results arrived (a solver that corrects stale
    # samples only: BASIC_ES)
    mode: Literal["sync", "async"] = "sync"
    # async: a candidate handed out once the next batch is complete without it is drawn around a preview
    # of the next update (the results in so far), not around the current parameters; false: EvoKit's way
    lookahead: bool = True
    generations: int = field(default=100, metadata=POSITIVE)
    target_return: float | None = 475.0  # stop when the evaluation mean reaches it (null: never)
    eval_every: int = field(default=1, metadata=POSITIVE)
    eval_episodes: int = field(default=5, metadata=POSITIVE)
    # an evaluation at the target is confirmed on this many fresh episodes before training stops (0: not)
    confirm_episodes: int = field(default=0, metadata=NON_NEGATIVE)
    workers: int = field(default=2, metadata=POSITIVE)
    # local pool: allow more than evokit_py.limits.WORKERS_PER_CPU workers per CPU (memory still bounds them)
    oversubscribe: bool = False
    address: str | None = None  # where the workers run (parl_lite.connect); None: the local pool
    # the most workers: more are added, up to this, while a cluster has free CPUs (a node joined); null: workers
    max_workers: int | None = field(default=None, metadata=POSITIVE)
    # seconds the run may have no worker left while one is being made, before it stops with its checkpoint
    capacity_wait: float = field(default=60.0, metadata=NON_NEGATIVE)
    checkpoint_every: int = field(default=10, metadata=POSITIVE)
    checkpoint_dir: str = "runs/es_cartpole/checkpoints"
    log_dir: str = "runs/es_cartpole"

    def __post_init__(self) -> None:
        if self.max_workers is not None and self.max_workers < self.workers:
            raise ConfigError(f"max_workers: must be >= train.workers ({self.workers}), got {self.max_workers}")


@dataclass
class ObservationStatsConfig:
    """How ``observation_normalization`` scales an observation: ``(obs - mean) / max(std, std_floor)``,
    clipped to ``[-clip, clip]``. The defaults are OpenAI ES's; ARS's filter is ``std_floor: 1.0e-4``
    (only a guard against a zero std) and ``clip: null``."""
    std_floor: float = field(default=0.1, metadata=POSITIVE)
    clip: float | None = field(default=5.0, metadata=POSITIVE)  # null: not clipped


@dataclass(frozen=True)
class WorkerConfig:
    """What a sampling worker reads of the config (:class:`evokit_py.sampler.Sampler`): the
    environment, the policy and the observation statistics. The ``solver`` block stays with the
    trainer: its settings are classes of the solver modules, which a worker never imports."""
    env: EnvConfig
    policy: PolicyConfig
    observation_stats: ObservationStatsConfig
