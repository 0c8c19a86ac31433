"""Hyperparameters as a dataclass: each field carries its help text; :func:`parse_args` turns the
dataclass into a command line (``--total-steps 1000``, ``--no-double`` for a True boolean).

A subclass changes an inherited field's default by declaring it again with the value only; its help
stays the base class's::

    @dataclasses.dataclass
    class Args(train.TrainArgs):
        lr: float = arg(7e-4, "RMSprop learning rate")   # a new field: value and help
        total_steps: int = 500_000                         # TrainArgs's field, another default
"""
import argparse
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, get_args, get_origin, get_type_hints

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["arg", "TrainArgs", "ContinuousOffPolicyArgs", "RemoteArgs", "AsyncTrainArgs", "parse_args"]

ArgsT = TypeVar("ArgsT", bound="DataclassInstance")


def arg(default: Any, help: str, choices: Sequence[Any] | None = None) -> Any:  # noqa: A002 - argparse's name
    """A dataclass field with its command-line help text (and allowed values)."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})


@dataclasses.dataclass
class TrainArgs:
    """What every training script takes besides its hyperparameters (see :class:`parl_lite.train.Trainer`)."""

    seed: int = arg(1, "seeds paddle, the environments, exploration and replay: a run repeats exactly")
    total_steps: int = arg(100_000, "environment steps at most")
    target: float | None = arg(None, "stop once the evaluation mean reaches this")
    eval_every: int = arg(5_000, "environment steps between evaluations")
    eval_episodes: int = arg(10, "greedy episodes per evaluation")
    logdir: str | None = arg(None, "write TensorBoard events and scalars.csv here")
    save: str | None = arg(None, "HDF5 checkpoint written at the end, on Ctrl-C or SIGTERM and every "
                                 "--checkpoint-every steps")
    checkpoint_every: int | None = arg(None, "environment steps between checkpoints (default: only at the end)")
    resume: str | None = arg(None, "continue from this checkpoint (weights, optimizer state, step count)")
    progress_bar: bool | None = arg(None, "progress bar (default: when stderr is a terminal; else log lines)")

    def run_options(self) -> dict[str, Any]:
        """The keyword arguments of :class:`parl_lite.train.Trainer` these fields give."""
        return {"seed": self.seed, "target": self.target, "eval_every": self.eval_every,
                "eval_episodes": self.eval_episodes, "logdir": self.logdir, "save": self.save,
                "checkpoint_every": self.checkpoint_every, "resume": self.resume}


@dataclasses.dataclass
class ContinuousOffPolicyArgs(TrainArgs):
    """:class:`TrainArgs` and what DDPG, TD3 and SAC share: an actor and a critic learning from a
    replay memory, on Pendulum-v1 by default; every knob of the RL Zoo's files for these algorithms
    is an option (their names are SB3's where ours differ only in spelling)."""

    env: str = arg("Pendulum-v1", "gymnasium id (a continuous action space)")
    learning_starts: int = arg(500, "uniform random steps before learning")
    batch_size: int = arg(256, "minibatch size")
    net_arch: tuple[int, ...] = arg((64, 64), "units of each hidden layer of the actor and of each critic")
    activation: str = arg("relu", "activation of the hidden layers", choices=("relu", "tanh"))
    init: str = arg("default", "layer initialisation: paddle's, or torch's (SB3's)", choices=("default", "torch"))
    gamma: float = arg(0.99, "discount")
    tau: float = arg(0.005, "soft target update rate")
    actor_lr: float = arg(1e-3, "Adam learning rate of the actor")
    critic_lr: float = arg(1e-3, "Adam learning rate of the critic(s)")
    buffer_size: int | None = arg(None, "replay memory capacity in transitions (default: the step budget)")
    train_freq: int = arg(1, "environment steps between rounds of updates")
    gradient_steps: int = arg(1, "updates per round")
    normalize: bool = arg(False, "standardise observations by running statistics (in the model: saved with "
                                 "its weights and in the exported ONNX policy)")
    normalize_reward: bool = arg(False, "scale the learning rewards by the running std of the discounted return")
    total_steps: int = 30_000
    target: float | None = -200.0
    eval_every: int = 500

    def model_options(self) -> dict[str, Any]:
        """The keyword arguments of :class:`parl_lite.utils.models.MLPActorQ` these fields give."""
        return {"net_arch": list(self.net_arch), "activation": self.activation, "init": self.init,
                "normalize_obs": self.normalize}

    def loop_options(self) -> dict[str, Any]:
        """The keyword arguments of :class:`parl_lite.train.OffPolicyTrainer` these fields give
        (with :meth:`run_options`)."""
        return {"learning_starts": self.learning_starts, "batch_size": self.batch_size,
                "memory_size": self.buffer_size, "train_every": self.train_freq,
                "gradient_steps": self.gradient_steps, "normalize_reward": self.normalize_reward,
                "gamma": self.gamma, **self.run_options()}


@dataclasses.dataclass
class RemoteArgs(TrainArgs):
    """What a script with remote actors takes besides: where they run."""

    address: str | None = arg(None, "where the actors run: a parl_lite cluster's master, host:port, or ray://... "
                                    "(default: the local pool)")

    def connect(self) -> None:
        """Connect ``parl_lite`` to ``--address`` (nothing to do for the local pool)."""
        if self.address:
            from parl_lite.remote.api import connect

            connect(self.address)


@dataclasses.dataclass
class AsyncTrainArgs(RemoteArgs):
    """What an :class:`parl_lite.train.AsyncTrainer` script takes besides: its rollout actors, and
    where they run."""

    actors: int = arg(2, "remote rollout actors to start with (a lost one is replaced)")
    max_actors: int | None = arg(None, "the most rollout actors: more are added while a cluster has free CPUs "
                                       "(default: --actors)")

    def actor_options(self) -> dict[str, Any]:
        """The keyword arguments of :class:`parl_lite.train.AsyncTrainer` about its actors."""
        return {"actors": self.actors, "max_actors": self.max_actors}


def parse_args(cls: type[ArgsT], description: str | None = None, argv: Sequence[str] | None = None,
               env_defaults: dict[str, dict[str, Any]] | None = None,
               atari_defaults: dict[str, Any] | None = None) -> ArgsT:
    """Build ``cls`` (a dataclass) from the command line; every field is an option.

    Args:
        cls: the dataclass; field ``foo_bar`` becomes ``--foo-bar``; a boolean that defaults to
            True becomes ``--no-foo-bar``, one that defaults to False or None ``--foo-bar``; a
            ``tuple[int, ...]`` (layer sizes) is written ``--net-arch 400,300``.
        description: the ``--help`` text (usually the script's docstring).
        argv: arguments (default: ``sys.argv[1:]``).
        env_defaults: other defaults per value of the ``env`` field (RL-Zoo's values differ per
            environment); options given on the command line win. For an ``env`` other than the
            field's default that this table does not set a ``target`` for, ``target`` defaults to
            gymnasium's ``reward_threshold`` of that environment (none if it has none): the default
            environment's target means nothing for another task.
        atari_defaults: other defaults for every Atari game (an ALE id that ``env_defaults`` does
            not list), e.g. the RL Zoo's ``atari`` block.
    """
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    hints = get_type_hints(cls)
    for field in dataclasses.fields(cls):
        option = "--" + field.name.replace("_", "-")
        kind = _base_type(hints[field.name])
        metadata = _metadata(cls, field.name)
        help_text = metadata.get("help", "")
        if kind is bool:
            if field.default is True:
                parser.add_argument("--no-" + field.name.replace("_", "-"), dest=field.name, action="store_false",
                                    help=help_text)
            else:
                parser.add_argument(option, dest=field.name, action="store_true", default=field.default,
                                    help=help_text)
            continue
        convert: Callable[[str], Any] = _positive_ints if kind is tuple else kind
        default: Any = field.default
        shown = "" if default is None else f" (default: {','.join(map(str, default)) if kind is tuple else default})"
        parser.add_argument(option, dest=field.name, type=convert, default=default,
                            choices=metadata.get("choices"), help=help_text + shown)
    fields = {field.name: field for field in dataclasses.fields(cls)}
    if "env" in fields:
        known, _ = parser.parse_known_args(argv)
        defaults = dict((env_defaults or {}).get(known.env, {}))
        if not defaults and atari_defaults is not None and _is_atari(known.env):
            defaults = dict(atari_defaults)
        if "target" in fields and "target" not in defaults and known.env != fields["env"].default:
            defaults["target"] = _reward_threshold(known.env)
        parser.set_defaults(**defaults)
    return cls(**vars(parser.parse_args(argv)))


def _is_atari(env_id: str) -> bool:
    """Whether ``env_id`` is an ALE game (an unknown id is not; making it says why later)."""
    import gymnasium

    from parl_lite.env.atari import is_atari

    try:
        return is_atari(env_id)
    except gymnasium.error.Error:
        return False


def _reward_threshold(env_id: str) -> float | None:
    """gymnasium's ``reward_threshold`` of ``env_id`` (``None``: it has none, or the id is not
    registered; making the environment says so later)."""
    import gymnasium

    try:
        return gymnasium.spec(env_id).reward_threshold
    except gymnasium.error.Error:
        return None


def _metadata(cls: type, name: str) -> Mapping[str, Any]:
    """The help and choices of field ``name``: from the class that declares it with :func:`arg`, the
    nearest in ``cls``'s MRO (a subclass that only changes the default declares it without them)."""
    for klass in cls.__mro__:
        field = getattr(klass, "__dataclass_fields__", {}).get(name)
        if field is not None and "help" in field.metadata:
            return field.metadata
    return {}


def _positive_ints(text: str) -> tuple[int, ...]:
    """``"400,300"`` -> ``(400, 300)`` (layer sizes)."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas (e.g. 400,300), got {text!r}")
    return sizes


def _base_type(hint: Any) -> type:
    """``int | None`` (or ``Optional[int]``) -> int; ``tuple[int, ...]`` (or ``... | None``) -> tuple."""
    if get_origin(hint) is not None and get_origin(hint) is not tuple:
        arguments = [a for a in get_args(hint) if a is not type(None)]
        hint = arguments[0] if arguments else hint
    return tuple if get_origin(hint) is tuple else hint
