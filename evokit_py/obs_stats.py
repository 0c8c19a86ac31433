"""Observation normalisation: running statistics, and the one function that normalises an
observation for the policy.

Workers, :meth:`evokit_py.ESAgent.predict` and the offline sampler all feed the policy
``normalise(obs, *normalisation(stats, enabled))``: float32 arithmetic throughout, so that a
prediction sees bit for bit the input the candidates were trained on (the exported ONNX model runs
the same three float32 operations in its graph).
"""
import numpy as np

__all__ = ["OBS_CLIP", "ObsStats", "normalisation", "normalise"]

OBS_CLIP = 5.0  # normalised observations are clipped to [-OBS_CLIP, OBS_CLIP]


class ObsStats:
    """Running sums of observations (count, sum, sum of squares) -> mean and std (OpenAI ES)."""

    def __init__(self, dim: int):
        self.count = 0.0
        self.total = np.zeros(dim)
        self.total_sq = np.zeros(dim)

    def add(self, total: np.ndarray, total_sq: np.ndarray, count: float) -> None:
        self.count += float(count)
        self.total += total
        self.total_sq += total_sq

    def mean(self) -> np.ndarray:
        return self.total / self.count if self.count else np.zeros_like(self.total)

    def std(self) -> np.ndarray:
        if self.count < 2:
            return np.ones_like(self.total)
        return np.sqrt(np.maximum(self.total_sq / self.count - self.mean() ** 2, 1e-2))

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"count": np.asarray(self.count), "sum": self.total.copy(), "sumsq": self.total_sq.copy()}

    @classmethod
    def from_state_dict(cls, state: dict[str, np.ndarray]) -> "ObsStats":
        """Statistics holding what :meth:`state_dict` returned."""
        stats = cls(len(state["sum"]))
        stats.load_state_dict(state)
        return stats

    def copy(self) -> "ObsStats":
        return ObsStats.from_state_dict(self.state_dict())

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.count = float(state["count"])
        self.total = np.array(state["sum"], dtype=np.float64)
        self.total_sq = np.array(state["sumsq"], dtype=np.float64)


def normalisation(stats: ObsStats, enabled: bool = True) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The float32 mean and std of ``stats`` that :func:`normalise` takes (``None, None`` when not
    ``enabled``: the config's ``observation_normalization`` is off)."""
    if not enabled:
        return None, None
    return stats.mean().astype(np.float32), stats.std().astype(np.float32)


def normalise(obs: np.ndarray, mean: np.ndarray | None, std: np.ndarray | None) -> np.ndarray:
    """One observation as the policy takes it: a float32 row ``[1, dim]``, normalised with the
    :func:`normalisation` ``mean`` and ``std`` and clipped to ``[-OBS_CLIP, OBS_CLIP]`` (as it is
    when ``mean`` is ``None``)."""
    x = np.asarray(obs, dtype=np.float32)[None]
    if mean is None or std is None:
        return x
    # np.clip's bits in four ufunc calls, in place: this runs once per environment step
    x = np.subtract(x, mean)
    np.divide(x, std, out=x)
    np.maximum(x, -OBS_CLIP, out=x)
    return np.minimum(x, OBS_CLIP, out=x)
