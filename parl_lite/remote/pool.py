"""The local pool: worker processes forked from a zygote, one actor per worker.

Placement is simple on purpose: every actor gets a process of its own, so actors never share a GIL.
``num_workers`` processes are kept started and idle ahead of need (a warm pool), so creating an actor
does not wait for a process to start; the pool may host any number of actors beyond that, each
further process being forked from the zygote in a few milliseconds. After a burst of creations the
pool keeps more idle workers, as many as actors were created in the last ``reserve_window`` seconds
(at most ``max_idle_workers``): the next burst is likely as large, and taking an idle worker costs a
fraction of a fork. Once the burst is that old, the reserve shrinks back to ``num_workers``. A
housekeeping thread forks and stops the idle workers, returns the workers of released actors,
enforces memory limits and publishes status; it survives its own errors (each is logged once) so
that limits stay enforced whatever happens.

A worker's death is seen by its pid (a pidfd), not only by its socket: a child the actor forked may
hold the socket open long after the worker is gone. Each worker leads its own process group, and
the group is killed when the worker ends, so nothing an actor started outlives it.
"""
import collections
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
from parl_lite.remote.backend import ActorOptions, Backend, thread_limits
from parl_lite.remote.caller import CLOSED, CallerChannel, Cause, Ending, State, over_memory
from parl_lite.remote.output import print_actor_output
from parl_lite.remote.shm import Borrowed, SegmentPool, remove_session_segments
from parl_lite.remote.status import StatusBoard, process_start_time
from parl_lite.remote.zygote import ACTOR_WORKER, LARGE_MESSAGES, PID_FORMAT, SMALL_MESSAGES, WARM_WORKER

__all__ = ["LocalPool"]

_HOUSEKEEPING_PERIOD = 0.1  # seconds between memory checks, while an actor has a max_memory
# seconds between status updates, and between looks at idle connections (an idle actor's output, its
# end) when no memory is checked (the default of LocalPool.status_period)
_STATUS_PERIOD = 0.5
# idle workers are forked once no actor was created for this long (a burst's actors would wait for
# the CPU the forks and warm-ups take), or at the latest after a housekeeping period
_BURST_GAP = 0.02
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
# pre-faulted shared memory the caller keeps for its next large argument, even when idle
SHM_RESERVE_BYTES = 64 * 2**20
# seconds during which a creation counts towards the idle reserve (see the module's docstring)
RESERVE_WINDOW = 60.0
IDLE_WORKERS_PER_WORKER = 4  # the default max_idle_workers, per idle worker kept at least
_ENDED_KEPT = 32  # ended actors still listed in the status (and their logs kept)
_log = logging.getLogger("parl_lite.remote")

_EXIT_GRACE = 0.1  # seconds a worker whose connection closed is given to be seen exiting
# the connection closed while the process ran on (an os.exec* in the actor): the pool kills it
_HUNG_UP = Ending(Cause.DIED, "the worker process closed its connection while still running "
                              "(did the actor call os.exec*?) and was killed")

class WorkerProcess(CallerChannel):
    """The caller's end of one worker process, and of the actor it hosts.

    The calls, who reads their replies and how the actor's end fails them are
    :class:`~parl_lite.remote.caller.CallerChannel`'s; this class adds the transport (frames over a
    socket pair, large buffers in shared memory, the worker's end seen by its pidfd) and what the pool
    does with the worker (stop, kill, memory, status, output).
    """

    def __init__(self, pid: int, connection: Connection, pool: "LocalPool") -> None:
        self.pid = pid
        self.max_memory: float | None = None
        self._connection = connection
        self._pool = pool
        self._segments = pool.segments  # what we send (lent under our pid), shared by the workers
        self.borrowed = Borrowed()  # what the worker sent us
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:
            self._pidfd = None  # already gone
        self._fileno = connection.fileno()
        self._poller = select.poll()  # used by the one thread that reads
        self._poller.register(self._fileno, select.POLLIN)
        if self._pidfd is not None:
            self._poller.register(self._pidfd, select.POLLIN)
        self._ready: list[tuple[int, int]] | None = None  # what wait() saw, until receive() uses it
        self._hung_up = False  # the connection ended while the process ran on
        super().__init__(None, f"worker pid {pid}", f"parl_lite-worker-{pid}")

    @property
    def label(self) -> str:
        return f"{self.actor_name or 'idle worker'} pid={self.pid}"

    @property
    def alive(self) -> bool:
        return self.caller_state is not State.ENDED

    @property
    def state(self) -> str:
        """``idle`` (no actor yet), ``starting`` (``__init__`` runs), ``alive``, ``closed`` or ``dead``."""
        if self.caller_state is State.ENDED:
            return "closed" if self.ending is not None and self.ending.cause is Cause.CLOSED else "dead"
        if self.actor_name is None:
            return "idle"
        return "alive" if self.calls_served else "starting"

    def describe(self) -> dict[str, Any]:
        """This worker as the pool's status lists it."""
        own, shared = self.memory_mb()
        return {"pid": self.pid, "actor": self.actor_name, "alive": self.alive, "state": self.state,
                "rss_mb": round(own, 1), "shared_mb": round(shared, 1), "max_memory_mb": self.max_memory,
                "calls_served": self.calls_served, "last_error": self.last_error}

    def close(self) -> None:
        # may run in __del__, in any thread: the housekeeping thread sends the STOP
        super().close()
        self._pool.release(self)

    # --- what the pool does with its workers ----------------------------------------------------
    def create(self, class_blob: bytes, class_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Build the actor in this worker (raises what ``__init__`` raised)."""
        self.actor_name = class_name
        self._run("__init__()", protocol.CREATE, class_blob, args, kwargs)

    def flush_releases(self) -> None:
        """Tell the worker which of its segments no array here views any more."""
        released = self.borrowed.take_released()
        if released:
            self.send_control((protocol.RELEASE, released))

    def prefetch(self, names: list[str]) -> None:
        """Let the worker map ``names`` (free segments of ours) before a message uses them."""
        if names:
            self.send_control((protocol.PREFETCH, names))

    def kill(self, ending: Ending) -> None:
        """Kill the worker process now; pending calls fail with the error of ``ending``."""
        self.stop(ending, send_stop=False)
        self._kill_group()

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

    # --- Transport: how frames travel to and from the worker -------------------------------------
    def encode(self, message: tuple[Any, ...]) -> tuple[bytes, str | None]:
        return protocol.encode(message, self._segments, self.pid)

    def discard(self, frame: tuple[bytes, str | None]) -> None:
        if frame[1] is not None:
            self._segments.release([frame[1]], self.pid)

    def send(self, frame: tuple[bytes, str | None]) -> None:
        released = self.borrowed.take_released()  # piggybacked on each call
        if released:
            self._connection.send_bytes(protocol.encode((protocol.RELEASE, released), self._segments, self.pid)[0])
        self._connection.send_bytes(frame[0])

    def wait(self, timeout: float | None = None) -> bool:
        # a frame, or the worker's end: a child the actor forked may hold the socket open long after
        ready = self._poller.poll(None if timeout is None else timeout * 1000)
        self._ready = ready or None  # nothing yet: receive() waits itself
        return bool(ready)

    def receive(self) -> tuple[Any, ...] | None:
        ready = self._poller.poll() if self._ready is None else self._ready
        self._ready = None
        for fd, _ in ready:
            if fd == self._fileno:
                break
        else:
            return None  # the process ended, and nothing of it is left to read
        try:
            frame = self._connection.recv_bytes()
        except (EOFError, OSError):
            if self._pidfd is not None and not select.select([self._pidfd], [], [], _EXIT_GRACE)[0]:
                self._hung_up = True
            return None
        return protocol.decode(frame, self.borrowed, self._segments, self.pid)

    def handle(self, message: tuple[Any, ...]) -> None:
        if message[0] == protocol.OUTPUT:
            self._pool.actor_logs.record(self.pid, message[2])
            self._pool.on_output(self, message[1], message[2])
        elif message[0] == protocol.RELEASE:
            self._segments.release(message[1], self.pid)
        elif message[0] == protocol.NOTE:
            self._pool.on_note(self, message[1])

    def end(self, expected: bool) -> Ending | None:
        self._kill_group()  # a child the actor forked may live on, holding the socket
        self._segments.forget(self.pid)
        # arrays here may still view the worker's segments: unlinking keeps their mappings valid
        remove_session_segments(f"{self._pool.session_prefix}w{self.pid}_")
        return _HUNG_UP if self._hung_up and not expected else None

    def disconnect(self) -> None:
        self._connection.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
        self._pool._worker_exited(self)


class LocalPool(Backend):
    """Worker processes on this machine that share memory with the caller.

    Args:
        num_workers: idle worker processes kept ready (default: the number of usable CPUs).
        max_idle_workers: the most idle workers kept after a burst of creations (default: 4 ×
            ``num_workers``; ``num_workers`` keeps the reserve fixed).
        reserve_window: seconds during which a creation counts towards the idle reserve: the pool
            keeps one idle worker per actor created in that time, within ``num_workers`` and
            ``max_idle_workers``.
        threads_per_worker: value of OMP/MKL/OpenBLAS thread counts in the workers.

    A pool with other needs (a cluster node's, :class:`parl_lite.ext.cluster.node.NodePool`) is a
    subclass that sets the class attributes below and overrides :meth:`on_output` and :meth:`on_note`.
    """

    #: pre-faulted shared memory kept for large arguments (0: none)
    shm_reserve_bytes: int = SHM_RESERVE_BYTES
    #: whether calls and replies over the workers' connections may carry large arrays; with False a new
    #: worker warms up only the class path, not the shared-memory one (1.6 ms of its CPU); a large
    #: message still works, at the price of that first use
    large_messages: bool = True
    #: seconds between two publications of the status (``parl-lite status``) and two looks at idle
    #: workers' connections, when no actor has a ``max_memory``
    status_period: float = _STATUS_PERIOD

    def __init__(self, num_workers: int | None = None, threads_per_worker: int = 1,
                 max_idle_workers: int | None = None, reserve_window: float = RESERVE_WINDOW) -> None:
        if num_workers is None:
            num_workers = len(os.sched_getaffinity(0))
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers must be a non-negative integer, got {num_workers!r}")
        if max_idle_workers is None:
            max_idle_workers = IDLE_WORKERS_PER_WORKER * num_workers
        if not isinstance(max_idle_workers, int) or max_idle_workers < num_workers:
            raise ValueError(f"max_idle_workers must be an integer of at least num_workers ({num_workers}), "
                             f"got {max_idle_workers!r}")
        if not isinstance(reserve_window, (int, float)) or not reserve_window >= 0:
            raise ValueError(f"reserve_window must be a non-negative number of seconds, got {reserve_window!r}")
        if not isinstance(threads_per_worker, int) or threads_per_worker < 1:
            raise ValueError(f"threads_per_worker must be a positive integer, got {threads_per_worker!r}")
        self.num_workers = num_workers
        self.max_idle_workers = max_idle_workers
        self.reserve_window = float(reserve_window)
        self.threads_per_worker = threads_per_worker
        self.session_prefix = f"parl_lite_{os.getpid()}_{uuid.uuid4().hex[:8]}_"
        self.segments = SegmentPool(f"{self.session_prefix}d_", reserve_bytes=self.shm_reserve_bytes)
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._control_lock = threading.Lock()
        self._idle: list[WorkerProcess] = []  # oldest first: the first to be ready
        # when the latest actors were created (as many as can count towards the idle reserve)
        self._creations: collections.deque[float] = collections.deque(maxlen=max_idle_workers)
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

    def on_output(self, worker: "WorkerProcess", stream_name: str, text: str) -> None:
        """A chunk of ``worker`` 's actor output (whole lines) on ``stream_name``: printed as
        ``(<Class> pid=N) line``."""
        print_actor_output(worker.label, stream_name, text)

    def on_note(self, worker: "WorkerProcess", value: Any) -> None:
        """A note ``worker`` sent beside its replies (:func:`parl_lite.remote.worker.send_note`; a
        cluster node's actor hosts send their figures so): dropped."""

    # --- Backend --------------------------------------------------------------------------------
    def create_actor(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any],
                     options: ActorOptions) -> WorkerProcess:
        if self._closed:
            raise RuntimeError("the parl_lite pool is shut down")
        blob = self._class_blobs.blob(cls)
        worker = self._take_idle_worker() or self._fork_worker(for_actor=True)
        worker.max_memory = options.max_memory
        with self._lock:
            self._actors[worker.pid] = worker
            self._creations.append(time.monotonic())
        try:
            worker.create(blob, cls.__qualname__, args, kwargs)
        except BaseException:
            self.release(worker)
            raise
        finally:
            self._chores.put(None)  # refill the idle workers, once they no longer compete with this one
        return worker

    def limit_memory(self, worker: WorkerProcess, max_memory: float | None) -> None:
        """Set the ``max_memory`` (MB; None: none) of ``worker``, an actor made by :meth:`create_actor`
        before its limit was known (a cluster node's spare host): checked from now on, not from the
        housekeeper's next wake-up, a ``status_period`` away."""
        worker.max_memory = max_memory
        if max_memory is not None:
            self._chores.put(None)

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
            "idle_target": self._idle_target(),
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
                worker.stop()
            self._control.close()  # the zygote kills and reaps what is left, then sweeps segments
            try:
                self._zygote.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._zygote.kill()
                self._zygote.wait()
        except KeyboardInterrupt:
            for worker in workers:
                worker.kill(CLOSED)
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
                worker = self._idle.pop(0)
            worker.read_available()  # an idle worker's death is only seen when its connection is read
            if worker.alive:
                return worker

    def _fork_worker(self, for_actor: bool = False) -> WorkerProcess:
        """A new worker: for the warm pool, or (``for_actor``) for an actor that waits for it."""
        ours, theirs = socket.socketpair()
        try:
            with self._control_lock:
                if self._closed:
                    raise RuntimeError("the parl_lite pool is shut down")
                socket.send_fds(self._control, [ACTOR_WORKER if for_actor else WARM_WORKER], [theirs.fileno()])
                pid, = struct.unpack(PID_FORMAT, _receive_exactly(self._control, 4))
        except OSError as exc:
            ours.close()
            raise RuntimeError(f"the pool's zygote process (pid {self._zygote.pid}) is gone: {exc}") from exc
        finally:
            theirs.close()
        worker = WorkerProcess(pid, Connection(ours.detach()), self)
        # the reserve, mapped before the actor's first call: a forked process's first mapping of it
        # would cost that call several milliseconds
        worker.prefetch(self.segments.free_names())
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
        env.update(thread_limits(self.threads_per_worker))
        zygote = subprocess.Popen(
            [sys.executable, "-m", "parl_lite.remote.zygote", str(theirs.fileno()), self.session_prefix,
             self._status.path, LARGE_MESSAGES if self.large_messages else SMALL_MESSAGES],
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
        next_status = time.monotonic() + self.status_period
        while not self._closed:
            with self._lock:
                limited = any(worker.max_memory is not None for worker in self._actors.values())
            try:
                chore = self._chores.get(timeout=_HOUSEKEEPING_PERIOD if limited else self.status_period)
            except queue.Empty:
                chore = None
            if chore is not None:
                self._chore("closing an actor", chore.stop)
            self._chore("starting and stopping idle workers", self._size_idle_workers)
            self._chore("enforcing max_memory", self._enforce_memory_limits)
            self._chore("reading idle connections", self._check_workers)
            self._chore("trimming free shared memory", self.segments.trim)
            if time.monotonic() >= next_status:
                self._chore("writing the actor logs", self.actor_logs.flush)
                self._chore("publishing the status", lambda: self._status.publish(self.status()))
                next_status = time.monotonic() + self.status_period

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
            worker.read_available()
            worker.flush_releases()
            worker.borrowed.trim()

    def _idle_target(self) -> int:
        """How many idle workers to keep: one per actor created in the last ``reserve_window``
        seconds, within ``num_workers`` and ``max_idle_workers``."""
        since = time.monotonic() - self.reserve_window
        with self._lock:
            recent = sum(1 for created in self._creations if created >= since)
        return max(self.num_workers, recent)

    def _size_idle_workers(self) -> None:
        """Fork idle workers up to :meth:`_idle_target`, or stop those beyond it (the newest)."""
        paused = False
        while not self._closed:
            target = self._idle_target()
            with self._lock:
                missing = target - len(self._idle)
                surplus = [self._idle.pop() for _ in range(-missing)]
            for worker in surplus:
                worker.stop()
            if missing <= 0:
                return
            if not paused:
                self._wait_for_a_pause_in_creations()
                paused = True
            try:
                worker = self._fork_worker()
            except RuntimeError:
                if self._closed:  # shutting down meanwhile
                    return
                raise
            with self._lock:
                self._idle.append(worker)

    def _wait_for_a_pause_in_creations(self) -> None:
        """Sleep until no actor was created for :data:`_BURST_GAP` seconds, for at most
        :data:`_HOUSEKEEPING_PERIOD` (the other chores wait meanwhile)."""
        deadline = time.monotonic() + _HOUSEKEEPING_PERIOD
        while True:
            with self._lock:
                last = self._creations[-1] if self._creations else 0.0
            now = time.monotonic()
            pause = _BURST_GAP - (now - last)
            if pause <= 0 or now >= deadline or self._closed:
                return
            time.sleep(min(pause, deadline - now))

    def _enforce_memory_limits(self) -> None:
        with self._lock:
            limited = [worker for worker in self._actors.values() if worker.max_memory is not None]
        for worker in limited:
            limit = worker.max_memory
            if limit is not None and worker.resident_mb() > limit:
                worker.kill(over_memory(limit))


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data
