"""Which unauthenticated connection a server drops when it holds too many: the choice itself, and
a flood from 248 loopback addresses against a master started through ``parl-lite`` while a token
holder whose answer takes 100 ms (a node on another machine) connects."""
from dataclasses import dataclass

import pytest

from parl_lite.ext.cluster.admission import REMEMBERED, Unauthenticated, network_of

from backends import Cluster
import cluster_attackers as attack

pytestmark = pytest.mark.timeout(180)


@dataclass
class _Connection:
    peer: str
    network: str = ""

    def __post_init__(self) -> None:
        self.network = network_of(self.peer)


def _table(*peers: str, now: float = 0.0) -> tuple[Unauthenticated, list[_Connection]]:
    table: Unauthenticated = Unauthenticated(half_life=5.0)
    held = [_Connection(peer) for peer in peers]
    for index, connection in enumerate(held):
        table.add(index, connection, now)
    return table, held


@pytest.mark.parametrize("address, network", [
    ("127.0.0.1", "loopback"), ("127.0.0.250", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.9", "loopback"),
    ("10.1.2.3", "10.1.2.0/24"), ("::ffff:10.1.2.3", "10.1.2.0/24"), ("2001:db8::1:2", "2001:db8::/64"),
    ("fe80::1%eth0", "fe80::/64"), ("a-unix-path", "a-unix-path"),
])
def test_addresses_count_by_their_machine_or_network(address, network):
    assert network_of(address) == network


def test_the_heaviest_network_loses_a_connection_first():
    # a peer on another machine among 63 connections from 63 loopback addresses
    table, held = _table("10.0.0.7", *(f"127.0.0.{n}" for n in range(3, 66)))
    assert table.victim() is held[1]  # the oldest of the loopback ones, not the older remote peer


def test_then_the_address_holding_the_most_then_the_one_that_opened_the_most():
    table, held = _table("127.0.0.2", "127.0.0.3", "127.0.0.3")
    assert table.victim() is held[1]  # 127.0.0.3 holds two
    table, held = _table("127.0.0.2", "127.0.0.3")
    for key in range(10, 20):  # 127.0.0.3 opened ten more, gone since
        table.add(key, _Connection("127.0.0.3"), 0.0)
        table.remove(key)
    assert table.victim() is held[1]
    table, held = _table("127.0.0.2", "127.0.0.3")
    assert table.victim() is held[0]  # all equal: the oldest


def test_an_address_that_authenticated_does_not_count_its_connections_against_it():
    table, held = _table("127.0.0.2", "127.0.0.3")
    for key in range(10, 13):  # 127.0.0.2 came three more times and proved itself each time
        table.add(key, _Connection("127.0.0.2"), 0.0)
        table.remove(key)
        table.authenticated("127.0.0.2", 0.0)
    table.add(13, _Connection("127.0.0.3"), 0.0)  # 127.0.0.3 once more, never authenticated
    table.remove(13)
    assert table.victim() is held[1]


def test_the_count_of_connections_opened_halves_every_half_life_and_is_kept_for_the_last_addresses():
    table, held = _table("127.0.0.2", now=0.0)
    for key in range(10, 14):
        table.add(key, _Connection("127.0.0.2"), 0.0)
        table.remove(key)
    table.add(20, _Connection("127.0.0.3"), 20.0)  # 20 s later (4 half-lives): 5/16 against 1
    assert table.victim() is table.oldest_of("127.0.0.3")
    table, held = _table("127.0.0.2", "127.0.0.3")
    for key in range(10, 14):
        table.add(key, _Connection("127.0.0.3"), 0.0)
        table.remove(key)
    assert table.victim() is held[1]
    for n in range(REMEMBERED):  # as many other addresses since: 127.0.0.3's count is forgotten
        table.add(100 + n, _Connection(f"10.{n // 256}.{n % 256}.1"), 0.0)
        table.remove(100 + n)
    assert table.victim() is held[0]  # equal again: the oldest


def test_the_newcomer_is_spared_and_an_empty_table_has_no_victim():
    table, held = _table("127.0.0.3", "127.0.0.2")
    assert table.victim(sparing=0) is held[1]
    assert Unauthenticated(half_life=5.0).victim() is None


def test_a_token_holder_100_ms_away_connects_within_3_s_during_a_flood_from_248_addresses(tmp_path):
    """Before: the flood's newer connections shed the holder's, the oldest, on every try."""
    cluster = Cluster(tmp_path)
    flood = None
    try:
        cluster.start(0, "--no-monitor")
        token = open(cluster.token_file, "rb").read().strip()
        flood = attack.start_flood(cluster.address, first=3, last=250, count=200)
        assert flood.wait_until_dropped(1000, timeout=30)["dropped"] >= 1000  # the cap is full and churning
        tries = [attack.slow_holder_connects(cluster.address, token, "127.0.0.2", delay=0.1, budget=3.0)
                 for _ in range(5)]
        assert all(seconds < 3.0 for seconds, _ in tries), tries
        seen = flood.stop()
        flood = None
        assert seen["dropped"] >= 2000, seen  # it went on meanwhile
    finally:
        if flood is not None:
            flood.stop()
        cluster.stop()
