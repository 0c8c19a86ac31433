"""The user's verbs: ``@remote_class``, ``connect``, ``get``, ``wait``, ``shutdown``.

::

    @parl_lite.remote_class                 # or @parl_lite.remote_class(wait=False, max_memory=512)
    class Actor:
        def run(self, n): ...

    actor = Actor()        # the instance lives in a worker process of the pool
    actor.run(10)          # runs there; wait=False returns a parl_lite.Future instead

PARL's spellings work too: ``parl_lite.connect("localhost:8010", distributed_files=[...])``,
``@remote_class(wait=False, max_memory=..., n_gpu=0)``, ``future.get()``, ``actor.destroy()``.
"""
import atexit
import concurrent.futures
import functools
import inspect
import math
import numbers
import threading
from typing import Any, TypeVar
from collections.abc import Callable, Sequence

from parl_lite.remote.backend import ActorChannel, ActorOptions, Backend, MethodReference
from parl_lite.remote.errors import ActorDiedError, MemoryLimitError, RemoteError, SerializationError
from parl_lite.remote.futures import Future

__all__ = [
    "remote_class", "connect", "shutdown", "get", "wait", "ActorHandle", "Future",
    "RemoteError", "ActorDiedError", "SerializationError", "MemoryLimitError",
]

CLUSTER_SCHEME = "cluster"  # the plugin that serves a plain "host:port" address

_backend: Backend | None = None
_backend_settings: dict[str, Any] | None = None  # what connect() was called with, to recognise a repeat
_backend_lock = threading.Lock()
_shutdown_registered = False

T = TypeVar("T", bound=type)


def connect(master_address: str | None = None, distributed_files: Sequence[str] | None = None, *,
            num_workers: int | None = None, threads_per_worker: int = 1, **backend_options: Any) -> Backend:
    """Start (or join) the backend that hosts actors. Optional: the first actor calls it.

    PARL's ``parl.connect(master_address, distributed_files=[])`` is this call with a cluster's
    address.

    Args:
        master_address: ``None`` for the local process pool; ``host:port`` for a parl_lite cluster
            (``parl-lite start``); ``scheme://...`` for a backend plugin registered under the
            ``parl_lite.backends`` entry-point group.
        distributed_files: files (globs) shipped to the cluster's nodes, next to your ``*.py``
            files (a cluster only: the local pool runs in this folder).
        num_workers: worker processes kept started and idle (default: the number of usable CPUs).
            More actors than that may be created; each further one forks a process.
        threads_per_worker: OMP/MKL/OpenBLAS threads in each worker (default 1).
        backend_options: passed to the backend, e.g. ``token_file=...`` for a cluster.

    Returns:
        The backend now in use. Calling again with the same arguments (or none) returns it too.

    Raises:
        RuntimeError: already connected with other settings (call :func:`shutdown` first).
        ValueError: no backend is installed for ``master_address``, or ``distributed_files``
            without a cluster address.
    """
    global _backend, _backend_settings, _shutdown_registered
    if distributed_files and master_address is None:
        raise ValueError("parl_lite.connect(distributed_files=...): files are shipped to a cluster's nodes; "
                         "give its master_address too (the local pool runs in this folder and needs none)")
    if distributed_files is not None and master_address is not None:
        backend_options["distributed_files"] = list(distributed_files)
    settings = {"master_address": master_address, "num_workers": num_workers,
                "threads_per_worker": threads_per_worker, **backend_options}
    with _backend_lock:
        if _backend is not None:
            if settings == _backend_settings or (master_address is None and num_workers is None
                                                 and not backend_options):
                return _backend
            raise RuntimeError("parl_lite is already connected; call parl_lite.shutdown() before "
                               "connecting again with other settings")
        _backend = _make_backend(master_address, num_workers=num_workers, threads_per_worker=threads_per_worker,
                                 **backend_options)
        _backend_settings = settings
        if not _shutdown_registered:
            atexit.register(_shutdown_at_exit)
            _shutdown_registered = True
        return _backend


def _make_backend(address: str | None, **options: Any) -> Backend:
    if address is None:
        from parl_lite.remote.pool import LocalPool

        return LocalPool(**options)
    from parl_lite import plugins  # the registry only (standard library): no plugin is imported here

    scheme = address.split("://", 1)[0] if "://" in address else CLUSTER_SCHEME
    plugin = plugins.find(plugins.BACKENDS, scheme)
    if plugin is None:
        installed = ", ".join(p.name for p in plugins.installed(plugins.BACKENDS)) or "none"
        raise ValueError(f"parl_lite.connect({address!r}): no backend handles "
                         f"{scheme + '://' if scheme else 'this address'} (installed backend plugins: "
                         f"{installed}); connect() without an address starts the local pool")
    return plugin.load()(address, **options)  # PluginError names a plugin that does not load


def shutdown() -> None:
    """Stop every actor and the backend (idempotent; also runs when the program exits)."""
    global _backend, _backend_settings
    with _backend_lock:
        backend, _backend, _backend_settings = _backend, None, None
    if backend is not None:
        backend.shutdown()


def _shutdown_at_exit() -> None:
    try:
        shutdown()
    except KeyboardInterrupt:
        pass  # a second Ctrl-C while exiting: the pool cleaned up before raising it; exit quietly


def _current_backend() -> Backend:
    return _backend if _backend is not None else connect()


class ActorHandle:
    """The caller's side of an actor: attribute access and method calls go to the remote instance.

    Methods of the class return their value (``wait=True``) or a :class:`Future` (``wait=False``);
    so do names the class does not define whose value in the actor is a routine (e.g. a method its
    ``__getattr__`` makes): they too run in the actor. Other attributes are read and written
    synchronously. ``close()``, ``del`` or garbage collection
    stop the actor and give its worker back.
    """

    _original: type  # the decorated class (PARL's name): ``Actor._original(...)`` builds a local one
    _wait: bool
    _options: ActorOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        channel = _current_backend().create_actor(self._original, args, kwargs, self._options)
        object.__setattr__(self, "_channel", channel)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_channel":
            raise AttributeError(name)
        if _is_method(self._original, name):
            # not cached on the handle: the method refers to the handle, and a cycle would keep
            # the actor alive after the user's last reference to it is gone
            return RemoteMethod(self, self._channel, name, self._wait)
        value = self._channel.result(self._channel.get_attribute(name))
        if isinstance(value, MethodReference):
            return RemoteMethod(self, self._channel, name, self._wait)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        self._channel.result(self._channel.set_attribute(name, value))

    def close(self) -> None:
        """Stop the actor (after running its own ``close()``, if its class has one)."""
        channel = self.__dict__.get("_channel")
        if channel is None:
            return
        if callable(getattr(self._original, "close", None)):
            channel.call_sync("close", (), {})
        channel.close()

    def destroy(self) -> Any:
        """PARL's name for :meth:`close`; if the class defines its own ``destroy``, that method is
        called in the actor instead (as any method)."""
        if _is_method(self._original, "destroy"):
            return RemoteMethod(self, self._channel, "destroy", self._wait)()
        self.close()
        return None

    def __del__(self) -> None:
        channel = self.__dict__.get("_channel")
        if channel is not None:
            channel.close()

    def __reduce__(self) -> Any:
        raise TypeError(f"a handle of remote actor {self._original.__qualname__} cannot be pickled "
                        "or sent to another process")

    def __repr__(self) -> str:
        return f"<remote {self._original.__qualname__} actor>"


@functools.lru_cache(maxsize=4096)
def _is_method(cls: type, name: str) -> bool:
    try:
        static = inspect.getattr_static(cls, name)
    except AttributeError:
        return False
    return callable(static) or isinstance(static, (staticmethod, classmethod))


class RemoteMethod:
    """A bound method of a remote actor."""

    __slots__ = ("_handle", "_channel", "_name", "_wait")

    def __init__(self, handle: ActorHandle, channel: ActorChannel, name: str, wait: bool) -> None:
        self._handle = handle  # keeps the actor alive while its method is held (e.g. a thread target)
        self._channel = channel
        self._name = name
        self._wait = wait

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._wait:
            return self._channel.call_sync(self._name, args, kwargs)
        return self._channel.call(self._name, args, kwargs)


def remote_class(cls: T | None = None, *, wait: bool = True, max_memory: float | None = None,
                 n_gpu: int = 0, placement_timeout: float | None = None) -> type | Callable[[T], type]:
    """Make instances of ``cls`` live in worker processes.

    Usable as ``@remote_class`` or ``@remote_class(wait=False, max_memory=512)``.

    Args:
        cls: the class to run remotely (its source may live in ``__main__``).
        wait: ``True``: a method call returns its value; ``False``: it returns a :class:`Future`.
        max_memory: resident memory limit in MB; an actor over it is stopped and its callers get
            :class:`MemoryLimitError`.
        n_gpu: PARL's GPUs per actor; only 0 (actors run on CPUs).
        placement_timeout: seconds an actor's creation may wait for a free CPU (a cluster's)
            before it fails; None: the backend's own wait (``connect(placement_timeout=...)``).

    Returns:
        A class whose instances are :class:`ActorHandle` objects.

    Raises:
        TypeError: ``cls`` is not a class, or an argument has the wrong type (``wait`` not a bool).
        ValueError: ``max_memory`` is not positive, ``placement_timeout`` is negative or not finite,
            or ``n_gpu`` is not 0.
    """
    _check_options(wait, max_memory, n_gpu, placement_timeout)
    options = ActorOptions(max_memory=max_memory, placement_timeout=placement_timeout)
    if cls is None:
        return lambda inner: _remote_class(inner, wait, options)
    return _remote_class(cls, wait, options)


def _check_options(wait: bool, max_memory: float | None, n_gpu: int, placement_timeout: float | None) -> None:
    """Refuse ``remote_class``'s options when they are given, before any class is decorated."""
    if not isinstance(wait, bool):
        raise TypeError(f"@remote_class(wait={wait!r}): wait must be True (a call returns its value) or False "
                        "(a call returns a parl_lite.Future)")
    if n_gpu != 0:
        raise ValueError(f"@remote_class(n_gpu={n_gpu!r}): parl_lite's actors run on CPUs only; drop n_gpu "
                         "(paddle in an actor uses the CPU)")
    if max_memory is not None:
        if not isinstance(max_memory, numbers.Real) or isinstance(max_memory, bool):
            raise TypeError(f"max_memory must be a number of MB (or None), got {max_memory!r}")
        if not (max_memory > 0 and math.isfinite(max_memory)):
            raise ValueError(f"max_memory must be a positive number of MB, got {max_memory!r}")
    if placement_timeout is not None:
        if not isinstance(placement_timeout, numbers.Real) or isinstance(placement_timeout, bool):
            raise TypeError(f"placement_timeout must be a number of seconds (or None), got {placement_timeout!r}")
        if not (placement_timeout >= 0 and math.isfinite(placement_timeout)):
            raise ValueError(f"placement_timeout must be a finite number of seconds, 0 or more, got "
                             f"{placement_timeout!r}")


def _remote_class(cls: type, wait: bool, options: ActorOptions) -> type:
    if not isinstance(cls, type):
        raise TypeError(f"@remote_class decorates a class, got {type(cls).__name__} {cls!r}; use "
                        "@remote_class or @remote_class(wait=..., max_memory=...) on a class")
    return type(cls.__name__, (ActorHandle,), {
        "_original": cls, "_wait": wait, "_options": options,
        "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
    })


def get(futures: Future | Sequence[Any] | Any, timeout: float | None = None) -> Any:
    """The value of a future, or the values of a list/tuple of futures (other items pass through).

    Raises:
        TimeoutError: a result did not arrive within ``timeout`` seconds.
        Exception: what the remote call raised.
    """
    if isinstance(futures, concurrent.futures.Future):
        return futures.result(timeout)
    if isinstance(futures, (list, tuple)):
        return [get(item, timeout) for item in futures]
    return futures


def wait(futures: Sequence[Future], timeout: float | None = None,
         return_when: str = concurrent.futures.ALL_COMPLETED) -> tuple[list[Future], list[Future]]:
    """Wait until the futures are done (or ``return_when`` is met, or ``timeout`` passes).

    Returns:
        ``(done, not_done)``: two lists that keep the order of ``futures``.
    """
    finished, _ = concurrent.futures.wait(futures, timeout=timeout, return_when=return_when)
    return ([future for future in futures if future in finished],
            [future for future in futures if future not in finished])
