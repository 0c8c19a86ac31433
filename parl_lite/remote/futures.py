"""``parl_lite.Future``: the result of a remote call that may not have arrived yet."""
import concurrent.futures
from typing import Any

__all__ = ["Future"]


class Future(concurrent.futures.Future):
    """A ``concurrent.futures.Future`` for a remote call (so ``concurrent.futures.wait`` and
    ``as_completed`` accept it), with PARL's ``get()`` as an alias of ``result()``.

    A remote call cannot be taken back once sent, so ``cancel()`` always returns False.
    """

    def __init__(self) -> None:
        super().__init__()
        self.set_running_or_notify_cancel()

    def get(self, timeout: float | None = None) -> Any:
        """Wait for the call to finish and return its value (or raise its exception)."""
        return self.result(timeout)
