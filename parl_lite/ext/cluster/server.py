"""A TCP server shared by the master and the node agent: authenticate, check the hello, dispatch.

The server states its identity (the master, or a node by its id: :mod:`parl_lite.ext.cluster.wire`)
in every opening; a node's server accepts nothing until the master has given it its id.
Connections that have not proved they hold the token are handled by one thread, with a selector:
the accept loop and every handshake in progress. Nothing a stranger sends is parsed (the server
reads a fixed-size nonce and digest), and what a stranger may hold is bounded (:class:`Limits`):
- time: one deadline for the whole handshake, from ``accept()`` to the end of the hello;
- connections: at most ``max_unauthenticated`` in all and ``max_unauthenticated_per_peer`` per
  address, and never more than a quarter of the process's file descriptors; a new connection over
  the per-address cap drops that address's oldest, one over the total drops the oldest of the
  heaviest source (:mod:`parl_lite.ext.cluster.admission`: a flood from many addresses sheds its own);
- threads: none of its own (a thread per connection would let a stranger make threads);
- the accept loop itself: out of file descriptors (``EMFILE``/``ENFILE``) it drops an
  unauthenticated connection (as above), pauses accepting (50 ms, doubling to 1 s while it lasts)
  and goes on; a connection aborted before it was accepted is skipped.
Refusals are logged as one summary line per 10 s (counts by reason), not one line each.

An authenticated connection gets a thread (an idle one reused: :mod:`parl_lite.remote.threads`),
reads the peer's hello (JSON) before the same deadline, checks it against the role it names
(:mod:`parl_lite.ext.cluster.hello`), answers a bad one with an error naming what is wrong, and then
runs the role's handler.
"""
import collections
import errno
import json
import logging
import os
import select
import selectors
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from parl_lite.ext.cluster import hello as hello_fields
from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.admission import Unauthenticated, network_of
from parl_lite.ext.cluster.limits import HELLO_FRAME_BYTES, Limits
from parl_lite.common.atomic import write_atomically
from parl_lite.remote.threads import start_daemon

__all__ = ["Server", "Role", "RefusalLog", "run_until_stopped"]

Handler = Callable[[wire.FramedSocket, dict[str, Any]], None]
logger = logging.getLogger("parl_lite.cluster")

_ACCEPTS_PER_ROUND = 64
_PAUSE_FIRST = 0.05  # seconds the accept loop pauses when out of file descriptors, doubling ...
_PAUSE_MOST = 1.0  # ... up to this
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass(frozen=True)
class Role:
    """What a peer may ask a connection to be for: its handler (which owns the connection) and the
    fields its hello must hold."""

    handler: Handler
    fields: dict[str, hello_fields.Field] = field(default_factory=dict)


class RefusalLog:
    """Counts refused connections by reason and logs one WARNING line per ``interval`` seconds
    (the first refusal after a quiet interval at once)."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()
        self._peers: set[str] = set()
        self._since = time.monotonic()
        self._next = 0.0

    def note(self, reason: str, peer: str) -> None:
        with self._lock:
            self._counts[reason] += 1
            self._peers.add(peer)
        self.flush()

    def due_in(self) -> float:
        """Seconds until counts waiting now would be logged (a long time if there are none)."""
        with self._lock:
            return max(0.0, self._next - time.monotonic()) if self._counts else 3600.0

    def flush(self) -> None:
        """Log what was counted, if the interval has passed."""
        now = time.monotonic()
        with self._lock:
            if not self._counts or now < self._next:
                return
            counts, self._counts = self._counts, collections.Counter()
            peers, self._peers = sorted(self._peers), set()
            since, self._since, self._next = self._since, now, now + self.interval
        shown = ", ".join(peers[:3]) + (f" and {len(peers) - 3} more" if len(peers) > 3 else "")
        logger.warning("refused %d connection(s) in the last %.0f s from %s: %s", sum(counts.values()),
                       now - since, shown, ", ".join(f"{count} {reason}" for reason, count in counts.most_common()))


@dataclass
class _Handshake:
    """An accepted connection that has not yet proved it holds the token."""

    sock: socket.socket
    peer: str  # its address (the per-peer cap's key)
    network: str  # the network its address counts in (admission.network_of)
    label: str  # address:port
    identity: str  # ours, as its opening stated it
    nonce: bytes
    deadline: float
    answer: bytearray = field(default_factory=bytearray)


class Server:
    """Listens on ``host:port`` (port 0: the OS picks) and dispatches authenticated connections.

    Args:
        host: the interface to bind (``127.0.0.1`` unless told otherwise).
        port: the TCP port.
        token: the shared secret.
        roles: role named in the peer's hello -> its handler and hello fields.
        limits: the handshake deadline and the caps on unauthenticated connections.
        identity: who this server is (:data:`wire.MASTER` or :func:`wire.node_identity`); if None,
            connections wait in the listen queue until :meth:`serve_as` names it.
    """

    def __init__(self, host: str, port: int, token: bytes, roles: dict[str, Role], limits: Limits,
                 identity: str | None = None) -> None:
        self._token = token
        self._roles = roles
        self._limits = limits
        self._caps = limits.unauthenticated_caps()
        self.refusals = RefusalLog()
        # a deep listen queue (the kernel bounds it by net.core.somaxconn): while it has room a token
        # holder's connection waits there for its turn; a full one drops its SYN (retried after 1 s)
        self._listener = socket.create_server((host, port), backlog=socket.SOMAXCONN)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._wake_read, self._wake_write = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._handshakes: Unauthenticated[_Handshake] = Unauthenticated(limits.handshake_timeout)
        self._closed = False
        self._identity = ""
        self._thread = threading.Thread(target=self._run, daemon=True, name="parl_lite-accept")
        if identity is not None:
            self.serve_as(identity)

    def serve_as(self, identity: str) -> None:
        """State ``identity`` in the openings from now on (and start serving, the first time)."""
        wire.challenge(identity)  # checks it
        first, self._identity = not self._identity, identity
        if first and not self._closed:
            self._thread.start()

    @property
    def unauthenticated(self) -> int:
        """Connections whose handshake is in progress now."""
        return len(self._handshakes)

    def close(self) -> None:
        """Stop accepting connections; those still authenticating are dropped."""
        if self._closed:
            return
        self._closed = True
        try:
            self._wake_write.send(b"x")
        except OSError:
            pass
        if not self._thread.is_alive() and not self._identity:  # never started: its loop cleans up nothing
            self._release()
        elif self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    # --- the accept loop and the handshakes (one thread) -----------------------------------------
    def _run(self) -> None:
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._selector.register(self._listener, selectors.EVENT_READ)
        pause, resume_at = _PAUSE_FIRST, 0.0
        try:
            while not self._closed:
                now = time.monotonic()
                if resume_at and now >= resume_at:
                    self._selector.register(self._listener, selectors.EVENT_READ)
                    resume_at = 0.0
                timeout = self.refusals.due_in()
                oldest = self._handshakes.oldest()
                if oldest is not None:
                    timeout = min(timeout, oldest.deadline - now)
                if resume_at:
                    timeout = min(timeout, resume_at - now)
                ready = False
                for key, _ in self._selector.select(max(timeout, 0.0)):
                    if key.fileobj is self._listener:
                        ready = True
                    elif isinstance(key.data, _Handshake):
                        self._advance(key.data)
                if ready and not self._closed and not self._accept():  # out of file descriptors
                    self._selector.unregister(self._listener)
                    resume_at, pause = time.monotonic() + pause, min(2 * pause, _PAUSE_MOST)
                elif ready:
                    pause = _PAUSE_FIRST
                self._expire()
                self.refusals.flush()
        finally:
            for handshake in self._handshakes:
                self._forget(handshake)
                handshake.sock.close()
            self._release()

    def _release(self) -> None:
        self._selector.close()
        self._listener.close()
        self._wake_read.close()
        self._wake_write.close()

    def _accept(self) -> bool:
        """Accept what is waiting; False if out of file descriptors (a handshake was dropped)."""
        # many at a time, so that the listen queue drains as fast as a flood fills it; those accepted
        # in one round shed each other, not a holder's connection from another source (admission)
        for _ in range(_ACCEPTS_PER_ROUND):
            try:
                sock, address = self._listener.accept()
            except BlockingIOError:
                return True
            except OSError as error:
                if error.errno in _OUT_OF_DESCRIPTORS:
                    self.refusals.note(f"accept() paused: {os.strerror(error.errno or 0)}", "this process")
                    victim = self._handshakes.victim()
                    if victim is not None:
                        self._drop(victim, "dropped to free a file descriptor")
                    return False
                continue  # aborted before we took it (ECONNABORTED, EPROTO, ...): the next one
            self._admit(sock, address)
        return True

    def _admit(self, sock: socket.socket, address: Any) -> None:
        peer = str(address[0])
        total, per_peer = self._caps
        if self._handshakes.held_by(peer) >= per_peer:
            oldest = self._handshakes.oldest_of(peer)
            if oldest is not None:
                self._drop(oldest, "dropped for a newer connection from its address")
        identity = self._identity
        opening, nonce = wire.challenge(identity)
        try:
            sock.setblocking(False)
            sent = sock.send(opening)  # a new socket's buffer takes these few bytes whole
        except OSError:
            sent = 0
        if sent != len(opening):
            sock.close()
            return
        now = time.monotonic()
        handshake = _Handshake(sock, peer, network_of(peer), f"{peer}:{address[1]}", identity, nonce,
                               now + self._limits.handshake_timeout)
        self._handshakes.add(sock, handshake, now)
        self._selector.register(sock, selectors.EVENT_READ, handshake)
        if len(self._handshakes) > total:
            victim = self._handshakes.victim(sparing=sock)
            if victim is not None:
                self._drop(victim, "dropped for a newer connection")

    def _advance(self, handshake: _Handshake) -> None:
        try:
            chunk = handshake.sock.recv(wire.ANSWER_BYTES - len(handshake.answer))
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(handshake, "closed during the handshake")
            return
        handshake.answer += chunk
        if len(handshake.answer) < wire.ANSWER_BYTES:
            return
        reply = wire.check_answer(self._token, handshake.identity, handshake.nonce, bytes(handshake.answer))
        if reply is None:
            try:
                handshake.sock.send(wire.REFUSED)
            except OSError:
                pass
            self._drop(handshake, "wrong token")
            return
        self._forget(handshake)
        self._handshakes.authenticated(handshake.peer, time.monotonic())
        try:
            handshake.sock.send(reply)
            handshake.sock.setblocking(True)
            start_daemon(self._serve, (handshake,), f"parl_lite-peer-{handshake.label}")
        except (OSError, RuntimeError):  # gone meanwhile, or no thread can be started now
            handshake.sock.close()

    def _expire(self) -> None:
        now = time.monotonic()
        while (oldest := self._handshakes.oldest()) is not None:  # accepted first: the first deadline
            if oldest.deadline > now:
                return
            self._drop(oldest, "handshake deadline passed")

    def _drop(self, handshake: _Handshake, reason: str) -> None:
        self._forget(handshake)
        handshake.sock.close()
        self.refusals.note(reason, handshake.peer)

    def _forget(self, handshake: _Handshake) -> None:
        self._handshakes.remove(handshake.sock)
        self._selector.unregister(handshake.sock)

    # --- an authenticated connection (a thread each) ----------------------------------------------
    def _serve(self, handshake: _Handshake) -> None:
        framed = wire.FramedSocket(handshake.sock, handshake.label, HELLO_FRAME_BYTES)
        try:
            hello = wire.read_hello(framed, handshake.deadline)
            role = self._roles.get(hello["role"]) if isinstance(hello.get("role"), str) else None
            problem = (f"unknown role {hello.get('role')!r}" if role is None
                       else hello_fields.problem(hello, role.fields))
            if problem:
                framed.send_json({"ok": False, "error": f"malformed hello: {problem}"})
                raise ValueError(problem)
        except TimeoutError:
            self.refusals.note("handshake deadline passed", handshake.peer)
            framed.close()
            return
        except (OSError, EOFError, ValueError, wire.ClusterError) as error:
            self.refusals.note(f"refused a hello ({type(error).__name__})", handshake.peer)
            logger.debug("refused the hello of %s: %s", handshake.label, error)
            framed.close()
            return
        assert role is not None
        try:
            role.handler(framed, hello)
        except (OSError, EOFError):
            framed.close()


EXIT_WITH_VARIABLE = "PARL_LITE_EXIT_WITH"  # a pid: the master and nodes stop when it exits (tests)


def run_until_stopped(ready_file: str, info: dict[str, Any], stop: threading.Event) -> None:
    """Write ``info`` (JSON) to ``ready_file``, which ``parl-lite start`` / ``connect`` wait for, then
    wait until SIGTERM, SIGINT or ``stop`` (or the exit of the process ``$PARL_LITE_EXIT_WITH`` names:
    a test run that is killed does not leave its cluster running)."""
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    owner = os.environ.get(EXIT_WITH_VARIABLE)
    if owner:
        threading.Thread(target=_stop_with, args=(int(owner), stop), daemon=True).start()
    write_atomically(ready_file, lambda path: path.write_text(json.dumps(info)))
    stop.wait()


def _stop_with(pid: int, stop: threading.Event) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        stop.set()
        return
    select.select([pidfd], [], [])  # readable once the process has exited
    os.close(pidfd)
    stop.set()
