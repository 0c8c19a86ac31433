"""The ask/tell interface every solver implements, and what the config and the checkpoints know of it.

A solver is built from plain values; :meth:`Solver.from_config` makes it from the config's ``solver``
block, which holds the solver's own settings (see :mod:`evokit_py.solvers.settings`).
A generation is ``infos = solver.ask()``; every candidate ``solver.basis().candidate(info, noise)``
is evaluated somewhere (any process holding the same noise); ``solver.tell(infos, fitness)``.
Only the basis (once per generation), the infos and the fitness values cross process boundaries.
The draws of generation ``g`` come from ``default_rng([sampling seed, g])``: a solver restored from a
checkpoint asks exactly what the uninterrupted one would have asked.

Versions (asynchronous updates): every ``tell`` makes a new parameter version (the generation
number) and every asked info carries the version it was drawn around. ``tell`` takes infos of the
current version and, from solvers that can correct them (``accepts_stale``: BASIC_ES), of the last
``solver.max_staleness`` versions; older ones are refused (:class:`StaleSampleError`) or dropped
and counted (``stale="drop"``), as the caller chooses.

Previews (``can_preview``: BASIC_ES): before an update, ``preview(infos, fitness)`` gives the id of
the parameters that update would reach from the results in so far, without changing the solver.
Candidates drawn around it (``preview_basis(id)``, infos tagged ``version=generation + 1`` and
``preview=id``) are corrected at the update by the difference between the preview and the
parameters reached, like stale samples; a preview lives as long as its version is kept and is not
part of the solver's state (``state_dict``): a caller that keeps candidates drawn around previews
across a checkpoint keeps those previews with them and gives them back (``restore_previews``).
"""
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from evokit_py.basis import Basis
from evokit_py.noise import NoiseSource, SamplingInfo
from evokit_py.solvers.settings import SolverKeys, SolverSettings, StateLayout
from parl_lite.common.datasets import DatasetError, check_integer_range

__all__ = ["Solver", "StaleSampleError", "centered_rank"]


class StaleSampleError(ValueError):
    """A sampling info was drawn around a parameter version the solver no longer keeps."""


def centered_rank(fitness: np.ndarray) -> np.ndarray:
    """Ranks scaled to [-0.5, 0.5] (OpenAI ES fitness shaping); ties broken by position."""
    fitness = np.asarray(fitness, dtype=np.float64)
    ranks = np.empty(len(fitness))
    ranks[np.argsort(fitness, kind="stable")] = np.arange(len(fitness))
    return ranks / max(len(fitness) - 1, 1) - 0.5


class Solver:
    """Base of the ask/tell state machines; fitness is *maximised* (pass ``-f`` to minimise ``f``).

    Args:
        x0: the initial parameters (flat).
        noise: where sampling infos get their noise.
        population_size: candidates per generation.
        sigma: the noise scale (the initial step size, the mutation std).
        max_staleness: versions back whose samples a solver that ``accepts_stale`` still corrects.
    """

    def __init__(self, x0: np.ndarray, noise: NoiseSource, population_size: int, sigma: float,
                 max_staleness: int = 0):
        x0 = np.asarray(x0, dtype=np.float64)
        if x0.shape != (noise.dim,):
            raise ValueError(f"x0 has shape {x0.shape}, the noise source has dim {noise.dim}")
        self.noise = noise
        self.dim = noise.dim
        self.population_size = population_size
        self.sigma = sigma
        self.generation = 0
        self.max_staleness = max_staleness
        self.dropped_samples = 0  # stale infos dropped by tell(..., stale="drop") so far
        self.previews: dict[int, tuple[int, Any]] = {}  # preview id -> (its version, what _preview made)
        self._last_preview_id = 0

    # whether _tell corrects infos of older versions; also the rule of asynchronous training
    # (train.mode: async), which needs a solver that does
    accepts_stale = False
    can_preview = False  # whether _preview and preview_basis are implemented (needs accepts_stale)
    # how many consecutive infos of an ask() belong together (a mirrored pair): an evaluator that
    # splits a generation keeps each group whole, so that it lands in one update
    group_size = 1
    # the dataclass of this solver's own keys of the config (its config_key says where they are:
    # solver.<config_key>, or the solver block itself for ""); a subclass has its base's keys too
    settings: ClassVar[type[SolverSettings] | None] = None
    # keys of the solver block (below solver.) a resumed run must keep: they decide the state's layout
    resume_fixed: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check_config(cls, config: SolverKeys) -> None:
        """Check what involves several keys of the ``solver`` block for this solver (a single key's
        type and range are checked by its field).

        Raises:
            ConfigError: naming the key below ``solver`` (``ga.elite_count: ...``).
        """

    @classmethod
    def from_config(cls, config: SolverKeys, x0: np.ndarray, noise: NoiseSource) -> "Solver":
        """This solver as the ``solver`` block ``config`` says, starting from ``x0``."""
        return cls(x0, noise, **config.common_arguments())

    @classmethod
    def state_layout(cls, config: SolverKeys, parameter_count: int) -> StateLayout:
        """The datasets of :meth:`state_dict` as the checkpoint of a run of ``config`` with
        ``parameter_count`` parameters holds them."""
        return StateLayout({"generation": "", "sigma": "", "dropped_samples": ""})

    @classmethod
    def check_state(cls, state: Mapping[str, np.ndarray], generation: int, config: SolverKeys) -> None:
        """Check the values of a checkpoint's state at ``generation`` (its layout and the values'
        finiteness are checked before).

        Raises:
            DatasetError: naming the first dataset out of range (``solver/sigma: ...``).
        """
        if "sigma" in state and not float(state["sigma"]) > 0:
            raise DatasetError(f"solver/sigma: {float(state['sigma'])}, expected a step size > 0")
        if "dropped_samples" in state:
            check_integer_range("solver/dropped_samples", state["dropped_samples"], (0, None))

    def _rng(self, extra_round: int = 0) -> np.random.Generator:
        key = [self.noise.seed, self.generation] + ([extra_round] if extra_round else [])
        return np.random.default_rng(key)

    def ask(self, extra_round: int = 0) -> list[SamplingInfo]:
        """The sampling infos of this generation's candidates (same call, same answer), each
        carrying the current version.

        Args:
            extra_round: 0 for the generation's candidates; k > 0 for a k-th set of further candidates
                around the same parameters (asynchronous mode: workers that are free before the
                update get more work instead of waiting).
        """
        return [dataclasses.replace(info, version=self.generation) for info in self._ask(self._rng(extra_round))]

    def _ask(self, rng: np.random.Generator) -> list[SamplingInfo]:
        raise NotImplementedError

    def basis(self) -> Basis:
        """What this generation's candidates are built from."""
        raise NotImplementedError

    def preview(self, infos: Sequence[SamplingInfo], fitness: Sequence[float]) -> int:
        """Preview the next version: the parameters ``tell(infos, fitness, stale="drop")`` would reach,
        the solver left as it is (asynchronous mode: the results in so far, before a batch is full).

        Returns:
            The preview's id: candidates drawn around ``preview_basis(id)`` carry ``version=generation +
            1, preview=id`` and are corrected when told (see the module docstring). 0 (no preview) when
            none of the infos is recent enough to be kept.

        Raises:
            NotImplementedError: the solver cannot preview (``can_preview`` is false).
            ValueError: as :meth:`tell`, for bad fitness values or infos the solver never made.
        """
        if not self.can_preview:
            raise NotImplementedError(f"{type(self).__name__} cannot preview its next version")
        values = self._checked_fitness(infos, fitness)
        keep = self._kept(infos)
        if not keep.any():
            return 0
        self._last_preview_id += 1
        made = self._preview([info for info, k in zip(infos, keep, strict=True) if k], values[keep])
        self.previews[self._last_preview_id] = (self.generation + 1, made)
        return self._last_preview_id

    def _preview(self, infos: list[SamplingInfo], fitness: np.ndarray) -> Any:
        raise NotImplementedError

    def preview_basis(self, preview: int) -> Basis:
        """What candidates drawn around preview ``preview`` are built from."""
        raise NotImplementedError(f"{type(self).__name__} cannot preview its next version")

    def restore_previews(self, previews: dict[int, tuple[int, Any]]) -> None:
        """Hold again previews this solver made before a checkpoint (id -> (version, what
        :meth:`preview` made; BASIC_ES: the parameters)), so that candidates drawn around them are
        corrected when told; those of versions no longer kept are left out, and new previews get
        other ids."""
        oldest = self._oldest_kept()
        self.previews.update({key: value for key, value in previews.items() if value[0] >= oldest})
        self._last_preview_id = max([self._last_preview_id, *previews])

    def _checked_fitness(self, infos: Sequence[SamplingInfo], fitness: "Sequence[float] | np.ndarray") -> np.ndarray:
        values = np.asarray(fitness, dtype=np.float64)
        if values.shape != (len(infos),):
            raise ValueError(f"tell: {len(infos)} sampling infos but fitness of shape {values.shape}")
        if not np.all(np.isfinite(values)):
            raise ValueError("tell: fitness values must be finite")
        return values

    def _oldest_kept(self) -> int:
        return self.generation - (self.max_staleness if self.accepts_stale else 0)

    def _kept(self, infos: Sequence[SamplingInfo]) -> np.ndarray:
        """Which infos this solver can take now; raises ValueError for ones it could never have made."""
        for info in infos:
            if info.preview:
                version = self.previews.get(info.preview, (info.version,))[0]
                if version != info.version:
                    raise ValueError(f"tell: sampling info of preview {info.preview} says version {info.version}, "
                                     f"that preview is of version {version}")
            elif info.version > self.generation:
                raise ValueError(f"tell: sampling info of version {info.version}, the solver is at {self.generation}")
        oldest = self._oldest_kept()
        return np.array([info.version >= oldest and (not info.preview or info.preview in self.previews)
                         for info in infos], dtype=bool)

    def tell(self, infos: Sequence[SamplingInfo], fitness: "Sequence[float] | np.ndarray",
             stale: Literal["refuse", "drop"] = "refuse") -> int:
        """Update from the evaluated candidates (higher fitness is better) and move to the next version.

        Args:
            infos: sampling infos of the current version, or of one of the ``max_staleness``
                versions before it if the solver ``accepts_stale``.
            fitness: one finite value per info.
            stale: what to do with an info older than that: ``"refuse"`` (raise
                :class:`StaleSampleError`, nothing changes) or ``"drop"`` (leave it out, count it in
                :attr:`dropped_samples`; no update at all if nothing is left).

        Returns:
            The number of infos dropped.
        """
        values = self._checked_fitness(infos, fitness)
        if stale not in ("refuse", "drop"):
            raise ValueError(f"tell: stale must be 'refuse' or 'drop', got {stale!r}")
        keep = self._kept(infos)
        dropped = int(len(infos) - keep.sum())
        if dropped and stale == "refuse":
            raise StaleSampleError(self._refusal([info for info, k in zip(infos, keep, strict=True) if not k]))
        self.dropped_samples += dropped
        if not keep.any():
            return dropped
        self._tell([info for info, k in zip(infos, keep, strict=True) if k], values[keep])
        self.generation += 1
        oldest = self._oldest_kept()
        self.previews = {key: value for key, value in self.previews.items() if value[0] >= oldest}
        return dropped

    def _refusal(self, refused: list[SamplingInfo]) -> str:
        oldest = self._oldest_kept()
        kept = f"versions {oldest}..{self.generation}" if oldest < self.generation else f"version {self.generation}"
        why = f"solver.max_staleness is {self.max_staleness}" if self.accepts_stale else \
            f"{type(self).__name__} does not correct stale samples"
        unknown = [info.preview for info in refused if info.version >= oldest]
        if unknown:
            return (f"tell: {len(refused)} sampling info(s) drawn around preview {unknown[0]}, which this solver "
                    f"does not hold (previews are not part of its state)")
        return (f"tell: {len(refused)} sampling info(s) of version {min(info.version for info in refused)}; "
                f"the solver keeps {kept} ({why})")

    def _tell(self, infos: list[SamplingInfo], fitness: np.ndarray) -> None:
        raise NotImplementedError

    def solution(self) -> np.ndarray:
        """The current best guess of the parameters (a copy)."""
        raise NotImplementedError

    def stop_reason(self) -> str | None:
        """The termination criterion that ended the search, or ``None`` while it goes on."""
        return None

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything needed to continue exactly, as arrays (for HDF5)."""
        return {"generation": np.asarray(self.generation), "sigma": np.asarray(self.sigma),
                "dropped_samples": np.asarray(self.dropped_samples)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.generation = int(state["generation"])
        self.sigma = float(state["sigma"])
        self.dropped_samples = int(state.get("dropped_samples", 0))
