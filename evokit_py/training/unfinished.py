"""The evaluated candidates of the update under way when a run stops, kept in the checkpoint
(``extra/unfinished/*``) so that the resumed run does not lose them.

- ``sync``: the candidates of generation g evaluated before the run lost its workers, by candidate
  index; the resumed run evaluates only the others. A candidate's result depends only on its
  sampling info and episode seeds, which depend only on (seed, generation, index): a result kept
  this way is the one the resumed run would compute.
- ``async``: the results that arrived since the last update (the schedule's list itself, so that
  whatever stops the run finds them there), each with its sampling info (the version it was drawn
  around, and its preview), and the previews they were drawn around (previews are not part of the
  solver's state); the resumed run's first update takes them first, stale ones corrected or dropped
  as any stale candidate. A sync generation's kept candidates resumed in async mode are taken the
  same way (their infos are the generation's); an async run's held results are not used by a sync
  run (its exact resume plays every candidate of a generation from (generation, index)).
"""
from dataclasses import dataclass, field

import numpy as np

from evokit_py.checkpoint import UNFINISHED_RESULTS
from evokit_py.noise import SamplingInfo
from evokit_py.solvers import Solver

__all__ = ["UnfinishedGeneration"]


@dataclass
class UnfinishedGeneration:
    """The evaluated candidates of the update under way (see the module docstring): of sync
    generation ``generation``, ``rows`` by candidate index (each a row of
    :meth:`evokit_py.sampler.Sampler.evaluate`'s result); of an async run, ``arrived`` (info, row)
    in order of arrival, and, read from a checkpoint, the ``previews`` they were drawn around
    (id -> (version, parameters)) until :meth:`hold` hands them to the solver."""
    generation: int | None = None
    rows: dict[int, dict] = field(default_factory=dict)
    arrived: list[tuple[SamplingInfo, dict]] = field(default_factory=list)
    previews: dict[int, tuple[int, np.ndarray]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows) + len(self.arrived)

    def take(self, generation: int, population: int) -> dict[int, dict]:
        """Sync: the rows kept for ``generation`` of ``population`` candidates (none if they are of
        another generation or do not fit), forgotten here with any async results."""
        rows = self.rows if self.generation == generation and all(i < population for i in self.rows) else {}
        self.generation, self.rows, self.arrived[:], self.previews = None, {}, [], {}
        return rows

    def keep(self, generation: int, rows: dict[int, dict]) -> None:
        """Sync: keep ``rows`` of ``generation`` for the checkpoint."""
        self.generation, self.rows = generation, dict(rows)

    def hold(self, solver: Solver) -> list[tuple[SamplingInfo, dict]]:
        """Async: the list the schedule keeps the results arrived since the last update in, those
        restored from a checkpoint first (their previews given back to ``solver``; a sync
        generation's rows with the infos ``solver`` asks at that generation)."""
        if self.rows and self.generation == solver.generation:
            infos = solver.ask()
            self.arrived[:0] = [(infos[i], row) for i, row in sorted(self.rows.items()) if i < len(infos)]
        self.generation, self.rows = None, {}
        if self.previews:
            solver.restore_previews(self.previews)
            self.previews = {}
        return self.arrived

    def to_extra(self, solver: Solver) -> dict[str, np.ndarray]:
        """The candidates as checkpoint datasets (``extra/unfinished/*``; none when there are none),
        with the previews of ``solver`` that held ones were drawn around. The generation is the
        checkpoint's: the run stopped before it was told."""
        if self.rows:
            indices = sorted(self.rows)
            return {"unfinished/indices": np.array(indices, dtype=np.int64),
                    **_results([self.rows[i] for i in indices])}
        if not self.arrived:
            return {}
        infos = [info for info, _ in self.arrived]
        extra = {"unfinished/infos": np.array([info.to_list() for info in infos], dtype=np.int64),
                 **_results([row for _, row in self.arrived])}
        previews = {**solver.previews, **self.previews}  # the latter: restored, not held by the solver yet
        ids = sorted({info.preview for info in infos if info.preview in previews})
        if ids:
            extra.update({"unfinished/previews/ids": np.array(ids, dtype=np.int64),
                          "unfinished/previews/versions": np.array([previews[i][0] for i in ids], dtype=np.int64),
                          "unfinished/previews/params": np.stack([previews[i][1] for i in ids])})
        return extra

    @classmethod
    def from_extra(cls, extra: dict[str, np.ndarray], generation: int) -> "UnfinishedGeneration":
        """What :meth:`to_extra` saved in a checkpoint of ``generation`` (nothing, if it saved none;
        checked by :func:`evokit_py.checkpoint.check_trainer_extra`)."""
        rows = [{key: extra[f"unfinished/{key}"][k:k + 1] for key in UNFINISHED_RESULTS}
                for k in range(len(extra.get("unfinished/returns", ())))]
        if "unfinished/indices" in extra:
            return cls(generation, {int(index): row for index, row in zip(extra["unfinished/indices"], rows,
                                                                         strict=True)})
        if "unfinished/infos" not in extra:
            return cls()
        arrived = [(SamplingInfo.from_list(info), row) for info, row in zip(extra["unfinished/infos"], rows,
                                                                           strict=True)]
        previews = {int(i): (int(version), np.array(params, dtype=np.float64)) for i, version, params in zip(
            extra.get("unfinished/previews/ids", ()), extra.get("unfinished/previews/versions", ()),
            extra.get("unfinished/previews/params", ()), strict=True)}
        return cls(arrived=arrived, previews=previews)


def _results(rows: list[dict]) -> dict[str, np.ndarray]:
    """The per-candidate result datasets of ``rows``, in their order."""
    return {f"unfinished/{key}": np.concatenate([row[key] for row in rows]) for key in UNFINISHED_RESULTS}
