"""The start of every cluster connection: authentication and the version hello.

Every connection starts with a mutual HMAC-SHA256 challenge-response over the shared token (the
scheme of ``multiprocessing.connection``'s ``authkey``, in both directions): the first bytes each
side reads are fixed-size random challenges and digests, so nothing a peer sends is parsed, let alone
unpickled, before it has proved it holds the token. Then each side sends a JSON hello with its
parl_lite, Python and cloudpickle versions; a mismatch is refused with both sides named.

After that a connection carries the messages of :mod:`parl_lite.ext.cluster.framing`.
"""
import hashlib
import hmac
import os
import platform
import socket
import time
from typing import Any

import cloudpickle

from parl_lite.ext.cluster.framing import FramedSocket, FrameTooLargeError, decode, encode
from parl_lite.ext.cluster.limits import CONTROL_FRAME_BYTES, HELLO_FRAME_BYTES
from parl_lite.version import __version__

__all__ = ["ClusterError", "AuthenticationError", "VersionMismatchError", "DroppedError", "FramedSocket",
           "FrameTooLargeError",
           "encode", "decode", "local_versions", "challenge", "check_answer", "client_handshake",
           "read_hello", "open_connection", "split_address", "ANSWER_BYTES", "REFUSED"]

_MAGIC = b"PLC1"
_CHALLENGE_BYTES = 32
_DIGEST_BYTES = 32
ANSWER_BYTES = _DIGEST_BYTES + _CHALLENGE_BYTES  # what a client sends to authenticate
_ACCEPTED = b"OK"
REFUSED = b"NO"
CONNECT_TIMEOUT = 10.0  # seconds a client gives a server to accept, authenticate and answer its hello
_RETRY_FIRST = 0.01  # seconds before a client tries again when the server dropped it unjudged, doubling ...
_RETRY_MOST = 0.25  # ... up to this
HEARTBEAT_PERIOD = 0.5  # seconds between a node's reports to the master and beats to its clients
SILENCE_LIMIT = 2.5  # seconds without a word after which a node is taken for dead (5 missed heartbeats)


class ClusterError(RuntimeError, ConnectionError):
    """The cluster cannot do what was asked (unreachable, refused, full, gone).

    Also a ``ConnectionError``: a program that handles a backend it cannot use (as
    ``parl_lite.connect("ray://...")`` raises when no Ray answers) handles this one too."""


class AuthenticationError(ClusterError):
    """The peer did not prove it holds the cluster's token (or we do not hold the peer's)."""


class VersionMismatchError(ClusterError):
    """The peer runs another parl_lite, Python major.minor or cloudpickle version."""


class DroppedError(ClusterError):
    """The server closed the connection before it had judged our token."""


def local_versions() -> dict[str, str]:
    """The versions both ends of a connection must share."""
    return {"parl_lite": __version__, "python": ".".join(platform.python_version_tuple()[:2]),
            "cloudpickle": cloudpickle.__version__}


def _digest(token: bytes, side: bytes, challenge: bytes) -> bytes:
    return hmac.new(token, side + challenge, hashlib.sha256).digest()


def _receive_exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    """``size`` bytes, all before ``deadline`` (``time.monotonic()``), however slowly they come."""
    data = bytearray()
    while len(data) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the handshake took too long")
        sock.settimeout(remaining)
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        data += chunk
    return bytes(data)


def challenge() -> tuple[bytes, bytes]:
    """A server's opening: (the bytes to send first, the challenge they carry)."""
    nonce = os.urandom(_CHALLENGE_BYTES)
    return _MAGIC + nonce, nonce


def check_answer(token: bytes, nonce: bytes, answer: bytes) -> bytes | None:
    """The server's reply to a client's :data:`ANSWER_BYTES`-byte answer to ``nonce``: acceptance
    and our own proof, or None if the client does not hold the token (then send :data:`REFUSED`)."""
    if not hmac.compare_digest(answer[:_DIGEST_BYTES], _digest(token, b"client", nonce)):
        return None
    return _ACCEPTED + _digest(token, b"server", answer[_DIGEST_BYTES:])


def client_handshake(sock: socket.socket, token: bytes, address: str, deadline: float) -> None:
    """Prove to the server at ``address`` that we hold the token, and check that it does too, all
    before ``deadline`` (``time.monotonic()``).

    Raises:
        DroppedError: the server closed the connection before its verdict (it sheds the oldest
            unauthenticated connections when strangers hold too many: worth another try).
        AuthenticationError: it refused our token, or does not hold it.
    """
    try:
        opening = _receive_exactly(sock, len(_MAGIC) + _CHALLENGE_BYTES, deadline)
        if opening[:len(_MAGIC)] != _MAGIC:
            raise ClusterError(f"{address} is not a parl_lite cluster server")
        nonce = os.urandom(_CHALLENGE_BYTES)
        sock.sendall(_digest(token, b"client", opening[len(_MAGIC):]) + nonce)
        verdict = _receive_exactly(sock, len(_ACCEPTED), deadline)
    except ConnectionError as exc:
        raise DroppedError(str(exc)) from exc
    if verdict != _ACCEPTED:
        raise AuthenticationError(f"the cluster at {address} refused our token (check --token-file, "
                                  f"token_file= or PARL_LITE_TOKEN)")
    proof = _receive_exactly(sock, _DIGEST_BYTES, deadline)
    if not hmac.compare_digest(proof, _digest(token, b"server", nonce)):
        raise AuthenticationError(f"the server at {address} does not hold our token")


def hello_problem(mine: dict[str, str], theirs: dict[str, Any], their_name: str) -> str | None:
    """Why two ends cannot talk (the versions that differ, both named), or None."""
    differing = [key for key in mine if theirs.get(key) != mine[key]]
    if not differing:
        return None
    return "version mismatch: " + "; ".join(
        f"{key} {mine[key]} here, {theirs.get(key, 'unknown')} at {their_name}" for key in differing)


def read_hello(framed: FramedSocket) -> dict[str, Any]:
    """Read an authenticated client's hello (a JSON object) and check its versions; the caller
    answers ``{"ok": True, ...}`` or refuses it.

    Raises:
        VersionMismatchError: the versions differ (the client was told which).
        ValueError: the hello is not a JSON object with a ``versions`` object (the client was told).
    """
    framed.limit = HELLO_FRAME_BYTES
    try:
        theirs = framed.receive_json()
        if not isinstance(theirs, dict) or not isinstance(theirs.get("versions"), dict):
            raise ValueError("a hello must be a JSON object with a \"versions\" object")
    except ValueError as exc:  # not JSON, not an object, too large
        framed.send_json({"ok": False, "error": f"malformed hello: {exc}"})
        raise
    problem = hello_problem(local_versions(), theirs["versions"], framed.peer)
    if problem:
        framed.send_json({"ok": False, "error": problem})
        raise VersionMismatchError(problem)
    return theirs


def open_connection(address: str, token: bytes, role: str, versions: dict[str, str] | None = None,
                    timeout: float = CONNECT_TIMEOUT, limit: int = CONTROL_FRAME_BYTES,
                    **fields: Any) -> tuple[FramedSocket, dict[str, Any]]:
    """Connect to ``host:port``, authenticate, and exchange hellos (``role`` and ``fields`` say what
    the connection is for), all within ``timeout`` seconds. A connection the server drops before it
    judged our token (see :class:`DroppedError`) is tried again, after 10 ms, doubling to 250 ms.

    Args:
        limit: the largest message this end will receive on the connection, in bytes.

    Returns:
        The connection (blocking, no timeout) and the server's reply to the hello.

    Raises:
        ClusterError: the server cannot be reached, refused us, or runs other versions.
    """
    split_address(address)
    deadline = time.monotonic() + timeout
    delay, tries = _RETRY_FIRST, 1
    while True:
        try:
            return _open_once(address, token, role, versions, deadline, limit, fields)
        except DroppedError as exc:
            if time.monotonic() + delay >= deadline:
                raise ClusterError(f"the parl_lite cluster at {address} dropped our connection before it "
                                   f"judged our token, {tries} time(s) in {timeout:g} s: it is overloaded, "
                                   f"or strangers hold its unauthenticated connections") from exc
            time.sleep(delay)
            delay, tries = min(2 * delay, _RETRY_MOST), tries + 1


def _open_once(address: str, token: bytes, role: str, versions: dict[str, str] | None, deadline: float,
               limit: int, fields: dict[str, Any]) -> tuple[FramedSocket, dict[str, Any]]:
    try:
        sock = socket.create_connection(split_address(address), timeout=max(deadline - time.monotonic(), 1e-3))
    except OSError as exc:
        raise ClusterError(f"cannot reach the parl_lite cluster at {address}: {exc}") from exc
    framed = FramedSocket(sock, address, HELLO_FRAME_BYTES)
    try:
        client_handshake(sock, token, address, deadline)
        framed.send_json({"versions": versions or local_versions(), "role": role, **fields})
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        reply = framed.receive_json()
        sock.settimeout(None)
    except ClusterError:  # refused (also an OSError: first)
        framed.close()
        raise
    except (OSError, EOFError, ValueError) as exc:
        framed.close()
        raise ClusterError(f"the parl_lite cluster at {address} closed the connection during the "
                           f"handshake: {exc}") from exc
    if not isinstance(reply, dict) or not reply.get("ok"):
        framed.close()
        error = str(reply.get("error", "refused") if isinstance(reply, dict) else "a malformed reply")
        if error.startswith("version mismatch"):
            raise VersionMismatchError(f"the parl_lite cluster at {address} refused us: {error}")
        raise ClusterError(f"the parl_lite cluster at {address} refused us: {error}")
    framed.limit = limit
    return framed, reply


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` -> ``("host", port)``, with a clear error for anything else."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"a cluster address is host:port with a port from 1 to 65535 (e.g. 127.0.0.1:8010), "
                         f"got {address!r}")
    return host, int(port)
