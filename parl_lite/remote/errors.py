"""Exceptions raised to the caller of a remote actor, and failures as they travel to it."""
import concurrent.futures
import pickle
import traceback
from dataclasses import dataclass
from typing import Any

import cloudpickle

__all__ = [
    "RemoteError", "ActorDiedError", "SerializationError", "MemoryLimitError", "FutureObjectEmpty",
    "RemoteFailure",
]


class RemoteError(Exception):
    """An actor raised an exception whose type could not be re-created here, or one that is not an
    ``Exception`` (``SystemExit``, ``KeyboardInterrupt``: raising those here would end the caller).

    Exceptions that can be re-created are raised with their own type, which then also derives from
    ``RemoteError``; either way the message ends with the remote traceback.
    """


class ActorDiedError(RemoteError):
    """The process hosting the actor exited (crashed, was killed, or the actor was closed)."""


class MemoryLimitError(ActorDiedError):
    """The actor went over its ``max_memory`` and was stopped."""


class SerializationError(RemoteError):
    """An argument or return value of a remote call could not be pickled."""


class FutureObjectEmpty(concurrent.futures.TimeoutError):
    """``future.get(block=False)`` found no result yet, or ``get(timeout=...)`` waited in vain
    (PARL's name; a ``TimeoutError``, as ``future.result(timeout)`` raises)."""


@dataclass
class RemoteFailure:
    """What a worker sends back when a call fails."""

    type_name: str
    message: str
    traceback: str
    pickled: bytes | None = None  # the exception itself, when it survives a pickle round trip
    serialization: bool = False  # the failure was pickling the return value

    @classmethod
    def from_exception(cls, exc: BaseException, serialization: bool = False) -> "RemoteFailure":
        """Describe ``exc`` (raised in this process) for the caller; skips the worker's own frame."""
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        try:
            pickled = cloudpickle.dumps(exc)
            pickle.loads(pickled)  # some exceptions pickle but cannot be rebuilt: check here
        except Exception:
            pickled = None
        return cls(type(exc).__qualname__, str(exc), text, pickled, serialization)

    def to_exception(self, where: str) -> BaseException:
        """The exception to raise in the caller; ``where`` names the actor and method."""
        if self.serialization:
            return SerializationError(f"{where}: the return value cannot be pickled: {self.message}")
        if self.pickled is not None:
            try:
                exc = pickle.loads(self.pickled)
            except Exception:
                exc = None
            if isinstance(exc, Exception):
                return _with_remote_traceback(exc, self.traceback)
        return RemoteError(f"{where} raised {self.type_name}: {self.message}\n\n"
                           f"Remote traceback (most recent call last):\n{self.traceback}")


_WRAPPED: dict[type[BaseException], type[BaseException] | None] = {}


def _with_remote_traceback(exc: BaseException, remote_traceback: str) -> BaseException:
    """Return ``exc`` as an instance of a subclass of its type and of RemoteError whose message
    ends with the remote traceback; ``exc`` itself if its type cannot be subclassed."""
    if isinstance(exc, RemoteError):
        return exc
    wrapper = _wrapper_class(type(exc))
    if wrapper is None:
        return exc
    # rebuilt the way pickle rebuilt it, so that fields set by the constructor (an OSError's
    # filename, a UnicodeDecodeError's position and reason) survive
    reduced = exc.__reduce__()
    try:
        if isinstance(reduced, str) or reduced[0] is not type(exc):
            raise TypeError("rebuilt by a function of its own")
        wrapped = wrapper(*reduced[1])
    except Exception:
        wrapped = wrapper.__new__(wrapper, *exc.args)
        wrapped.args = exc.args
    wrapped.__dict__.update(exc.__dict__)
    wrapped.__dict__["_remote_traceback"] = remote_traceback
    return wrapped


def _wrapper_class(original: type[BaseException]) -> type[BaseException] | None:
    if original not in _WRAPPED:
        def __str__(self: BaseException) -> str:
            return (f"{original.__str__(self)}\n\nRemote traceback (most recent call last):\n"
                    f"{self.__dict__.get('_remote_traceback', '')}")

        def __reduce__(self: BaseException) -> tuple[Any, ...]:
            reduced = original.__reduce__(self)
            if isinstance(reduced, str):  # a global's name: never for exceptions, which reduce to tuples
                return original, self.args
            _, arguments, *state = reduced
            if state and isinstance(state[0], dict):
                state[0] = {key: value for key, value in state[0].items() if key != "_remote_traceback"}
            return (original, arguments, *state)

        try:
            _WRAPPED[original] = type(original.__name__, (original, RemoteError), {
                "__str__": __str__, "__reduce__": __reduce__,
                "__module__": original.__module__, "__qualname__": original.__qualname__,
            })
        except TypeError:  # e.g. a layout conflict with a built-in exception type
            _WRAPPED[original] = None
    return _WRAPPED[original]
