"""Schedules of a hyperparameter over training steps (learning rate, exploration, clip range).

PARL's ``parl.utils.scheduler``: ``step(step_num)`` advances by ``step_num`` steps and returns the new value;
``value`` (or ``value_at(t)``) reads without advancing. Bad arguments raise ``ValueError`` (PARL:
``AssertionError``).
"""
from collections.abc import Sequence
from itertools import pairwise

__all__ = ["LinearDecayScheduler", "PiecewiseScheduler"]


class _Scheduler:
    """The stepping shared by the schedules; subclasses define ``value_at``."""

    steps: int

    @property
    def value(self) -> float:
        return self.value_at(self.steps)

    def step(self, step_num: int = 1) -> float:
        """Advance by ``step_num`` steps (PARL's argument name) and return the new value."""
        if step_num < 0:
            raise ValueError(f"step_num must be non-negative, got {step_num}")
        self.steps += step_num
        return self.value

    def value_at(self, steps: int) -> float:
        """The value after ``steps`` steps."""
        raise NotImplementedError


class LinearDecayScheduler(_Scheduler):
    """Linear interpolation from ``start_value`` at step 0 to ``end_value`` at ``max_steps``,
    constant afterwards.

    Args:
        start_value: value at step 0.
        max_steps: steps over which the value moves (positive).
        end_value: value from ``max_steps`` on.
    """

    def __init__(self, start_value: float, max_steps: int, end_value: float = 0.0) -> None:
        if max_steps <= 0:
            raise ValueError(f"max_steps must be positive, got {max_steps}")
        self.start_value, self.end_value, self.max_steps = float(start_value), float(end_value), int(max_steps)
        self.steps = 0

    def value_at(self, steps: int) -> float:
        """The value after ``steps`` steps."""
        fraction = min(max(steps, 0) / self.max_steps, 1.0)
        return self.start_value + fraction * (self.end_value - self.start_value)


class PiecewiseScheduler(_Scheduler):
    """Piecewise-constant schedule: ``[(0, 1e-3), (10_000, 5e-4)]`` gives 1e-3 on steps
    [0, 10000) and 5e-4 from step 10000 on (PARL's semantics). Before the first pair's step, the
    value is the first pair's (``[(3, 0.1)]`` is 0.1 throughout, as in PARL).

    Args:
        schedule: ``(start_step, value)`` pairs, at least one, with strictly increasing steps.
    """

    def __init__(self, schedule: Sequence[tuple[int, float]]) -> None:
        schedule = [(int(step), float(value)) for step, value in schedule]
        if not schedule:
            raise ValueError("schedule is empty: give at least one (step, value) pair")
        for (previous, _), (step, _) in pairwise(schedule):
            if step <= previous:
                raise ValueError(f"schedule steps must increase strictly, got {previous} then {step}")
        self.schedule = schedule
        self.steps = 0

    def value_at(self, steps: int) -> float:
        """The value after ``steps`` steps."""
        current = self.schedule[0][1]
        for start, value in self.schedule:
            if steps < start:
                break
            current = value
        return current
