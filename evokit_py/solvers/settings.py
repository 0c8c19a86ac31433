"""What the config and the checkpoints know of every solver: the keys of the ``solver`` block that
all solvers have (:class:`SolverKeys`) and the layout of a solver's state in a checkpoint
(:class:`StateLayout`).

A solver declares the rest itself, beside its ask/tell code (:class:`~evokit_py.solvers.base.Solver`):
the dataclass of its own keys, whose ``config_key`` says where they are (``"cma_es"``: the block
``solver.cma_es``; ``""``: keys of the ``solver`` block itself, as BASIC_ES's ``mirrored_sampling``),
the checks that involve several keys, whether it takes asynchronous updates, how it is built from the
block and the layout of its state. :mod:`evokit_py.config` composes the ``solver`` block from
:class:`SolverKeys` and the settings of every solver the registry knows
(:mod:`evokit_py.solvers.registry`), plugins included.
"""
import builtins
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from evokit_py.schema import NON_NEGATIVE, POSITIVE, ConfigError, check

__all__ = ["GaussianSamplingConfig", "SamplingConfig", "SolverKeys", "SolverSettings", "StateLayout"]

T = TypeVar("T")


class SolverSettings(Protocol):
    """A solver's settings: a dataclass of its own keys, and where they are in the ``solver`` block."""
    # "cma_es": the keys are the block solver.cma_es; "": they are keys of the solver block itself
    config_key: ClassVar[str]
    __dataclass_fields__: ClassVar[dict[str, Any]]


@dataclass
class GaussianSamplingConfig:
    std: float = field(default=0.1, metadata=POSITIVE)
    cached: bool = True  # True: a shared noise table; False: noise regenerated from a per-sample seed
    seed: int = field(default=7, metadata=NON_NEGATIVE)
    cache_size: int = field(default=1_000_000, metadata=POSITIVE)


@dataclass
class SamplingConfig:
    type: Literal["GAUSSIAN_SAMPLING"] = "GAUSSIAN_SAMPLING"
    gaussian_sampling: GaussianSamplingConfig = field(default_factory=GaussianSamplingConfig)


@dataclass
class SolverKeys:
    """The keys of the ``solver`` block that every solver has. The block itself is a subclass that
    :mod:`evokit_py.config` composes, with the settings of each solver as its fields (or, for those
    whose ``config_key`` is ``""``, as its bases); a solver reads its own with :meth:`settings`."""
    # a built-in solver or one an evokit_py.solvers plugin registers
    type: str = "BASIC_ES"
    population_size: int = field(default=16, metadata=check(lambda v: v >= 2, "must be >= 2"))
    # asynchronous updates: samples up to this many versions old are corrected (BASIC_ES), older refused
    max_staleness: int = field(default=4, metadata=NON_NEGATIVE)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)

    def settings(self, kind: builtins.type[T]) -> T:  # builtins: the field ``type`` hides the name
        """The settings of dataclass ``kind`` in this block (a solver's own keys).

        Raises:
            ConfigError: this block was not composed with ``kind`` (naming ``solver.type``).
        """
        if isinstance(self, kind):
            return self
        for each in dataclasses.fields(self):
            value = getattr(self, each.name)
            if type(value) is kind:
                return value
        raise ConfigError(f"type: this solver block has no {kind.__qualname__} settings (it was made for other solver "
                          f"types than {self.type}: parse the config again)")

    def common_arguments(self) -> dict[str, Any]:
        """The arguments of :class:`~evokit_py.solvers.base.Solver` every solver takes: the population
        size, the noise scale (``sampling.gaussian_sampling.std``) and ``max_staleness``."""
        return {"population_size": self.population_size, "sigma": self.sampling.gaussian_sampling.std,
                "max_staleness": self.max_staleness}


@dataclass(frozen=True)
class StateLayout:
    """The datasets of a solver's state as a checkpoint holds them (``solver/*``), checked before any
    value is read (:mod:`evokit_py.checkpoint_checks`); a dataset it does not name is refused.

    Attributes:
        shapes: dataset -> its shape as comma-separated size letters (``""``: a scalar). ``n`` is the
            parameter count; any other letter is bounded by ``sizes`` and bound to its size by the
            first dataset that has it.
        sizes: letter -> (the largest size it may have, what sets that bound, in words).
        parameters: the datasets that hold parameter vectors: the float32 policy runs them, so their
            values must fit float32.
    """
    shapes: Mapping[str, str]
    sizes: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    parameters: frozenset[str] = frozenset()

    def extended(self, shapes: Mapping[str, str], sizes: Mapping[str, tuple[int, str]] | None = None,
                 parameters: tuple[str, ...] = ()) -> "StateLayout":
        """This layout with more datasets (a subclass's state on top of its base's)."""
        return StateLayout({**self.shapes, **shapes}, {**self.sizes, **(sizes or {})},
                           self.parameters | frozenset(parameters))

