"""The reporter: one progress display for every loop, and the scalars of the run.

On a terminal it is a tqdm bar (steps, rate, ETA, last evaluation in the postfix); when stderr is not
a terminal (CI, a file) it prints one plain line per evaluation to stdout instead, with the same
figures. Scalars go to TensorBoard and ``scalars.csv`` through :mod:`parl_lite.common.scalars` when a
log folder is given. The unit need not be environment steps: ``parl-lite es-train`` counts
generations.
"""
import math
import sys
import time
from collections import deque
from collections.abc import Callable

from parl_lite.common.scalars import SummaryWriter

__all__ = ["Reporter"]


class Reporter:
    """Progress of one run.

    Args:
        name: the algorithm's name, first on each line.
        total_steps: the step budget (the bar's 100%).
        start_steps: steps already done (a resumed run).
        start_seconds: the ``train_seconds`` those steps took (a resumed run's clock goes on from
            there; the rate counts this run's steps and seconds only).
        progress_bar: True: a bar; False: log lines; None: a bar when stderr is a terminal.
        logdir: folder of the TensorBoard events and ``scalars.csv``; None: no files.
        unit: what is counted (``step``, ``generation``), singular.
        echo: where the log lines go (default: ``print`` to stdout, flushed).
        window: the log line's rate and ETA over the last ``window`` reports (``None``: over the
            whole run); for a rate that changes as training goes (an ES generation takes longer as
            episodes get longer).
    """

    def __init__(self, name: str, total_steps: int, start_steps: int = 0, progress_bar: bool | None = None,
                 logdir: str | None = None, unit: str = "step", echo: Callable[[str], None] | None = None,
                 window: int | None = None, start_seconds: float = 0.0) -> None:
        self.name, self.total_steps, self.start_steps, self.unit = name, total_steps, start_steps, unit
        # (steps, seconds) of the reports the rate is taken over, the oldest first
        self._since: deque[tuple[int, float]] = deque([(start_steps, start_seconds)],
                                                      maxlen=window + 1 if window else None)
        self._echo = echo if echo is not None else _print
        self.writer = SummaryWriter(logdir) if logdir else None
        if progress_bar is None:
            progress_bar = sys.stderr.isatty()
        self._bar = None
        if progress_bar:
            from tqdm import tqdm

            self._bar = tqdm(total=total_steps, initial=start_steps, unit=unit, unit_scale=unit == "step",
                             desc=name, dynamic_ncols=True, file=sys.stderr)
        self._shown_steps = start_steps

    def advance(self, steps: int) -> None:
        """Move the bar to ``steps`` (environment steps, or the reporter's unit)."""
        if self._bar is not None and steps > self._shown_steps:
            self._bar.update(steps - self._shown_steps)
        self._shown_steps = steps

    def evaluation(self, steps: int, train_seconds: float, score: float, train_return: float,
                   stats: dict[str, float]) -> None:
        """Report an evaluation: the bar's postfix or a log line, and the scalars."""
        if self.writer is not None:
            self.writer.add_scalar("eval/return", score, steps)
            self.writer.add_scalar("train/return", train_return, steps)
            for key, value in stats.items():
                self.writer.add_scalar(f"train/{key}", value, steps)
        extra = "".join(f"  {key} {value:.4g}" for key, value in list(stats.items())[:3])
        self.progress(steps, train_seconds, f"train return {train_return:7.1f}  eval {score:7.1f}{extra}  "
                      f"train {train_seconds:6.1f}s", {"eval": f"{score:.1f}", "train_return": f"{train_return:.1f}"})

    def progress(self, steps: int, train_seconds: float, details: str, postfix: dict[str, str]) -> None:
        """Move to ``steps``: on a bar, show ``postfix`` beside it; otherwise log one line with the
        position, the rate and the ETA (from ``train_seconds`` of this run, over the ``window``), then
        ``details``."""
        if self._bar is not None:
            self._bar.set_postfix(postfix, refresh=False)
            self.advance(steps)
            return
        if self._since.maxlen:  # a window: the rate since the report ``window`` reports ago
            self._since.append((steps, train_seconds))
        first_steps, first_seconds = self._since[0]
        seconds = train_seconds - first_seconds
        rate = (steps - first_steps) / seconds if seconds > 0 else float("nan")
        eta = max(self.total_steps - steps, 0) / rate if rate > 0 else float("nan")
        self._echo(f"{self.name} {self.unit}s {steps:7d}/{self.total_steps}  {_rate(rate)} {self.unit}s/s  "
                   f"ETA {_duration(eta)}  {details}")

    def close(self) -> None:
        """Close the bar and the log files."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self.writer is not None:
            self.writer.close()


def _print(line: str) -> None:
    print(line, flush=True)


def _rate(per_second: float) -> str:
    return f"{per_second:6.0f}" if not per_second < 100 else f"{per_second:6.3g}"


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "   ?"
    return time.strftime("%H:%M:%S", time.gmtime(seconds)) if seconds >= 3600 else f"{seconds:4.0f}s"
