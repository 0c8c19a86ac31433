"""The caller's side of the Ray backend: one Ray actor per ``@remote_class`` actor.

A synchronous call is one ``ray.get`` in the calling thread. An asynchronous call's
:class:`parl_lite.Future` is completed by a callback Ray runs when the reply arrives
(``ObjectRef._on_completed``): no thread waits per call. Replies are unpacked the same way for both
(:meth:`RayActorChannel._unpack`): a failure is raised with its own type, a dead actor as
:class:`ActorDiedError` (:class:`MemoryLimitError` when it went over ``max_memory``).
"""
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError

from parl_lite.ext.ray.host import KV_NAMESPACE, MEMORY_KEY_PREFIX, Reply, host_class, writable
from parl_lite.remote.backend import ActorChannel, ActorOptions, Backend, Capacity, thread_limits
from parl_lite.remote.caller import CLOSED, Cause, Ending, over_memory, unpicklable_arguments
from parl_lite.remote.errors import ActorDiedError, RemoteError, SerializationError
from parl_lite.remote.futures import Future
from parl_lite.remote.output import print_actor_output

__all__ = ["RayBackend", "RayActorChannel", "start_local_ray", "stop_local_ray"]

_environment_lock = threading.Lock()


def start_local_ray(num_cpus: int, threads_per_worker: int = 1) -> str:
    """Start Ray on this machine for this process, without dashboard or usage statistics; its
    workers limited to ``threads_per_worker`` OMP/BLAS threads and importing from this process's
    ``sys.path`` (as the local pool's workers do).

    Returns:
        The new folder Ray keeps its session in (its sockets, logs and spilled objects), for
        :func:`stop_local_ray` to remove: by default Ray leaves a ``/tmp/ray/session_*`` folder
        behind each time.
    """
    _check_positive("num_workers", num_cpus)
    _check_positive("threads_per_worker", threads_per_worker)
    folder = tempfile.mkdtemp(prefix="parl_lite_ray_")
    # Ray's processes inherit this process's environment: set it only while they start (a
    # job-level runtime_env would do it too, but makes every actor start ~0.7 s slower)
    environment = thread_limits(threads_per_worker)
    environment["PYTHONPATH"] = os.pathsep.join(os.getcwd() if path == "" else path for path in sys.path)
    with _environment_lock:
        saved = {name: os.environ.get(name) for name in environment}
        os.environ.update(environment)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, configure_logging=False,
                     _temp_dir=folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return folder


def stop_local_ray(folder: str) -> None:
    """Stop the Ray :func:`start_local_ray` started and remove its session ``folder``."""
    ray.shutdown()
    shutil.rmtree(folder, ignore_errors=True)


def _check_positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _ray_address(address: str) -> str | None:
    """``ray://local`` -> None (start one), ``ray://auto`` -> ``"auto"``, else the Ray Client URL."""
    rest = address.split("://", 1)[1] if "://" in address else ""
    if rest == "local":
        return None
    if rest == "auto":
        return "auto"
    if not rest or ":" not in rest:
        raise ValueError(f"parl_lite.connect({address!r}): expected ray://local, ray://auto or "
                         "ray://host:port (a Ray Client server, usually port 10001)")
    return address


class RayActorChannel(ActorChannel):
    """One ``@remote_class`` actor hosted by a Ray actor (:class:`parl_lite.ext.ray.host.ActorHost`)."""

    def __init__(self, handle: Any, forwarded: frozenset[str], class_name: str, pid: int, actor_id: str,
                 max_memory: float | None) -> None:
        self.class_name = class_name
        self.pid = pid
        self.actor_id = actor_id
        self.max_memory = max_memory
        self._handle = handle
        self._forwarded = forwarded  # methods the Ray actor has under their own name
        self._ending: Ending | None = None  # closed, or seen dead

    @property
    def alive(self) -> bool:
        return self._ending is None

    @property
    def state(self) -> str:
        """``alive``, ``closed`` or ``dead`` (as far as this caller has seen)."""
        if self._ending is None:
            return "alive"
        return "closed" if self._ending.cause is Cause.CLOSED else "dead"

    # --- ActorChannel ---------------------------------------------------------------------------
    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future:
        return self._track(f"{method}()", lambda: self._submit_call(f"{method}()", method, args, kwargs))

    def call_sync(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        what = f"{method}()"
        ref = self._submit_call(what, method, args, kwargs)
        try:
            reply = ray.get(ref)
        except RayError as error:
            reply = error
        return self._unpack(what, reply)

    def get_attribute(self, name: str) -> Future:
        what = f"attribute {name!r}"
        return self._track(what, lambda: self._submit(what, self._handle.parl_lite_get_attribute, name))

    def set_attribute(self, name: str, value: Any) -> Future:
        what = f"setting attribute {name!r}"
        return self._track(what, lambda: self._submit(what, self._handle.parl_lite_set_attribute, name, value))

    def close(self) -> None:
        """Stop the Ray actor once the calls already made have run (may run in ``__del__``)."""
        if self._ending is not None:
            return
        self._ending = CLOSED
        try:
            self._handle.__ray_terminate__.remote()
        except Exception:  # Ray already shut down (e.g. at interpreter exit): nothing left to stop
            pass

    def kill(self) -> None:
        """Stop the Ray actor now."""
        self._ending = self._ending or CLOSED
        try:
            ray.kill(self._handle)
        except Exception:
            pass

    # --- internals ------------------------------------------------------------------------------
    def _submit_call(self, what: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if method in self._forwarded:
            return self._submit(what, getattr(self._handle, method), *args, **kwargs)
        return self._submit(what, self._handle.parl_lite_call, method, args, kwargs)

    def _submit(self, what: str, ray_method: Any, *args: Any, **kwargs: Any) -> Any:
        """``ray_method.remote(*args, **kwargs)``: the ObjectRef of the reply."""
        if self._ending is not None:
            raise self._died(what)
        try:
            return ray_method.remote(*args, **kwargs)
        except TypeError as error:  # Ray could not serialize an argument
            raise unpicklable_arguments(f"{self.class_name}.{what}", error) from error

    def _track(self, what: str, submit: Callable[[], Any]) -> Future:
        """A future that Ray's callback completes with the reply of ``submit()``'s ObjectRef."""
        future = _RayFuture()
        try:
            ref = submit()
        except ActorDiedError as error:
            future.set_exception(error)
            return future
        # the reference must outlive the callback: Ray needs it to fetch a reply from its store
        future.object_ref = ref
        ref._on_completed(lambda reply: self._complete(future, what, reply))
        return future

    def _complete(self, future: "_RayFuture", what: str, reply: Any) -> None:
        future.object_ref = None
        try:
            future.set_result(self._unpack(what, reply))
        except BaseException as error:
            future.set_exception(error)

    def _unpack(self, what: str, reply: Any) -> Any:
        """The value of a host reply, or raise what it stands for."""
        if isinstance(reply, Reply):
            if reply.output:
                print_output(f"{self.class_name} pid={self.pid}", reply.output)
            if not reply.ok:
                raise reply.value.to_exception(f"{self.class_name}.{what}")
            return writable(reply.value)
        if isinstance(reply, RayActorError):
            raise self._died(what, reply)
        if isinstance(reply, RayTaskError):  # the host catches the actor's own exceptions
            raise SerializationError(f"{self.class_name}.{what}: the return value cannot be pickled: "
                                     f"{reply.cause!r}")
        if isinstance(reply, RayError):
            raise RemoteError(f"{self._where(what)}: Ray failed: {reply}")
        return writable(reply)

    def _where(self, what: str) -> str:
        return f"{self.class_name}.{what} (Ray actor {self.actor_id}, pid {self.pid})"

    def _died(self, what: str, error: RayActorError | None = None) -> ActorDiedError:
        """The error for a call on this actor once it is gone (``error``: what Ray said, first time)."""
        if self._ending is None:
            self._ending = self._death_ending(error)
        death = self._ending.error(self._where(what))
        death.__cause__ = error
        return death

    def _death_ending(self, error: RayActorError | None) -> Ending:
        if self.max_memory is not None:
            from ray.experimental import internal_kv

            key = (MEMORY_KEY_PREFIX + self.actor_id).encode()
            resident = internal_kv._internal_kv_get(key, namespace=KV_NAMESPACE)
            if resident is not None:
                internal_kv._internal_kv_del(key, namespace=KV_NAMESPACE)
                return over_memory(self.max_memory, f" ({resident.decode()} MB resident)")
        return Ending(Cause.DIED, f"the worker process exited ({type(error).__name__})")


class _RayFuture(Future):
    """A Future that holds its call's ObjectRef until the reply arrives: Ray needs the reference to
    fetch the reply from its store."""

    def __init__(self) -> None:
        super().__init__()
        self.object_ref: Any = None


def print_output(label: str, output: list[tuple[str, str]]) -> None:
    """Print an actor's output to this process's stdout/stderr, each line prefixed ``(label) ``."""
    for stream_name, text in output:
        print_actor_output(label, stream_name, text)


class RayBackend(Backend):
    """Hosts ``@remote_class`` actors as Ray actors (see :mod:`parl_lite.ext.ray`).

    Args:
        address: ``ray://local``, ``ray://auto`` or ``ray://host:port``.
        num_workers: CPUs of the Ray ``ray://local`` starts (default: the usable CPUs).
        threads_per_worker: OMP/BLAS threads in the actors of ``ray://local``.
    """

    def __init__(self, address: str, num_workers: int | None = None, threads_per_worker: int = 1) -> None:
        self.address = address
        ray_address = _ray_address(address)
        if num_workers is not None:
            _check_positive("num_workers", num_workers)
        _check_positive("threads_per_worker", threads_per_worker)
        self.started_ray = not ray.is_initialized()
        self._ray_folder: str | None = None  # the session folder of the Ray we started here
        if self.started_ray:
            if ray_address is None:
                self._ray_folder = start_local_ray(num_workers or len(os.sched_getaffinity(0)), threads_per_worker)
            else:
                try:
                    ray.init(address=ray_address, configure_logging=False)
                except (ConnectionError, RuntimeError) as error:
                    hint = (" (a cluster with token authentication also needs RAY_AUTH_MODE=token and its "
                            "token in RAY_AUTH_TOKEN or ~/.ray/auth_token here)" if ray_address != "auto" else "")
                    raise ConnectionError(f"parl_lite.connect({address!r}): no Ray cluster answers there: "
                                          f"{error}{hint}") from error
        self._lock = threading.Lock()
        self._actors: list[RayActorChannel] = []
        self._ray_classes: dict[type, Any] = {}
        self._closed = False

    def create_actor(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any],
                     options: ActorOptions) -> RayActorChannel:
        if self._closed:
            raise RuntimeError("the parl_lite Ray backend is shut down")
        ray_options: dict[str, Any] = {}
        if options.max_memory is not None:
            ray_options["memory"] = int(options.max_memory * 2**20)  # Ray places it where that fits
        ray_class, forwarded = self._ray_class(cls)
        try:
            handle = ray_class.options(**ray_options).remote(cls, args, kwargs, options.max_memory)
        except TypeError as error:
            raise unpicklable_arguments(f"{cls.__qualname__}.__init__()", error) from error
        try:
            reply = ray.get(handle.parl_lite_ready.remote())
        except RayError as error:
            ray.kill(handle)
            raise ActorDiedError(f"{cls.__qualname__}.__init__(): the Ray actor failed to start: {error}") from error
        if not reply.ok:
            ray.kill(handle)
            if reply.output:
                print_output(f"{cls.__qualname__}", reply.output)
            raise reply.value.to_exception(f"{cls.__qualname__}.__init__()")
        pid, actor_id = reply.value
        channel = RayActorChannel(handle, forwarded, cls.__qualname__, pid, actor_id, options.max_memory)
        if reply.output:
            print_output(f"{cls.__qualname__} pid={pid}", reply.output)
        with self._lock:
            self._actors = [actor for actor in self._actors if actor.alive] + [channel]
        return channel

    def _ray_class(self, cls: type) -> tuple[Any, frozenset[str]]:
        """The Ray actor class that hosts ``cls`` (see :func:`host_class`) and the names it forwards."""
        entry = self._ray_classes.get(cls)
        if entry is None:
            host, forwarded = host_class(cls)
            entry = self._ray_classes[cls] = (ray.remote(host), forwarded)
        return entry

    def capacity(self) -> Capacity:
        """The Ray cluster's CPUs; its actors are on this machine with ``ray://local`` only (Ray
        places them by its own rules, no one per CPU)."""
        here = _ray_address(self.address) is None
        return Capacity(int(ray.cluster_resources().get("CPU", 0)), on_this_machine=here, one_actor_per_cpu=False,
                        description="the Ray started on this machine" if here else f"the Ray cluster at {self.address}")

    def status(self) -> dict[str, Any]:
        with self._lock:
            actors = list(self._actors)
        return {
            "kind": "ray",
            "address": self.address,
            "pid": os.getpid(),
            "actors": [{"id": actor.actor_id, "class": actor.class_name, "pid": actor.pid,
                        "state": actor.state,
                        "max_memory_mb": actor.max_memory}
                       for actor in actors],
        }

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            actors, self._actors = self._actors, []
        for actor in actors:
            actor.kill()
        if self._ray_folder is not None:
            stop_local_ray(self._ray_folder)
        elif self.started_ray:
            ray.shutdown()
