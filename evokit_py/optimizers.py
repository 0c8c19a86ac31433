"""First-order optimizers on flat float64 parameter vectors (EvoKit's SGD, Momentum, Adam).

Each ``step(params, gradient)`` *descends* ``gradient`` and returns the new parameters; ES passes
the negated ascent direction. State is a dict of arrays so that it saves to HDF5 as is.
"""

import numpy as np

__all__ = ["Optimizer", "SGD", "Momentum", "Adam"]


class Optimizer:
    """Base class: ``step`` plus ``state_dict`` / ``load_state_dict``."""

    def __init__(self, dim: int, lr: float):
        self.dim = dim
        self.lr = lr
        self.t = 0

    def step(self, params: np.ndarray, gradient: np.ndarray) -> np.ndarray:
        """Args: params, gradient: float arrays of shape (dim,). Returns: the updated parameters."""
        if gradient.shape != (self.dim,):
            raise ValueError(f"gradient has shape {gradient.shape}, the optimizer expects ({self.dim},)")
        self.t += 1
        return params - self._direction(gradient)

    def _direction(self, gradient: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"t": np.asarray(self.t)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.t = int(state["t"])


class SGD(Optimizer):
    def _direction(self, gradient):
        return self.lr * gradient


class Momentum(Optimizer):
    def __init__(self, dim: int, lr: float, mu: float = 0.9):
        super().__init__(dim, lr)
        self.mu = mu
        self.velocity = np.zeros(dim)

    def _direction(self, gradient):
        self.velocity = self.mu * self.velocity + (1.0 - self.mu) * gradient
        return self.lr * self.velocity

    def state_dict(self):
        return {**super().state_dict(), "velocity": self.velocity.copy()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.velocity = np.array(state["velocity"], dtype=np.float64)


class Adam(Optimizer):
    def __init__(self, dim: int, lr: float, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8):
        super().__init__(dim, lr)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.m = np.zeros(dim)
        self.v = np.zeros(dim)

    def _direction(self, gradient):
        self.m = self.beta1 * self.m + (1.0 - self.beta1) * gradient
        self.v = self.beta2 * self.v + (1.0 - self.beta2) * gradient * gradient
        step_size = self.lr * np.sqrt(1.0 - self.beta2 ** self.t) / (1.0 - self.beta1 ** self.t)
        return step_size * self.m / (np.sqrt(self.v) + self.epsilon)

    def state_dict(self):
        return {**super().state_dict(), "m": self.m.copy(), "v": self.v.copy()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.m = np.array(state["m"], dtype=np.float64)
        self.v = np.array(state["v"], dtype=np.float64)

