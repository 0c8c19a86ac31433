"""Which connection still authenticating a server drops when strangers hold too many.

A server holds a bounded number of connections that have not yet proved they hold the token
(:class:`~parl_lite.ext.cluster.limits.Limits`). When a new one comes and the table is full, one
must go; dropping the oldest lets a flood of fresh connections shed a token holder whose answer
takes one slow round trip. So the one dropped is the oldest of the *heaviest source*, compared by:

1. the connections its network holds: a machine's loopback addresses count as one network (a local
   user may use any of 127.0.0.0/8), other IPv4 addresses by /24, IPv6 by /64;
2. the connections its address holds;
3. the connections its address opened lately and did not authenticate: a count that halves every
   ``half_life`` seconds, kept for the last :data:`REMEMBERED` addresses seen (the least recently
   seen forgotten first); an authentication takes one back;
4. age (the oldest first).

A flood from many addresses of one network cannot then shed a peer on another network, and one from
many addresses of the peer's own network sheds its own connections first: each of its addresses
opens many, the peer's few.
"""
import collections
import functools
import ipaddress
import math
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

__all__ = ["Unauthenticated", "network_of", "REMEMBERED"]

REMEMBERED = 4096  # addresses whose recent connections are counted


class _Held(Protocol):
    peer: str  # the address it came from
    network: str  # network_of(peer)


_H = TypeVar("_H", bound=_Held)


@functools.lru_cache(maxsize=REMEMBERED)
def network_of(address: str) -> str:
    """The network ``address`` counts in (see the module docstring); the address itself if it is
    not an IP address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "loopback"
    prefix = 24 if ip.version == 4 else 64
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


class _Openings:
    """Connections each address opened and did not authenticate, halving every ``half_life`` seconds.

    Each is kept as a *score*, ``log2(count) + when / half_life``: all decay at the same pace, so
    scores compare as the counts do at any moment, and choosing among addresses decays none."""

    def __init__(self, half_life: float) -> None:
        self.half_life = half_life
        self.scores: collections.OrderedDict[str, float] = collections.OrderedDict()  # least recently seen first

    def count(self, address: str, now: float) -> float:
        score = self.scores.get(address)
        return 0.0 if score is None else 2.0 ** (score - now / self.half_life)

    def add(self, address: str, change: float, now: float) -> None:
        count = max(0.0, self.count(address, now) + change)
        self.scores[address] = math.log2(count) + now / self.half_life if count else -math.inf
        self.scores.move_to_end(address)
        while len(self.scores) > REMEMBERED:
            self.scores.popitem(last=False)


class Unauthenticated(Generic[_H]):
    """The connections a server holds while they authenticate, oldest first, and which to drop.

    Args:
        half_life: seconds in which an address's count of connections opened halves.
    """

    def __init__(self, half_life: float) -> None:
        self._held: dict[object, _H] = {}  # key -> connection, in the order added
        self._per_address: collections.Counter[str] = collections.Counter()
        self._per_network: collections.Counter[str] = collections.Counter()
        self._openings = _Openings(half_life)

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[_H]:
        """The connections, oldest first."""
        return iter(list(self._held.values()))

    def oldest(self) -> _H | None:
        return next(iter(self._held.values()), None)

    def held_by(self, address: str) -> int:
        """Connections from ``address`` held now."""
        return self._per_address[address]

    def oldest_of(self, address: str) -> _H | None:
        return next((held for held in self._held.values() if held.peer == address), None)

    def add(self, key: object, held: _H, now: float) -> None:
        """Hold ``held`` (just opened) under ``key``."""
        self._held[key] = held
        self._per_address[held.peer] += 1
        self._per_network[held.network] += 1
        self._openings.add(held.peer, 1.0, now)

    def remove(self, key: object) -> _H:
        """Stop holding the connection under ``key`` (it authenticated, failed or was dropped)."""
        held = self._held.pop(key)
        for counter, name in ((self._per_address, held.peer), (self._per_network, held.network)):
            counter[name] -= 1
            if not counter[name]:
                del counter[name]
        return held

    def authenticated(self, address: str, now: float) -> None:
        """A connection from ``address`` proved it holds the token: it no longer counts against it."""
        self._openings.add(address, -1.0, now)

    def victim(self, sparing: object = None) -> _H | None:
        """The connection to drop to make room: the oldest of the heaviest source (see the module
        docstring), never the one under ``sparing`` (the newcomer); None if none is held."""
        most = max(self._per_network.values(), default=0)  # only a network holding this many is heaviest
        per_network, per_address, scores = self._per_network, self._per_address, self._openings.scores
        chosen, held_most, score_most = None, 0, -math.inf
        for key, held in self._held.items():  # oldest first: of equals, the first stays chosen
            if per_network[held.network] != most or key is sparing:
                continue
            count = per_address[held.peer]
            if count < held_most:
                continue
            score = scores.get(held.peer, -math.inf)
            if count > held_most or score > score_most or chosen is None:
                chosen, held_most, score_most = held, count, score
        return chosen
