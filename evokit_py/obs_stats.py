"""Observation normalisation: running statistics, and the one function that normalises an
observation for the policy.

Workers, :meth:`evokit_py.ESAgent.predict` and the offline sampler all feed the policy
``normalise(obs, *normalisation(stats, enabled, std_floor), clip)``: float32 arithmetic throughout, so
that a prediction sees bit for bit the input the candidates were trained on (the exported ONNX model
runs the same float32 operations in its graph). The floor and the clip are the config's
``observation_stats``: OpenAI ES's (std at least 0.1, clipped to ±5) by default, ARS's (no floor but
a guard against a zero std, no clip) with ``std_floor: 1.0e-4`` and ``clip: null``.
"""
import numpy as np

__all__ = ["ObsStats", "normalisation", "normalise"]


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

    def std(self, floor: float) -> np.ndarray:
        """The (population) standard deviation, at least ``floor``; ones before two observations."""
        if self.count < 2:
            return np.ones_like(self.total)
        return np.sqrt(np.maximum(self.total_sq / self.count - self.mean() ** 2, floor * floor))

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


def normalisation(stats: ObsStats, enabled: bool, std_floor: float) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The float32 mean and std (at least ``std_floor``) of ``stats`` that :func:`normalise` takes
    (``None, None`` when not ``enabled``: the config's ``observation_normalization`` is off)."""
    if not enabled:
        return None, None
    return stats.mean().astype(np.float32), stats.std(std_floor).astype(np.float32)


def normalise(obs: np.ndarray, mean: np.ndarray | None, std: np.ndarray | None, clip: float | None) -> np.ndarray:
    """One observation as the policy takes it: a float32 row ``[1, dim]``, normalised with the
    :func:`normalisation` ``mean`` and ``std`` and clipped to ``[-clip, clip]`` (not clipped when ``clip``
    is None; as it is when ``mean`` is ``None``)."""
    x = np.asarray(obs, dtype=np.float32)[None]
    if mean is None or std is None:
        return x
    # np.clip's bits in four ufunc calls, in place: this runs once per environment step
    x = np.subtract(x, mean)
    np.divide(x, std, out=x)
    if clip is None:
        return x
    np.maximum(x, -clip, out=x)
    return np.minimum(x, clip, out=x)
