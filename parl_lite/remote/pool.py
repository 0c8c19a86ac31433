"""The local pool: worker processes forked from a zygote, one actor per worker.

Placement is simple on purpose: every actor gets a process of its own, so actors never share a GIL.
``num_workers`` processes are kept started and idle ahead of need (a warm pool), so creating an actor
does not wait for a process to start; the pool may host any number of actors beyond that, each
further process being forked from the zygote in a few milliseconds. A housekeeping thread refills the
idle workers, returns the workers of released actors, enforces memory limits and publishes status;
it survives its own errors (each is logged once) so that limits stay enforced whatever happens.

A worker's death is seen by its pid (a pidfd), not only by its socket: a child the actor forked may
hold the socket open long after the worker is gone. Each worker leads its own process group, and
the group is killed when the worker ends, so nothing an actor started outlives it.
"""
import collections
import functools
import itertools
import json
import logging
import os
import queue
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from multiprocessing.connection import Connection
from typing import Any
from collections.abc import Callable


from parl_lite.remote import protocol
from parl_lite.remote.actor_log import ActorLogs
from parl_lite.remote.backend import ActorChannel, ActorOptions, Backend
from parl_lite.remote.errors import ActorDiedError, MemoryLimitError, SerializationError
from parl_lite.remote.futures import Future
from parl_lite.remote.interrupts import ctrl_c_held_back
from parl_lite.remote.output import print_actor_output
from parl_lite.remote.shm import Borrowed, SegmentPool, remove_session_segments
from parl_lite.remote.status import StatusBoard, process_start_time
from parl_lite.remote.zygote import PID_FORMAT

__all__ = ["LocalPool"]

_HOUSEKEEPING_PERIOD = 0.1  # seconds between memory checks
_STATUS_PERIOD = 0.5  # seconds between status updates
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                     "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
# pre-faulted shared memory the caller keeps for its next large argument, even when idle
SHM_RESERVE_BYTES = 64 * 2**20
_ENDED_KEPT = 32  # ended actors still listed in the status (and their logs kept)
_log = logging.getLogger("parl_lite.remote")

# why a worker stopped serving
_CLOSED = "closed"
_OVER_MEMORY = "over_memory"
_DIED = "died"
_HUNG_UP = "hung_up"  # the connection closed while the process ran on (an os.exec* in the actor)
_EXIT_GRACE = 0.1  # seconds a worker whose connection closed is given to be seen exiting


class WorkerProcess(ActorChannel):
    """The caller's end of one worker process, and of the actor it hosts.

    Calls are pickled in the calling thread and sent under a lock; one reader thread per worker
    resolves the futures as replies arrive, prints the actor's output, and fails every pending
    call with :class:`ActorDiedError` the moment the connection drops.
    """

    def __init__(self, pid: int, connection: Connection, pool: "LocalPool") -> None:
        self.pid = pid
        self.actor_name: str | None = None
        self.max_memory: float | None = None
        self.calls_served = 0
        self.last_error: str | None = None  # the last exception an actor's method raised
        self._connection = connection
        self._pool = pool
        self._segments = pool.segments  # what we send (lent under our pid), shared by the workers
        self.borrowed = Borrowed()  # what the worker sent us
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:
            self._pidfd = None  # already gone
        self._poller = self._make_poller()  # used under _read_lock
        self._waiter = self._make_poller()  # used by the background reader while it waits
        self._ids = itertools.count()
        self._lock = threading.Lock()  # sending, and the pending calls
        self._read_lock = threading.Lock()  # held by the one thread reading the connection
        # The background reader sleeps on _wake unless replies are awaited that no synchronous
        # caller is reading: each thread woken by a reply costs a wake-up of an idle core.
        self._wake = threading.Condition(threading.Lock())
        self._sync_readers = 0
        self._parked = False  # the background reader sleeps on _wake
        self._async_mode = False  # the last call was asynchronous: keep the background reading
        self._pending: dict[int, tuple[Future, str]] = {}  # call id -> (future, what was called)
        self._stop_reason: str | None = None
        self._closing = False
        self._dead = False
        threading.Thread(target=self._read, name=f"parl_lite-worker-{pid}", daemon=True).start()

    def _make_poller(self) -> "select.poll":
        poller = select.poll()
        poller.register(self._connection.fileno(), select.POLLIN)
        if self._pidfd is not None:
            poller.register(self._pidfd, select.POLLIN)
        return poller

    @property
    def label(self) -> str:
        return f"{self.actor_name or 'idle worker'} pid={self.pid}"

    @property
    def alive(self) -> bool:
        return not self._dead

    @property
    def state(self) -> str:
        """``idle`` (no actor yet), ``starting`` (``__init__`` runs), ``alive``, ``closed`` or ``dead``."""
        if self._dead:
            return "closed" if self._stop_reason == _CLOSED or self._closing else "dead"
        if self.actor_name is None:
            return "idle"
        return "alive" if self.calls_served else "starting"

    def describe(self) -> dict[str, Any]:
        """This worker as the pool's status lists it."""
        own, shared = self.memory_mb()
        return {"pid": self.pid, "actor": self.actor_name, "alive": self.alive, "state": self.state,
                "rss_mb": round(own, 1), "shared_mb": round(shared, 1), "max_memory_mb": self.max_memory,
                "calls_served": self.calls_served, "last_error": self.last_error}

    # --- ActorChannel ---------------------------------------------------------------------------
    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future:
        return self._submit(f"{method}()", protocol.CALL, method, args, kwargs)

    def get_attribute(self, name: str) -> Future:
        return self._submit(f"attribute {name!r}", protocol.GETATTR, name)

    def set_attribute(self, name: str, value: Any) -> Future:
        return self._submit(f"setting attribute {name!r}", protocol.SETATTR, name, value)

    def call_sync(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a method and wait for it, reading the reply in this thread (one wake-up per call,
        as with a raw pipe) unless another thread is already reading this worker."""
        with self._wake:
            self._sync_readers += 1
        reading = True
        try:
            future = self.call(method, args, kwargs)
            while not future.done() and not self._dead:
                if not self._read_lock.acquire(blocking=False):
                    break
                try:
                    if not future.done() and not self._dead:
                        events = self._poller.poll()  # a frame, or the worker's end; a Ctrl-C here loses nothing
                        ctrl_c_held_back(functools.partial(self._dispatch, events))  # the frame is read whole
                finally:
                    self._read_lock.release()
            if not future.done():
                # another thread reads: stop counting as a reader so the background reader may
                # take over once that thread has its own reply
                self._leave_sync_readers()
                reading = False
            return future.result()
        finally:
            if reading:
                self._leave_sync_readers()

    def _leave_sync_readers(self) -> None:
        with self._wake:
            self._sync_readers -= 1
            if self._pending and not self._sync_readers:  # replies still awaited: hand them over
                self._wake.notify()

    def close(self) -> None:
        # may run in __del__, in any thread, even one holding self._lock: take no lock here and let
        # the housekeeping thread send the STOP
        self._closing = True
        self._pool.release(self)

    # --- internals ------------------------------------------------------------------------------
    def create(self, class_blob: bytes, class_name: str, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Future:
        self.actor_name = class_name
        return self._submit("__init__()", protocol.CREATE, class_blob, args, kwargs)

    def _submit(self, what: str, kind: str, *fields: Any) -> Future:
        future = Future()
        call_id = next(self._ids)
        try:
            frame, segment = protocol.encode((kind, call_id, *fields), self._segments, self.pid)
        except Exception as exc:
            raise SerializationError(f"{self.actor_name}.{what}: an argument cannot be pickled: "
                                     f"{type(exc).__name__}: {exc}") from exc
        with self._lock:
            if self._dead or self._closing or self._stop_reason is not None:
                if segment is not None:
                    self._segments.release([segment], self.pid)
                future.set_exception(self._death_error(what))
                return future
            self._pending[call_id] = (future, what)
            try:
                self._send_releases()
                self._connection.send_bytes(frame)
            except OSError:
                pass  # a reader sees the connection drop and fails this call
        self._async_mode = not self._sync_readers
        if self._parked and self._async_mode:
            self._wake_background()
        return future

    def _wake_background(self) -> None:
        with self._wake:
            self._wake.notify()

    def flush_releases(self) -> None:
        """Tell the worker which of its segments no array here views any more."""
        with self._lock:
            if not self._dead:
                try:
                    self._send_releases()
                except OSError:
                    pass

    def _send_releases(self) -> None:
        released = self.borrowed.take_released()
        if released:
            self._send((protocol.RELEASE, released))

    def _send(self, message: tuple[Any, ...]) -> None:
        """Encode and send a small control message (``self._lock`` is held)."""
        self._connection.send_bytes(protocol.encode(message, self._segments, self.pid)[0])

    def prefetch(self, names: list[str]) -> None:
        """Let the worker map ``names`` (free segments of ours) before a message uses them."""
        if names:
            with self._lock:
                try:
                    self._send((protocol.PREFETCH, names))
                except OSError:
                    pass

    def stop(self, reason: str) -> None:
        """Ask the worker to exit after the calls already sent (idempotent)."""
        with self._lock:
            if self._stop_reason is not None or self._dead:
                return
            self._stop_reason = reason
            try:
                self._send((protocol.STOP,))
            except OSError:
                pass
        self._wake_background()  # to see the connection close

    def kill(self, reason: str) -> None:
        """Kill the worker process now; pending calls fail with the error of ``reason``."""
        with self._lock:
            if self._stop_reason is None:
                self._stop_reason = reason
        self._kill_group()
        self._wake_background()

    def _kill_group(self) -> None:
        """Kill the worker and what its actor started (its process group)."""
        for kill in (os.killpg, os.kill):
            try:
                kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def resident_mb(self) -> float:
        """The worker's own resident memory in MB (what ``max_memory`` limits; shared pages apart)."""
        return self.memory_mb()[0]

    def memory_mb(self) -> tuple[float, float]:
        """The worker's own resident memory and its resident shared pages (the arrays it was sent,
        mapped code), in MB; zeros once it is gone. ``max_memory`` limits the first."""
        try:
            with open(f"/proc/{self.pid}/statm") as statm:
                resident, shared = (int(field) for field in statm.read().split()[1:3])
        except (OSError, ValueError):
            return 0.0, 0.0
        return (resident - shared) * _PAGE_SIZE / 2**20, shared * _PAGE_SIZE / 2**20

    def _death_error(self, what: str) -> ActorDiedError:
        where = f"{self.actor_name}.{what} (worker pid {self.pid})"
        if self._stop_reason == _OVER_MEMORY:
            return MemoryLimitError(f"{where}: the actor went over its max_memory of "
                                    f"{self.max_memory} MB and was stopped")
        if self._stop_reason == _CLOSED or self._closing:
            return ActorDiedError(f"{where}: the actor was closed")
        if self._stop_reason == _HUNG_UP:
            return ActorDiedError(f"{where}: the worker process closed its connection while still running "
                                  f"(did the actor call os.exec*?) and was killed")
        return ActorDiedError(f"{where}: the worker process exited")

    def check(self) -> None:
        """Read what arrived while no one was reading (an idle actor's output, a dead worker's
        end of file); called by the housekeeping thread."""
        if not self._read_lock.acquire(blocking=False):
            return
        try:
            self._read_available()
        finally:
            self._read_lock.release()

    def _read_available(self) -> None:
        """Dispatch every frame that has arrived (the read lock is held)."""
        while not self._dead:
            events = self._poller.poll(0)
            if not events or not self._dispatch(events):
                return

    def _dispatch(self, events: list[tuple[int, int]]) -> bool:
        """Read one frame if ``events`` (of a poll) show one, else see whether the worker ended (the
        read lock is held); False once the worker is gone."""
        ready = [fd for fd, _ in events]
        if self._connection.fileno() in ready:
            return self._read_one()
        if self._pidfd is None or self._pidfd in ready:
            self._on_exit()
            return False
        return True

    def _background_needed(self) -> bool:
        # after an asynchronous call the background reader keeps reading (more are likely to
        # follow, and parking between them would cost a wake-up each); synchronous calls park it
        unattended = self._sync_readers == 0 and (bool(self._pending) or self._async_mode)
        return self._dead or self._stop_reason is not None or unattended

    def _read(self) -> None:
        """The background reader: dispatches replies that no synchronous caller is reading."""
        connection = self._connection
        while True:
            with self._wake:
                self._parked = True  # set before the predicate is checked: see _submit
                self._wake.wait_for(self._background_needed)
                self._parked = False
            if self._dead:
                break
            self._waiter.poll()
            with self._read_lock:
                self._read_available()
        connection.close()
        if self._pidfd is not None:
            os.close(self._pidfd)

    def _read_one(self) -> bool:
        """Read and dispatch one frame (the read lock is held); False once the worker is gone."""
        try:
            frame = self._connection.recv_bytes()
        except (EOFError, OSError):
            if self._pidfd is not None and not select.select([self._pidfd], [], [], _EXIT_GRACE)[0]:
                with self._lock:
                    self._stop_reason = self._stop_reason or _HUNG_UP
            self._on_exit()
            return False
        try:
            message = protocol.decode(frame, self.borrowed, self._segments, self.pid)
        except Exception as exc:  # e.g. the return value's class does not exist here
            self._fail_oldest(exc)
            return True
        kind = message[0]
        if kind == protocol.OUTPUT:
            self._pool.actor_logs.record(self.pid, message[2])
            self._print(message[1], message[2])
        elif kind == protocol.RELEASE:
            self._segments.release(message[1], self.pid)
        else:
            future, what = self._pending.pop(message[1])
            self.calls_served += 1
            if kind == protocol.OK:
                future.set_result(message[2])
            else:
                self.last_error = f"{message[2].type_name}: {message[2].message}"
                future.set_exception(message[2].to_exception(f"{self.actor_name}.{what}"))
        return True

    def _fail_oldest(self, exc: Exception) -> None:
        # replies come back in the order the calls were sent, so an undecodable reply is the oldest's
        with self._lock:
            call_id = next(iter(self._pending), None)
            if call_id is None:
                return
            future, what = self._pending.pop(call_id)
        future.set_exception(SerializationError(
            f"{self.actor_name}.{what}: the reply cannot be unpickled here: {type(exc).__name__}: {exc}"))

    def _print(self, stream_name: str, text: str) -> None:
        if self._pool.on_output is not None:
            self._pool.on_output(self, stream_name, text)
            return
        print_actor_output(self.label, stream_name, text)

    def _on_exit(self) -> None:
        with self._lock:
            self._dead = True
            pending = list(self._pending.values())
            self._pending.clear()
        self._kill_group()  # a child the actor forked may live on, holding the socket
        self._segments.forget(self.pid)
        # arrays here may still view the worker's segments: unlinking keeps their mappings valid
        remove_session_segments(f"{self._pool.session_prefix}w{self.pid}_")
        for future, what in pending:
            future.set_exception(self._death_error(what))
        self._wake_background()  # it closes the connection and ends
        self._pool._worker_exited(self)


class LocalPool(Backend):
    """Worker processes on this machine that share memory with the caller.

    Args:
        num_workers: idle worker processes kept ready (default: the number of usable CPUs).
        threads_per_worker: value of OMP/MKL/OpenBLAS thread counts in the workers.
        on_output: called as ``on_output(worker, stream_name, text)`` with each chunk of actor output
            (whole lines) instead of printing it as ``(<Class> pid=N) line``.
        shm_reserve_bytes: pre-faulted shared memory kept for large arguments (0: none; a cluster
            node, whose clients send arguments over TCP, keeps none).
    """

    def __init__(self, num_workers: int | None = None, threads_per_worker: int = 1,
                 on_output: Callable[["WorkerProcess", str, str], None] | None = None,
                 shm_reserve_bytes: int = SHM_RESERVE_BYTES) -> None:
        if num_workers is None:
            num_workers = len(os.sched_getaffinity(0))
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers must be a non-negative integer, got {num_workers!r}")
        if not isinstance(threads_per_worker, int) or threads_per_worker < 1:
            raise ValueError(f"threads_per_worker must be a positive integer, got {threads_per_worker!r}")
        self.num_workers = num_workers
        self.threads_per_worker = threads_per_worker
        self.on_output = on_output
        self.session_prefix = f"parl_lite_{os.getpid()}_{uuid.uuid4().hex[:8]}_"
        self.segments = SegmentPool(f"{self.session_prefix}d_", reserve_bytes=shm_reserve_bytes)
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._control_lock = threading.Lock()
        self._idle: list[WorkerProcess] = []
        self._actors: dict[int, WorkerProcess] = {}  # pid -> worker hosting an actor
        self._class_blobs = protocol.ClassBlobs("worker")
        self._ended: collections.deque[WorkerProcess] = collections.deque()  # actors that stopped, newest last
        self.actor_logs = ActorLogs(os.getpid())
        self._chores: queue.SimpleQueue[WorkerProcess | None] = queue.SimpleQueue()
        self._closed = False
        self._failures_reported: set[tuple[str, type]] = set()
        self._status = StatusBoard(os.getpid())
        try:
            self._zygote, self._control = self._start_zygote()
        except BaseException:  # also a Ctrl-C while the zygote starts
            self.segments.close()
            self._status.close()
            raise
        self._status.publish(self.status())  # readable as soon as connect() returns
        self._housekeeper = threading.Thread(target=self._housekeep, name="parl_lite-pool", daemon=True)
        self._housekeeper.start()
        self._chores.put(None)  # fill the idle workers now

    # --- Backend --------------------------------------------------------------------------------
    def create_actor(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any],
                     options: ActorOptions) -> WorkerProcess:
        if self._closed:
            raise RuntimeError("the parl_lite pool is shut down")
        blob = self._class_blobs.blob(cls)
        worker = self._take_idle_worker() or self._fork_worker()
        worker.max_memory = options.max_memory
        with self._lock:
            self._actors[worker.pid] = worker
        self._chores.put(None)  # refill the idle workers
        try:
            worker.result(worker.create(blob, cls.__qualname__, args, kwargs))
        except BaseException:
            self.release(worker)
            raise
        return worker

    def status(self) -> dict[str, Any]:
        """This pool as ``parl-lite status`` shows it; ``rss_mb`` is a worker's own resident memory
        (what ``max_memory`` limits), ``shared_mb`` the shared pages it maps."""
        with self._lock:
            workers = [*self._actors.values(), *self._idle]
            ended = list(self._ended)
        return {
            "kind": "local",
            "pid": os.getpid(),
            "process_start": process_start_time(os.getpid()),
            "started_at": self.started_at,
            "generated_at": time.time(),
            "zygote_pid": self._zygote.pid,
            "idle_target": self.num_workers,
            "workers": [worker.describe() for worker in workers],
            "ended": [worker.describe() for worker in ended],
        }

    def shutdown(self) -> None:
        """Stop every worker and remove every file of the pool. A Ctrl-C meanwhile kills what is
        left at once, cleans up the same, and is raised again."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = [*self._actors.values(), *self._idle]
        try:
            self._chores.put(None)
            self._housekeeper.join()
            for worker in workers:
                worker.stop(_CLOSED)
            self._control.close()  # the zygote kills and reaps what is left, then sweeps segments
            try:
                self._zygote.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._zygote.kill()
                self._zygote.wait()
        except KeyboardInterrupt:
            for worker in workers:
                worker.kill(_CLOSED)
            # not killed: the zygote sweeps the segments and the status file even if a further
            # Ctrl-C cuts the rest of this shutdown short
            self._control.close()
            try:
                self._zygote.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._zygote.kill()
                self._zygote.wait()
            raise
        finally:
            self.segments.close()
            remove_session_segments(self.session_prefix)
            self._status.close()
            self.actor_logs.close()

    # --- actors and workers ---------------------------------------------------------------------
    def release(self, worker: WorkerProcess) -> None:
        """Give back the worker of an actor that is no longer used; safe to call from ``__del__``."""
        self._chores.put(worker)

    def _take_idle_worker(self) -> WorkerProcess | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                worker = self._idle.pop()
            worker.check()  # an idle worker's death is only seen when its connection is read
            if worker.alive:
                return worker

    def _fork_worker(self) -> WorkerProcess:
        ours, theirs = socket.socketpair()
        try:
            with self._control_lock:
                if self._closed:
                    raise RuntimeError("the parl_lite pool is shut down")
                socket.send_fds(self._control, [b"F"], [theirs.fileno()])
                pid, = struct.unpack(PID_FORMAT, _receive_exactly(self._control, 4))
        except OSError as exc:
            ours.close()
            raise RuntimeError(f"the pool's zygote process (pid {self._zygote.pid}) is gone: {exc}") from exc
        finally:
            theirs.close()
        worker = WorkerProcess(pid, Connection(ours.detach()), self)
        worker.prefetch(self.segments.free_names())  # the reserve, mapped while the worker is idle
        return worker

    def _worker_exited(self, worker: WorkerProcess) -> None:
        with self._lock:
            self._actors.pop(worker.pid, None)
            if worker in self._idle:
                self._idle.remove(worker)
            if worker.actor_name is not None:
                self._ended.append(worker)
                forgotten = self._ended.popleft() if len(self._ended) > _ENDED_KEPT else None
            else:
                forgotten = None
        if forgotten is not None:
            self.actor_logs.forget(forgotten.pid)
        if not self._closed:
            self._chores.put(None)  # keep the warm pool full

    def _start_zygote(self) -> tuple[subprocess.Popen, socket.socket]:
        ours, theirs = socket.socketpair()
        env = dict(os.environ, PARL_LITE_SYS_PATH=json.dumps([os.getcwd() if p == "" else p for p in sys.path]))
        env.update({name: str(self.threads_per_worker) for name in _THREAD_VARIABLES})
        zygote = subprocess.Popen(
            [sys.executable, "-m", "parl_lite.remote.zygote", str(theirs.fileno()), self.session_prefix,
             self._status.path],
            pass_fds=[theirs.fileno()], env=env, start_new_session=True,
        )
        theirs.close()
        try:
            # while the zygote starts: pages for the first large argument, so it costs a copy, not faults
            if self.segments.reserve_bytes:
                self._chore("pre-faulting shared memory", self.segments.prefault, self.segments.reserve_bytes)
            _receive_exactly(ours, 4)  # the zygote says it is ready
        except BaseException as exc:  # also a Ctrl-C: no zygote is left starting, to fail on the closed socket
            zygote.kill()
            zygote.wait()
            ours.close()
            if isinstance(exc, OSError):
                raise RuntimeError(f"the pool's zygote process failed to start: {exc}") from exc
            raise
        return zygote, ours

    # --- housekeeping ---------------------------------------------------------------------------
    def _housekeep(self) -> None:
        next_status = time.monotonic() + _STATUS_PERIOD
        while not self._closed:
            try:
                chore = self._chores.get(timeout=_HOUSEKEEPING_PERIOD)
            except queue.Empty:
                chore = None
            if chore is not None:
                self._chore("closing an actor", chore.stop, _CLOSED)
            self._chore("starting idle workers", self._refill_idle_workers)
            self._chore("enforcing max_memory", self._enforce_memory_limits)
            self._chore("reading idle connections", self._check_workers)
            self._chore("trimming free shared memory", self.segments.trim)
            if time.monotonic() >= next_status:
                self._chore("writing the actor logs", self.actor_logs.flush)
                self._chore("publishing the status", lambda: self._status.publish(self.status()))
                next_status = time.monotonic() + _STATUS_PERIOD

    def _chore(self, what: str, function: Callable[..., Any], *args: Any) -> None:
        """Run one housekeeping step; an error is logged (once per kind) and the others go on."""
        try:
            function(*args)
        except Exception as exc:
            if (what, type(exc)) not in self._failures_reported:
                self._failures_reported.add((what, type(exc)))
                _log.warning("parl_lite pool: %s failed (%s: %s); housekeeping goes on (reported once)",
                             what, type(exc).__name__, exc)

    def _check_workers(self) -> None:
        with self._lock:
            workers = [*self._actors.values(), *self._idle]
        for worker in workers:
            worker.check()
            worker.flush_releases()
            worker.borrowed.trim()

    def _refill_idle_workers(self) -> None:
        while not self._closed:
            with self._lock:
                missing = self.num_workers - len(self._idle)
            if missing <= 0:
                return
            try:
                worker = self._fork_worker()
            except RuntimeError:
                if self._closed:  # shutting down meanwhile
                    return
                raise
            with self._lock:
                self._idle.append(worker)

    def _enforce_memory_limits(self) -> None:
        with self._lock:
            limited = [worker for worker in self._actors.values() if worker.max_memory is not None]
        for worker in limited:
            limit = worker.max_memory
            if limit is not None and worker.resident_mb() > limit:
                worker.kill(_OVER_MEMORY)


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data
