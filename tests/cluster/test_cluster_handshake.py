"""The handshake every cluster connection starts with: what each proof binds, a stranger relaying a
rejoining node to the node's own server or a client to another node than it means, answers replayed
or reflected, a wrong service on the port, and a hello trickled past the deadline. Masters and nodes
started through ``parl-lite``, attackers as real sockets on 127.0.0.1 (the stranger runs as uid
65534 when the tests run as root)."""
import os
import signal
import socket
import struct
import threading
import time

import pytest

import parl_lite
from parl_lite.ext.cluster import wire
from parl_lite.ext.cluster.limits import Limits
from parl_lite.ext.cluster.server import Role, Server

from backends import ACTORS_MODULE, Cluster
from remote_actors import Counter
from remote_helpers import wait_for_exit
import cluster_attackers as attack

pytestmark = pytest.mark.timeout(180)

TOKEN = b"t" * 32
RemoteCounter = parl_lite.remote_class(Counter)


def _token(cluster: Cluster) -> bytes:
    return open(cluster.token_file, "rb").read().strip()


def _nodes(cluster: Cluster) -> list[dict]:
    return [entry for entry in cluster.processes() if entry["role"] == "node"]


def _node_ids(cluster: Cluster) -> dict[str, str]:
    """Node address -> the id the master gave it."""
    return {node["address"]: node["id"] for node in cluster.status()["nodes"]}


# --- the proofs ------------------------------------------------------------------------------------
def test_each_proof_binds_its_direction_the_server_both_nonces_and_the_token():
    server_nonce, client_nonce = os.urandom(32), os.urandom(32)
    proof = wire.client_proof(TOKEN, "master", server_nonce, client_nonce)
    assert proof == wire.client_proof(TOKEN, "master", server_nonce, client_nonce)
    others = [wire.server_proof(TOKEN, "master", server_nonce, client_nonce),  # the other direction
              wire.client_proof(TOKEN, wire.node_identity("0123abcd"), server_nonce, client_nonce),
              wire.client_proof(TOKEN, "master", os.urandom(32), client_nonce),
              wire.client_proof(TOKEN, "master", server_nonce, os.urandom(32)),
              wire.client_proof(TOKEN, "master", client_nonce, server_nonce),  # the nonces swapped
              wire.client_proof(b"u" * 32, "master", server_nonce, client_nonce)]
    assert len({proof, *others}) == 1 + len(others)


def test_a_server_accepts_only_an_answer_made_for_it_on_this_connection():
    server_nonce, client_nonce = os.urandom(32), os.urandom(32)
    me = wire.node_identity("0123abcd")
    reply = wire.check_answer(TOKEN, me, server_nonce, client_nonce + wire.client_proof(TOKEN, me, server_nonce,
                                                                                           client_nonce))
    assert reply == b"OK" + wire.server_proof(TOKEN, me, server_nonce, client_nonce)
    refused = [
        client_nonce + wire.client_proof(TOKEN, wire.MASTER, server_nonce, client_nonce),  # made for the master
        client_nonce + wire.client_proof(TOKEN, wire.node_identity("0123abce"), server_nonce, client_nonce),
        client_nonce + wire.server_proof(TOKEN, me, server_nonce, client_nonce),  # our own proof reflected
        client_nonce + wire.client_proof(TOKEN, me, os.urandom(32), client_nonce),  # for another connection
        os.urandom(32) + wire.client_proof(TOKEN, me, server_nonce, client_nonce),  # its nonce swapped
        client_nonce + wire.client_proof(TOKEN, me, server_nonce, client_nonce)[:16],  # cut short
    ]
    assert [wire.check_answer(TOKEN, me, server_nonce, answer) for answer in refused] == [None] * len(refused)


def test_a_recorded_answer_or_proof_is_refused_on_another_connection(tmp_path):
    parl_lite.shutdown()
    cluster = Cluster(tmp_path)
    try:
        address = cluster.start(0, "--no-monitor")
        token = _token(cluster)

        def opened() -> tuple[socket.socket, bytes]:
            sock = socket.create_connection(wire.split_address(address), timeout=10)
            identity, nonce = wire.read_opening(sock, address, time.monotonic() + 10)
            assert identity == wire.MASTER
            return sock, nonce

        first, nonce = opened()
        mine = os.urandom(32)
        answer = mine + wire.client_proof(token, wire.MASTER, nonce, mine)
        first.sendall(answer)
        verdict = wire.receive_exactly(first, 34, time.monotonic() + 10)
        assert verdict[:2] == b"OK"
        first.close()
        for sent in (answer, mine + verdict[2:]):  # the answer replayed; the server's proof reflected to it
            sock, _ = opened()
            sock.sendall(sent)
            assert wire.receive_exactly(sock, 2, time.monotonic() + 10) == wire.REFUSED
            sock.close()
    finally:
        cluster.stop()


# --- relays ----------------------------------------------------------------------------------------
def test_a_stranger_on_the_masters_port_cannot_relay_a_rejoining_node_to_its_own_server(tmp_path):
    """The attack as filed: the master goes away, a stranger binds its port, and each time the node
    comes to rejoin hands it the opening of the node's own server (as it is, or stating itself the
    master), to relay the node's proof there, open a session and an actor connection on the node,
    and send it a pickle that runs ``touch`` (before the fix: the file appeared)."""
    parl_lite.shutdown()
    cluster = Cluster(tmp_path)
    relay = None
    try:
        cluster.start(1, "--no-monitor")
        parl_lite.connect(cluster.address, token_file=cluster.token_file, distributed_files=[ACTORS_MODULE])
        actor = RemoteCounter(0)
        master = next(entry for entry in cluster.processes() if entry["role"] == "master")
        os.kill(master["pid"], signal.SIGKILL)
        assert wait_for_exit(master["pid"], timeout=10)
        marker = tmp_path / "payload-ran"
        relay = attack.start_relay(cluster.address, _nodes(cluster)[0]["address"], str(marker),
                                   uid=attack.OTHER_UID if os.geteuid() == 0 else None)
        outcomes = relay.wait_for(6, timeout=60)  # the node comes back every 0.1 s, doubling to 2 s
        assert len(outcomes) >= 6, outcomes
        assert {outcome["outcome"] for outcome in outcomes if not outcome["rewritten"]} == \
            {"the victim refused the opening"}  # the node saw its own server's identity, not the master's
        assert {outcome["outcome"] for outcome in outcomes if outcome["rewritten"]} == \
            {"the target refused the victim's answer"}  # its proof was for the master, not for itself
        assert not marker.exists()
        assert actor.add(1) == 1  # the node still serves its actor
    finally:
        if relay is not None:
            relay.stop()
        parl_lite.shutdown()
        cluster.stop()


def _relay_once(listener: socket.socket, target: str, rewrite_as: str | None) -> None:
    """Relay one connection to ``target`` (its opening rewritten as ``rewrite_as`` if given), then
    forward both ways until either end closes."""
    victim, _ = listener.accept()
    server, _ = attack.relay_handshake(victim, target, rewrite_as)
    if server is None:
        victim.close()
        return
    victim.settimeout(None)
    server.settimeout(None)

    def pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    back = threading.Thread(target=pump, args=(server, victim), daemon=True)
    back.start()
    pump(victim, server)
    back.join(timeout=10)
    victim.close()
    server.close()


@pytest.mark.parametrize("rewritten", [False, True], ids=["opening as it is", "opening rewritten"])
def test_a_client_relayed_to_another_node_than_the_one_it_means_is_refused(tmp_path, rewritten):
    parl_lite.shutdown()
    cluster = Cluster(tmp_path)
    try:
        cluster.start(1, "--no-monitor")
        cluster.add_node("node-b", 1)
        ids = _node_ids(cluster)
        meant, other = (node["address"] for node in _nodes(cluster))
        listener = socket.create_server(("127.0.0.1", 0))
        relay_address = f"127.0.0.1:{listener.getsockname()[1]}"
        rewrite_as = wire.node_identity(ids[meant]) if rewritten else None
        relaying = threading.Thread(target=_relay_once, args=(listener, other, rewrite_as), daemon=True)
        relaying.start()
        expected = "refused our token" if rewritten else f"is 'node {ids[other]}', not the 'node {ids[meant]}'"
        with pytest.raises(wire.ClusterError, match=expected):
            wire.open_connection(relay_address, _token(cluster), "session", identity=wire.node_identity(ids[meant]),
                                 client_id="0123456789ab", files=[])
        relaying.join(timeout=10)
        listener.close()
        # the way a client names the node it means: through the master's placement
        parl_lite.connect(cluster.address, token_file=cluster.token_file, distributed_files=[ACTORS_MODULE])
        assert [RemoteCounter(index).add(1) for index in range(2)] == [1, 2]
    finally:
        parl_lite.shutdown()
        cluster.stop()


def test_a_node_server_accepts_nothing_until_it_is_named():
    server = Server("127.0.0.1", 0, TOKEN, {"x": Role(lambda framed, hello: framed.close())}, Limits())
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as early:
            early.settimeout(0.5)
            with pytest.raises(TimeoutError):
                early.recv(1)  # waiting in the listen queue: no opening names no node
            server.serve_as(wire.node_identity("0123abcd"))
            assert wire.read_opening(early, "the node", time.monotonic() + 10)[0] == "node 0123abcd"
    finally:
        server.close()


# --- a wrong service on the port -------------------------------------------------------------------
class _Service:
    """A listener on 127.0.0.1 that answers each connection as ``answer`` says, counting them."""

    def __init__(self, answer) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self._held.append(sock)
            self._answer(sock)

    def close(self) -> None:
        self.listener.close()
        for sock in self._held:
            sock.close()


@pytest.mark.parametrize("answer, error, expected", [
    (lambda sock: sock.sendall(b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n"), wire.ClusterError,
     r"is not a parl_lite cluster server: it sent b'SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\\r\\n'"),
    (lambda sock: None, wire.ClusterError, r"accepted our connection but said nothing in \d"),  # as HTTP waits
    (lambda sock: sock.close(), wire.ClusterError, "closed our connection before it said anything"),
    (lambda sock: sock.sendall(b"PLC1" + b"\0" * 32), wire.VersionMismatchError,
     "speaks parl_lite cluster protocol PLC1, this parl_lite speaks PLC2"),
], ids=["an ssh server", "a silent server", "a server that closes", "an older parl_lite"])
def test_a_wrong_service_on_the_port_gets_one_clear_error_naming_it(answer, error, expected):
    service = _Service(answer)
    try:
        with pytest.raises(error, match=expected) as raised:
            wire.open_connection(service.address, TOKEN, "client", timeout=2)
        assert service.address in str(raised.value)
        assert service.accepted == 1  # not tried again (43 times before) as a cluster shedding strangers
    finally:
        service.close()


# --- a hello trickled past the deadline --------------------------------------------------------------
def _closed_within(sock: socket.socket, seconds: float, trickle: float) -> float:
    """Seconds until the peer closes ``sock`` while we send it one byte every ``trickle`` seconds
    (inf if not within ``seconds``)."""
    start = time.monotonic()
    sock.setblocking(False)
    while time.monotonic() - start < seconds:
        try:
            if sock.recv(4096) == b"":
                return time.monotonic() - start
        except BlockingIOError:
            pass
        except OSError:
            return time.monotonic() - start
        try:
            sock.send(b"x")
        except OSError:
            return time.monotonic() - start
        time.sleep(trickle)
    return float("inf")


def test_a_hello_trickled_byte_by_byte_is_dropped_at_the_handshake_deadline(tmp_path):
    parl_lite.shutdown()
    cluster = Cluster(tmp_path)
    try:
        cluster.start(1, "--no-monitor")
        token = _token(cluster)
        ids = _node_ids(cluster)
        node = _nodes(cluster)[0]["address"]
        for address, identity in ((cluster.address, wire.MASTER), (node, wire.node_identity(ids[node]))):
            sock = socket.create_connection(wire.split_address(address), timeout=10)
            connected = time.monotonic()
            said, nonce = wire.read_opening(sock, address, connected + 10)
            mine = os.urandom(32)
            sock.sendall(mine + wire.client_proof(token, said, nonce, mine))
            assert said == identity and wire.receive_exactly(sock, 34, connected + 10)[:2] == b"OK"
            sock.sendall(struct.pack("!IH", 1000, 0))  # a hello of 1000 bytes, sent one byte every 0.5 s
            _closed_within(sock, 20, trickle=0.5)
            held = time.monotonic() - connected
            sock.close()
            # each read waited up to the time left before: the hello was held 20 s and more
            assert held < 8.0  # the 5 s deadline, with room for load
    finally:
        cluster.stop()


def test_a_client_gives_up_on_a_servers_reply_trickled_past_its_timeout():
    """A server that holds the token but sends its reply to our hello one byte every 0.5 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    stop = threading.Event()

    def trickling_server() -> None:
        sock, _ = listener.accept()
        opening, nonce = wire.challenge(wire.MASTER)
        sock.sendall(opening)
        sock.sendall(wire.check_answer(TOKEN, wire.MASTER, nonce, wire.receive_exactly(
            sock, wire.ANSWER_BYTES, time.monotonic() + 10)) or b"")
        sock.sendall(struct.pack("!IH", 1000, 0))
        for _ in range(40):  # for 20 s at most
            if stop.wait(0.5):
                break
            try:
                sock.send(b" ")
            except OSError:
                break
        sock.close()

    thread = threading.Thread(target=trickling_server, daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        with pytest.raises(wire.ClusterError, match="did not finish the handshake in time"):
            wire.open_connection(address, TOKEN, "client", timeout=2)
        assert time.monotonic() - started < 4  # its 2 s, with room for load (20 s and more before)
    finally:
        stop.set()
        thread.join(timeout=10)
        listener.close()
