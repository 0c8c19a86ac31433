"""The candidates of a sync generation evaluated before the run lost its workers, kept in the
checkpoint so that the resumed run evaluates only the others.

A candidate's result depends only on its sampling info and episode seeds, which depend only on
(seed, generation, index): a result kept this way is the one the resumed run would compute.
"""
from dataclasses import dataclass, field

import numpy as np

from evokit_py.checkpoint import UNFINISHED_DATASETS

__all__ = ["UnfinishedGeneration"]

_KEYS = UNFINISHED_DATASETS[1:]  # a Sampler's per-candidate result


@dataclass
class UnfinishedGeneration:
    """The results of some candidates of generation ``generation``, by candidate index (each a row
    of :meth:`evokit_py.sampler.Sampler.evaluate`'s result); none: ``generation`` is None."""
    generation: int | None = None
    rows: dict[int, dict] = field(default_factory=dict)

    def take(self, generation: int, population: int) -> dict[int, dict]:
        """The rows kept for ``generation`` of ``population`` candidates (none if they are of another
        generation or do not fit), forgotten here."""
        rows = self.rows if self.generation == generation and all(i < population for i in self.rows) else {}
        self.generation, self.rows = None, {}
        return rows

    def keep(self, generation: int, rows: dict[int, dict]) -> None:
        """Keep ``rows`` of ``generation`` for the checkpoint."""
        self.generation, self.rows = generation, dict(rows)

    def to_extra(self) -> dict[str, np.ndarray]:
        """The rows as checkpoint datasets (``extra/unfinished/*``; none when there are none). The
        generation is the checkpoint's: the run stopped before it was told."""
        if not self.rows:
            return {}
        indices = sorted(self.rows)
        return {"unfinished/indices": np.array(indices, dtype=np.int64),
                **{f"unfinished/{key}": np.concatenate([self.rows[i][key] for i in indices]) for key in _KEYS}}

    @classmethod
    def from_extra(cls, extra: dict[str, np.ndarray], generation: int) -> "UnfinishedGeneration":
        """What :meth:`to_extra` saved in a checkpoint of ``generation`` (nothing, if it saved none)."""
        if "unfinished/indices" not in extra:
            return cls()
        rows = {int(index): {key: extra[f"unfinished/{key}"][k:k + 1] for key in _KEYS}
                for k, index in enumerate(extra["unfinished/indices"])}
        return cls(generation, rows)
