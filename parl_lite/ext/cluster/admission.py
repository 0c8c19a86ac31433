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
import ipaddress
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

__all__ = ["Unauthenticated", "network_of", "REMEMBERED"]

REMEMBERED = 4096  # addresses whose recent connections are counted


class _Held(Protocol):
    peer: str  # the address it came from
    network: str  # network_of(peer)


_H = TypeVar("_H", bound=_Held)


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
    """Connections each address opened and did not authenticate, halving every ``half_life`` seconds."""

    def __init__(self, half_life: float) -> None:
        self.half_life = half_life
        self._counts: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()

    def count(self, address: str, now: float) -> float:
        value, when = self._counts.get(address, (0.0, now))
        return value * 0.5 ** ((now - when) / self.half_life)

    def add(self, address: str, change: float, now: float) -> None:
        self._counts[address] = (max(0.0, self.count(address, now) + change), now)
        self._counts.move_to_end(address)
        while len(self._counts) > REMEMBERED:
            self._counts.popitem(last=False)


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

    def victim(self, now: float, sparing: object = None) -> _H | None:
        """The connection to drop to make room: the oldest of the heaviest source (see the module
        docstring), never the one under ``sparing`` (the newcomer); None if none is held."""
        counts: dict[str, float] = {}
        chosen, heaviest = None, (-1, -1, -1.0)
        for key, held in self._held.items():
            if key is sparing:
                continue
            if held.peer not in counts:
                counts[held.peer] = self._openings.count(held.peer, now)
            weight = (self._per_network[held.network], self._per_address[held.peer], counts[held.peer])
            if weight > heaviest:  # strictly: the oldest of equals stays chosen
                chosen, heaviest = held, weight
        return chosen
