"""Callbacks: code that runs inside a training loop (SB3's idea, PARL's loops).

A callback sees the trainer (``trainer.steps``, ``trainer.agent``, ``trainer.last_stats``, ...) after
every round of experience and after every evaluation; returning False from either stops training.
"""
from collections.abc import Iterable
from typing import Any, Protocol

__all__ = ["Callback", "CallbackList", "StopOnThreshold", "EveryNSteps", "RunningTrainer"]


class RunningTrainer(Protocol):
    """What a callback is given: the running :class:`parl_lite.train.Trainer` (a protocol here, so
    that this module, which the trainer imports, imports nothing of it)."""

    agent: Any
    steps: int
    updates: int
    eval_return: float

    @property
    def last_stats(self) -> dict[str, float]: ...


class Callback:
    """Base class: override what you need; the defaults do nothing and continue."""

    def on_training_start(self, trainer: RunningTrainer) -> None:
        """Called once before the first round."""

    def on_step(self, trainer: RunningTrainer) -> bool:
        """Called after each round of experience (and its updates); False stops training."""
        return True

    def on_evaluation(self, trainer: RunningTrainer, score: float) -> bool:
        """Called after each evaluation with its mean return; False stops training."""
        return True

    def on_training_end(self, trainer: RunningTrainer) -> None:
        """Called once at the end (also after Ctrl-C)."""


class CallbackList(Callback):
    """Several callbacks in order; training stops when any of them says so."""

    def __init__(self, callbacks: Iterable[Callback]) -> None:
        self.callbacks: list[Callback] = list(callbacks)

    def on_training_start(self, trainer: RunningTrainer) -> None:
        for callback in self.callbacks:
            callback.on_training_start(trainer)

    def on_step(self, trainer: RunningTrainer) -> bool:
        return all([callback.on_step(trainer) for callback in self.callbacks])

    def on_evaluation(self, trainer: RunningTrainer, score: float) -> bool:
        return all([callback.on_evaluation(trainer, score) for callback in self.callbacks])

    def on_training_end(self, trainer: RunningTrainer) -> None:
        for callback in self.callbacks:
            callback.on_training_end(trainer)


class StopOnThreshold(Callback):
    """Stop once an evaluation's mean return reaches ``threshold``.

    Args:
        threshold: the mean return that counts as solved.
    """

    def __init__(self, threshold: float) -> None:
        self.threshold = float(threshold)

    def on_evaluation(self, trainer: RunningTrainer, score: float) -> bool:
        return not score >= self.threshold


class EveryNSteps(Callback):
    """Call ``function(trainer)`` once every ``n`` environment steps (at the first round past each
    multiple).

    Args:
        n: environment steps between calls (positive).
        function: called with the trainer; its return value is ignored.
    """

    def __init__(self, n: int, function) -> None:
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        self.n, self.function, self._next = n, function, n

    def on_step(self, trainer: RunningTrainer) -> bool:
        if trainer.steps >= self._next:
            self._next = (trainer.steps // self.n + 1) * self.n
            self.function(trainer)
        return True


def as_callback(callback: Callback | Iterable[Callback] | None) -> Callback:
    """One callback from None, a callback or a list of them."""
    if callback is None:
        return Callback()
    if isinstance(callback, Callback):
        return callback
    return CallbackList(callback)
