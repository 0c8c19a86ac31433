"""``parl_lite.Future``: the result of a remote call that may not have arrived yet."""
import concurrent.futures
from typing import Any

from parl_lite.remote.errors import FutureObjectEmpty

__all__ = ["Future"]


class Future(concurrent.futures.Future):
    """A ``concurrent.futures.Future`` for a remote call (so ``concurrent.futures.wait`` and
    ``as_completed`` accept it), with PARL's ``get()``, ``get_nowait()`` and ``empty()``.

    Unlike PARL's, ``get()`` may be called again: it returns the same value (or raises the same
    exception). A remote call cannot be taken back once sent, so ``cancel()`` always returns False.
    """

    def __init__(self) -> None:
        super().__init__()
        self.set_running_or_notify_cancel()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """The call's value (or its exception, raised here).

        Args:
            block: wait for the result; ``False``: raise :class:`FutureObjectEmpty` at once if
                it has not arrived.
            timeout: seconds to wait at most (None: no limit), then :class:`FutureObjectEmpty`.
        """
        if not isinstance(block, bool):
            raise TypeError(f"Future.get(block={block!r}): block is True or False (PARL's signature "
                            "get(block=True, timeout=None)); give seconds as timeout=")
        if timeout is not None and timeout < 0:
            raise ValueError(f"Future.get: timeout must be non-negative or None, got {timeout}")
        done, _ = concurrent.futures.wait([self], timeout=timeout if block else 0)
        if not done:
            waited = f"after {timeout} s" if block else "with block=False"
            raise FutureObjectEmpty(f"the result of the remote call is not available {waited}")
        return self.result()

    def get_nowait(self) -> Any:
        """``get(block=False)``."""
        return self.get(block=False)

    def empty(self) -> bool:
        """True while the result has not arrived."""
        return not self.done()
