"""The start of every cluster connection: authentication and the version hello.

Every connection starts with a mutual HMAC-SHA256 challenge-response over the shared token, client
first, in which each proof binds who answers whom::

    server -> client   "PLC2" | nonce_s (32 bytes) | length (1 byte) | the server's identity
    client -> server   nonce_c (32) | HMAC(token, "PLC2 client->server" | identity | nonce_s | nonce_c)
    server -> client   "OK" | HMAC(token, "PLC2 server->client" | identity | nonce_s | nonce_c)
                       (or "NO", and the server closes)

The identity is :data:`MASTER` or :func:`node_identity` of a node's id, and the length before it is
part of what is signed. A client states the identity it means to reach and refuses any other, so
the proof a node gives when it rejoins its master cannot be relayed to another server (the node's own
included), and neither proof can be taken for the other's (their labels differ) nor replayed on
another connection (each binds both fresh nonces). The first bytes a server reads are a fixed-size
nonce and digest, so nothing a peer sends is parsed, let alone unpickled, before it has proved it
holds the token. Then each side sends a JSON hello with its parl_lite, Python and cloudpickle
versions, read against the same deadline; a mismatch is refused with both sides named.

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
           "FrameTooLargeError", "encode", "decode", "local_versions", "MAGIC", "MASTER", "node_identity", "challenge",
           "read_opening", "client_proof", "server_proof", "check_answer", "client_handshake", "read_hello",
           "open_connection", "split_address", "receive_exactly", "ANSWER_BYTES", "NONCE_BYTES", "REFUSED"]

MAGIC = b"PLC2"  # and the protocol's version: an older parl_lite sent PLC1
NONCE_BYTES = 32
_DIGEST_BYTES = 32
ANSWER_BYTES = NONCE_BYTES + _DIGEST_BYTES  # what a client sends to authenticate
_CLIENT_LABEL = MAGIC + b" client->server"
_SERVER_LABEL = MAGIC + b" server->client"
_ACCEPTED = b"OK"
REFUSED = b"NO"
MASTER = "master"  # the master's identity; a node's is node_identity(its id)
CONNECT_TIMEOUT = 10.0  # seconds a client gives a server to accept, authenticate and answer its hello
_RETRY_FIRST = 0.01  # seconds before a client tries again when the server dropped it unjudged, doubling ...
_RETRY_MOST = 0.25  # ... up to this
_SHOWN_BYTES = 64  # what a client shows of a wrong service's first words
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


def node_identity(node_id: str) -> str:
    """The identity a node's server states once the master has given it ``node_id``."""
    return f"node {node_id}"


def _proof(label: bytes, token: bytes, identity: str, server_nonce: bytes, client_nonce: bytes) -> bytes:
    named = identity.encode("ascii")
    return hmac.new(token, label + bytes([len(named)]) + named + server_nonce + client_nonce, hashlib.sha256).digest()


def client_proof(token: bytes, identity: str, server_nonce: bytes, client_nonce: bytes) -> bytes:
    """What a client sends (after ``client_nonce``) to prove it holds ``token`` to the server
    ``identity`` that sent ``server_nonce``."""
    return _proof(_CLIENT_LABEL, token, identity, server_nonce, client_nonce)


def server_proof(token: bytes, identity: str, server_nonce: bytes, client_nonce: bytes) -> bytes:
    """What the server ``identity`` sends (after ``OK``) to prove it holds ``token`` too."""
    return _proof(_SERVER_LABEL, token, identity, server_nonce, client_nonce)


def receive_exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    """``size`` bytes, all before ``deadline`` (``time.monotonic()``), however slowly they come.

    Raises:
        TimeoutError: the deadline passed first.
        EOFError: the peer closed the connection first.
    """
    data = bytearray()
    while len(data) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"the deadline passed after {len(data)} of {size} bytes")
        sock.settimeout(remaining)
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError(f"the peer closed the connection after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def challenge(identity: str) -> tuple[bytes, bytes]:
    """A server's opening as ``identity``: (the bytes to send first, the nonce they carry)."""
    named = identity.encode("ascii")
    if not 0 < len(named) < 256:
        raise ValueError(f"a server's identity is 1 to 255 ASCII characters, got {identity!r}")
    nonce = os.urandom(NONCE_BYTES)
    return MAGIC + nonce + bytes([len(named)]) + named, nonce


def check_answer(token: bytes, identity: str, nonce: bytes, answer: bytes) -> bytes | None:
    """The reply of the server ``identity`` to a client's :data:`ANSWER_BYTES`-byte answer to its
    ``nonce``: acceptance and its own proof, or None if the client did not prove it holds the token
    for this server and this connection (then send :data:`REFUSED`)."""
    client_nonce, proof = answer[:NONCE_BYTES], answer[NONCE_BYTES:ANSWER_BYTES]
    if len(client_nonce) != NONCE_BYTES or not hmac.compare_digest(
            proof, client_proof(token, identity, nonce, client_nonce)):
        return None
    return _ACCEPTED + server_proof(token, identity, nonce, client_nonce)


def read_opening(sock: socket.socket, address: str, deadline: float) -> tuple[str, bytes]:
    """The server's identity and nonce, from its opening (all before ``deadline``).

    Raises:
        ClusterError: what answered is not a parl_lite cluster server (what it sent, or that it
            sent nothing, is named), or one of another protocol version (a VersionMismatchError).
        DroppedError: a cluster server's opening was cut off.
    """
    started = time.monotonic()
    try:
        magic = receive_exactly(sock, len(MAGIC), deadline)
    except (EOFError, TimeoutError, ConnectionError) as exc:
        raise _not_a_server(address, exc, time.monotonic() - started) from exc
    if magic != MAGIC:
        seen = magic + _more(sock, deadline)
        if magic[:3] == MAGIC[:3]:
            raise VersionMismatchError(
                f"the server at {address} speaks parl_lite cluster protocol {magic.decode('ascii', 'replace')}, "
                f"this parl_lite speaks {MAGIC.decode()}: run the same parl_lite version on both ends")
        raise ClusterError(f"{address} is not a parl_lite cluster server: it sent {seen[:_SHOWN_BYTES]!r}")
    try:
        nonce = receive_exactly(sock, NONCE_BYTES, deadline)
        named = receive_exactly(sock, receive_exactly(sock, 1, deadline)[0], deadline)
    except (EOFError, ConnectionError) as exc:
        raise DroppedError(f"the server at {address} closed the connection during its opening") from exc
    return named.decode("ascii", "replace"), nonce


def _not_a_server(address: str, why: Exception, waited: float) -> ClusterError:
    """The error for a server that did not send the 4 bytes every cluster server sends at once."""
    if isinstance(why, TimeoutError):
        return ClusterError(f"{address} accepted our connection but said nothing in {waited:.1f} s: it is not "
                            f"a parl_lite cluster server, or one too busy to answer")
    return ClusterError(f"{address} closed our connection before it said anything ({why}): it is not a "
                        f"parl_lite cluster server, or one shutting down")


def _more(sock: socket.socket, deadline: float) -> bytes:
    """What else a wrong service sends at once (to name it), within 0.1 s."""
    try:
        sock.settimeout(max(min(0.1, deadline - time.monotonic()), 1e-3))
        return sock.recv(_SHOWN_BYTES)
    except OSError:
        return b""


def client_handshake(sock: socket.socket, token: bytes, address: str, deadline: float,
                     identity: str = MASTER) -> None:
    """Prove to the server at ``address``, which must be ``identity``, that we hold the token, and
    check that it does too, all before ``deadline`` (``time.monotonic()``).

    Raises:
        DroppedError: the server closed the connection before its verdict (it sheds unauthenticated
            connections when strangers hold too many: worth another try).
        AuthenticationError: it refused our token, or does not hold it.
        ClusterError: what answered is not a cluster server, or not ``identity``.
    """
    theirs, nonce = read_opening(sock, address, deadline)
    if theirs != identity:
        raise ClusterError(f"the server at {address} is {theirs!r}, not the {identity!r} we meant to reach "
                           f"(an address that changed hands, or a relay)")
    client_nonce = os.urandom(NONCE_BYTES)
    try:
        sock.sendall(client_nonce + client_proof(token, identity, nonce, client_nonce))
        verdict = receive_exactly(sock, len(_ACCEPTED), deadline)
        proof = receive_exactly(sock, _DIGEST_BYTES, deadline) if verdict == _ACCEPTED else b""
    except (EOFError, ConnectionError) as exc:
        raise DroppedError(f"the server at {address} closed the connection before its verdict ({exc})") from exc
    except TimeoutError as exc:
        raise ClusterError(f"the server at {address} gave no verdict on our token in time") from exc
    if verdict != _ACCEPTED:
        raise AuthenticationError(f"the cluster at {address} refused our token (check --token-file, token_file= "
                                  f"or PARL_LITE_TOKEN)")
    if not hmac.compare_digest(proof, server_proof(token, identity, nonce, client_nonce)):
        raise AuthenticationError(f"the server at {address} does not hold our token")


def hello_problem(mine: dict[str, str], theirs: dict[str, Any], their_name: str) -> str | None:
    """Why two ends cannot talk (the versions that differ, both named), or None."""
    differing = [key for key in mine if theirs.get(key) != mine[key]]
    if not differing:
        return None
    return "version mismatch: " + "; ".join(
        f"{key} {mine[key]} here, {theirs.get(key, 'unknown')} at {their_name}" for key in differing)


def read_hello(framed: FramedSocket, deadline: float) -> dict[str, Any]:
    """Read an authenticated client's hello (a JSON object), all of it before ``deadline``
    (``time.monotonic()``), and check its versions; the caller answers ``{"ok": True, ...}`` or
    refuses it.

    Raises:
        TimeoutError: the hello did not come whole before the deadline.
        VersionMismatchError: the versions differ (the client was told which).
        ValueError: the hello is not a JSON object with a ``versions`` object (the client was told).
    """
    framed.limit = HELLO_FRAME_BYTES
    try:
        theirs = framed.receive_json_before(deadline)
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
                    timeout: float = CONNECT_TIMEOUT, limit: int = CONTROL_FRAME_BYTES, identity: str = MASTER,
                    **fields: Any) -> tuple[FramedSocket, dict[str, Any]]:
    """Connect to ``host:port``, authenticate, and exchange hellos (``role`` and ``fields`` say what
    the connection is for), all within ``timeout`` seconds. A connection the server drops before it
    judged our token (see :class:`DroppedError`) is tried again, after 10 ms, doubling to 250 ms.

    Args:
        limit: the largest message this end will receive on the connection, in bytes.
        identity: the server we mean to reach: :data:`MASTER`, or :func:`node_identity` of the
            node the master named; any other server is refused.

    Returns:
        The connection (blocking, no timeout) and the server's reply to the hello.

    Raises:
        ClusterError: the server cannot be reached, is not ``identity``, refused us, or runs other
            versions.
    """
    split_address(address)
    deadline = time.monotonic() + timeout
    delay, tries = _RETRY_FIRST, 1
    while True:
        try:
            return _open_once(address, token, role, versions, deadline, limit, identity, fields)
        except DroppedError as exc:
            if time.monotonic() + delay >= deadline:
                raise ClusterError(f"the parl_lite cluster at {address} dropped our connection before it "
                                   f"judged our token, {tries} time(s) in {timeout:g} s: it is overloaded, "
                                   f"or strangers hold its unauthenticated connections") from exc
            time.sleep(delay)
            delay, tries = min(2 * delay, _RETRY_MOST), tries + 1


def _open_once(address: str, token: bytes, role: str, versions: dict[str, str] | None, deadline: float,
               limit: int, identity: str, fields: dict[str, Any]) -> tuple[FramedSocket, dict[str, Any]]:
    try:
        sock = socket.create_connection(split_address(address), timeout=max(deadline - time.monotonic(), 1e-3))
    except OSError as exc:
        raise ClusterError(f"cannot reach the parl_lite cluster at {address}: {exc}") from exc
    framed = FramedSocket(sock, address, HELLO_FRAME_BYTES)
    try:
        client_handshake(sock, token, address, deadline, identity)
        framed.send_json({"versions": versions or local_versions(), "role": role, **fields})
        reply = framed.receive_json_before(deadline)
    except ClusterError:  # refused (also an OSError: first)
        framed.close()
        raise
    except TimeoutError as exc:
        framed.close()
        raise ClusterError(f"the parl_lite cluster at {address} did not finish the handshake in time") from exc
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
