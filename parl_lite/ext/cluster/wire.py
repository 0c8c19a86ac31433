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
from typing import Any

import cloudpickle

from parl_lite.ext.cluster.framing import FramedSocket, decode, encode
from parl_lite.version import __version__

__all__ = ["ClusterError", "AuthenticationError", "VersionMismatchError", "FramedSocket", "encode",
           "decode", "local_versions", "server_handshake", "client_handshake", "server_hello",
           "open_connection", "split_address"]

_MAGIC = b"PLC1"
_CHALLENGE_BYTES = 32
_DIGEST_BYTES = 32
_ACCEPTED = b"OK"
_REFUSED = b"NO"
HANDSHAKE_TIMEOUT = 5.0  # seconds a peer may take to authenticate before it is dropped
HEARTBEAT_PERIOD = 0.5  # seconds between a node's reports to the master and beats to its clients
SILENCE_LIMIT = 3.0  # seconds without a word after which a node is taken for dead


class ClusterError(RuntimeError, ConnectionError):
    """The cluster cannot do what was asked (unreachable, refused, full, gone).

    Also a ``ConnectionError``: a program that handles a backend it cannot use (as
    ``parl_lite.connect("ray://...")`` raises when no Ray answers) handles this one too."""


class AuthenticationError(ClusterError):
    """The peer did not prove it holds the cluster's token (or we do not hold the peer's)."""


class VersionMismatchError(ClusterError):
    """The peer runs another parl_lite, Python major.minor or cloudpickle version."""


def local_versions() -> dict[str, str]:
    """The versions both ends of a connection must share."""
    return {"parl_lite": __version__, "python": ".".join(platform.python_version_tuple()[:2]),
            "cloudpickle": cloudpickle.__version__}


def _digest(token: bytes, side: bytes, challenge: bytes) -> bytes:
    return hmac.new(token, side + challenge, hashlib.sha256).digest()


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        data += chunk
    return bytes(data)


def server_handshake(sock: socket.socket, token: bytes) -> None:
    """Authenticate the peer that connected to us, then let it authenticate us.

    Raises:
        AuthenticationError: the peer's digest is wrong (the connection is then useless).
        OSError: the peer went away or took longer than :data:`HANDSHAKE_TIMEOUT`.
    """
    sock.settimeout(HANDSHAKE_TIMEOUT)
    challenge = os.urandom(_CHALLENGE_BYTES)
    sock.sendall(_MAGIC + challenge)
    answer = _receive_exactly(sock, _DIGEST_BYTES + _CHALLENGE_BYTES)
    if not hmac.compare_digest(answer[:_DIGEST_BYTES], _digest(token, b"client", challenge)):
        sock.sendall(_REFUSED)
        raise AuthenticationError("a peer failed authentication (wrong or no token)")
    sock.sendall(_ACCEPTED + _digest(token, b"server", answer[_DIGEST_BYTES:]))
    sock.settimeout(None)


def client_handshake(sock: socket.socket, token: bytes, address: str) -> None:
    """Prove to the server at ``address`` that we hold the token, and check that it does too."""
    sock.settimeout(HANDSHAKE_TIMEOUT)
    opening = _receive_exactly(sock, len(_MAGIC) + _CHALLENGE_BYTES)
    if opening[:len(_MAGIC)] != _MAGIC:
        raise ClusterError(f"{address} is not a parl_lite cluster server")
    challenge = os.urandom(_CHALLENGE_BYTES)
    sock.sendall(_digest(token, b"client", opening[len(_MAGIC):]) + challenge)
    try:
        verdict = _receive_exactly(sock, len(_ACCEPTED))
    except ConnectionError:
        verdict = _REFUSED
    if verdict != _ACCEPTED:
        raise AuthenticationError(f"the cluster at {address} refused our token (check --token-file, "
                                  f"token_file= or PARL_LITE_TOKEN)")
    proof = _receive_exactly(sock, _DIGEST_BYTES)
    if not hmac.compare_digest(proof, _digest(token, b"server", challenge)):
        raise AuthenticationError(f"the server at {address} does not hold our token")
    sock.settimeout(None)


def hello_problem(mine: dict[str, str], theirs: dict[str, Any], their_name: str) -> str | None:
    """Why two ends cannot talk (the versions that differ, both named), or None."""
    differing = [key for key in mine if theirs.get(key) != mine[key]]
    if not differing:
        return None
    return "version mismatch: " + "; ".join(
        f"{key} {mine[key]} here, {theirs.get(key, 'unknown')} at {their_name}" for key in differing)


def server_hello(framed: FramedSocket) -> dict[str, Any]:
    """Read the client's hello (JSON) and check its versions; the caller answers ``{"ok": True, ...}``.

    Raises:
        VersionMismatchError: the versions differ (the client was told which).
    """
    theirs = framed.receive_json()
    problem = hello_problem(local_versions(), theirs.get("versions", {}), framed.peer)
    if problem:
        framed.send_json({"ok": False, "error": problem})
        raise VersionMismatchError(problem)
    return theirs


def open_connection(address: str, token: bytes, role: str, versions: dict[str, str] | None = None,
                    timeout: float = 10.0, **fields: Any) -> tuple[FramedSocket, dict[str, Any]]:
    """Connect to ``host:port``, authenticate, and exchange hellos (``role`` and ``fields`` say what
    the connection is for).

    Returns:
        The connection and the server's reply to the hello.

    Raises:
        ClusterError: the server cannot be reached, refused us, or runs other versions.
    """
    host, port = split_address(address)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise ClusterError(f"cannot reach the parl_lite cluster at {address}: {exc}") from exc
    framed = FramedSocket(sock, address)
    try:
        client_handshake(sock, token, address)
        framed.send_json({"versions": versions or local_versions(), "role": role, **fields})
        reply = framed.receive_json()
    except (OSError, EOFError) as exc:
        framed.close()
        raise ClusterError(f"the parl_lite cluster at {address} closed the connection during the "
                           f"handshake: {exc}") from exc
    except ClusterError:
        framed.close()
        raise
    if not reply.get("ok"):
        framed.close()
        error = reply.get("error", "refused")
        if error.startswith("version mismatch"):
            raise VersionMismatchError(f"the parl_lite cluster at {address} refused us: {error}")
        raise ClusterError(f"the parl_lite cluster at {address} refused us: {error}")
    return framed, reply


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` -> ``("host", port)``, with a clear error for anything else."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"a cluster address is host:port (e.g. 127.0.0.1:8010), got {address!r}")
    return host, int(port)
