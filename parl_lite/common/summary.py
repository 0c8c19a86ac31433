"""The one summary of a training run that every script prints as its last line (JSON)."""
import dataclasses
import json
import math

__all__ = ["RunSummary"]


@dataclasses.dataclass
class RunSummary:
    """What a run did.

    Attributes:
        algo: the algorithm's name (``PPO``, ``DDQN``, ...).
        env: the gymnasium id.
        seed: the run's seed.
        steps: environment steps taken.
        solved_at: steps at the first evaluation that reached the target; None if none did.
        eval_return: mean return of the last evaluation (nan before the first; ``null`` in the JSON).
        best_eval_return: the best mean return of the evaluations so far, across resumes (nan before
            the first; ``null`` in the JSON); es-train exports the policy of that evaluation.
        train_seconds: training wall-clock, evaluations excluded.
        train_cpu_seconds: CPU time of this process over the same spans (fairer on a loaded machine).
        updates: ``learn`` calls.
        updates_per_second: ``updates / train_seconds``.
        actors: remote rollout actors (asynchronous loops), else None.
        checkpoint: the checkpoint written at the end (or on Ctrl-C or SIGTERM), if any.
        interrupted: the run was stopped by Ctrl-C or SIGTERM.
    """

    algo: str
    env: str
    seed: int
    steps: int = 0
    solved_at: int | None = None
    eval_return: float = float("nan")
    best_eval_return: float = float("nan")
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0
    updates: int = 0
    updates_per_second: float = 0.0
    actors: int | None = None
    checkpoint: str | None = None
    interrupted: bool = False

    @property
    def solved(self) -> bool:
        """The target was reached."""
        return self.solved_at is not None

    def to_json(self) -> str:
        """One line of JSON, times rounded to 0.01 s; a number that is not finite (an evaluation
        return before the first evaluation) is ``null``, since JSON has no NaN."""
        fields = dataclasses.asdict(self)
        for key in ("train_seconds", "train_cpu_seconds", "updates_per_second"):
            fields[key] = round(fields[key], 2)
        fields["solved"] = self.solved
        for key, value in fields.items():
            if isinstance(value, float) and not math.isfinite(value):
                fields[key] = None
        return json.dumps(fields, allow_nan=False)
