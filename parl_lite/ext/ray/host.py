"""What runs inside a Ray actor process: the user's actor, its captured output, its memory limit.

A call's reply is the method's value itself (as with a plain Ray actor), or a :class:`Reply` when
the method raised or printed: exceptions travel as :class:`parl_lite.remote.errors.RemoteFailure`
(so the caller raises them with their own type, as on the local pool, never as ``RayTaskError``;
``SystemExit`` and ``KeyboardInterrupt`` too, which Ray would take for the end of the actor),
and what the actor printed since the last reply travels with it (so the caller prints it before
the call returns, as on the local pool).

This module does not import Ray at the top: the caller's side imports it before connecting.
"""
import io
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from parl_lite.remote.errors import RemoteFailure

__all__ = ["ActorHost", "Reply", "host_class", "writable", "MEMORY_KEY_PREFIX", "KV_NAMESPACE"]

KV_NAMESPACE = "parl_lite"
MEMORY_KEY_PREFIX = "max_memory_exceeded/"  # + Ray actor id: why the actor stopped
_MEMORY_CHECK_PERIOD = 0.05  # seconds
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def writable(value: Any) -> Any:
    """``value`` with every read-only numpy array in it (through lists, tuples and dicts) copied:
    Ray hands large arrays over as read-only views of its object store, the local pool as
    arrays the receiver owns."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return value
    if isinstance(value, numpy.ndarray):
        return value if value.flags.writeable else value.copy()
    if isinstance(value, (list, tuple)):
        if not any(issubclass(kind, (numpy.ndarray, list, tuple, dict)) for kind in set(map(type, value))):
            return value  # e.g. a long list of numbers: one pass in C, no copy
        items = [writable(item) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return type(value)(items) if type(value) in (list, tuple) else value
        return value
    if isinstance(value, dict):
        return {key: writable(item) for key, item in value.items()} if type(value) is dict else value
    return value


class _CapturedStream(io.TextIOBase):
    """A text stream whose writes are kept until the next reply takes them."""

    def __init__(self, name: str, sink: list[tuple[str, str]], lock: threading.Lock) -> None:
        self.name = name
        self._sink = sink
        self._lock = lock

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            with self._lock:
                self._sink.append((self.name, text))
        return len(text)


class Reply:
    """A reply that is not simply the method's value: a failure, or output to print first."""

    __slots__ = ("ok", "value", "output")

    def __init__(self, ok: bool, value: Any, output: list[tuple[str, str]]) -> None:
        self.ok = ok
        self.value = value  # the value, or a RemoteFailure
        self.output = output

    def __reduce__(self) -> tuple:
        return Reply, (self.ok, self.value, self.output)


class ActorHost:
    """Builds the user's actor in this process and serves its calls (the Ray actor's methods).

    A call returns the method's value itself, or a :class:`Reply` when it failed or printed.

    Args:
        cls: the user's class.
        args, kwargs: its constructor's arguments.
        max_memory: resident memory limit in MB; a thread stops the process when it is over.
    """

    def __init__(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any],
                 max_memory: float | None) -> None:
        self._output: list[tuple[str, str]] = []
        self._output_lock = threading.Lock()
        sys.stdout = _CapturedStream("stdout", self._output, self._output_lock)
        sys.stderr = _CapturedStream("stderr", self._output, self._output_lock)
        if max_memory is not None:
            threading.Thread(target=self._watch_memory, args=(max_memory,), name="parl_lite-max-memory",
                             daemon=True).start()
        self._actor: Any = None
        self._created = self._run(cls, args, kwargs)

    def parl_lite_ready(self) -> Reply:
        """The constructor's outcome: ``Reply(ok, (pid, Ray actor id) or failure, output)``."""
        created, self._created = self._created, None
        if isinstance(created, Reply) and not created.ok:
            return created
        self._actor = created.value if isinstance(created, Reply) else created
        import ray

        output = created.output if isinstance(created, Reply) else []
        return Reply(True, (os.getpid(), ray.get_runtime_context().get_actor_id()), output)

    def parl_lite_call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call a method this class does not forward by name (e.g. one ``__getattr__`` makes)."""
        return self._run(lambda *a, **k: getattr(self._actor, method)(*a, **k), args, kwargs)

    def parl_lite_get_attribute(self, name: str) -> Any:
        return self._run(getattr, (self._actor, name), {})

    def parl_lite_set_attribute(self, name: str, value: Any) -> Any:
        return self._run(setattr, (self._actor, name, value), {})

    def _run(self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            value = function(*writable(args), **writable(kwargs))
        except BaseException as exc:  # sys.exit() and KeyboardInterrupt too: Ray would end the actor
            return Reply(False, RemoteFailure.from_exception(exc), self._take_output())
        if self._output:
            return Reply(True, value, self._take_output())
        return value

    def _take_output(self) -> list[tuple[str, str]]:
        if not self._output:
            return []
        with self._output_lock:
            chunks = self._output[:]
            self._output.clear()
        output: list[tuple[str, str]] = []  # consecutive writes to one stream joined: whole lines
        for stream_name, text in chunks:
            if output and output[-1][0] == stream_name:
                output[-1] = (stream_name, output[-1][1] + text)
            else:
                output.append((stream_name, text))
        return output

    def _watch_memory(self, max_memory: float) -> None:
        """Stop this process once its resident memory is over ``max_memory`` MB, after leaving
        the reason where the caller looks for it (Ray's key-value store)."""
        import ray
        from ray.experimental import internal_kv

        actor_id = ray.get_runtime_context().get_actor_id()
        if actor_id is None:
            raise RuntimeError("the memory watch runs only inside a Ray actor")
        key = (MEMORY_KEY_PREFIX + actor_id).encode()
        while True:
            with open("/proc/self/statm") as statm:
                resident = int(statm.read().split()[1]) * _PAGE_SIZE / 2**20
            if resident > max_memory:
                internal_kv._internal_kv_put(key, f"{resident:.0f}".encode(), namespace=KV_NAMESPACE)
                os._exit(1)
            time.sleep(_MEMORY_CHECK_PERIOD)


def host_class(cls: type) -> tuple[type, frozenset]:
    """A subclass of :class:`ActorHost` named after ``cls`` with a method of the same name for each
    method of ``cls`` (Ray then runs ``actor.name.remote(*args)`` as directly as for a plain Ray
    actor, and its messages name the user's class); also returns the names it forwards."""
    forwarded = frozenset(name for name in dir(cls) if not name.startswith("__") and not hasattr(ActorHost, name)
                          and callable(getattr(cls, name, None)))
    namespace: dict[str, Any] = {"__qualname__": cls.__qualname__,
                                 "__module__": "parl_lite_ray_actor"}  # not importable: shipped by value
    for name in forwarded:
        namespace[name] = _forwarder(name)
    return type(cls.__name__, (ActorHost,), namespace), forwarded


def _forwarder(name: str) -> Callable[..., Any]:
    def forward(self: ActorHost, *args: Any, **kwargs: Any) -> Any:
        return self._run(getattr(self._actor, name), args, kwargs)

    forward.__name__ = forward.__qualname__ = name
    return forward
