"""Kafka's connection limits: ``max.connections`` (the broker), ``listener.name.<listener>
.max.connections`` (one listener) and ``max.connections.per.ip`` with its overrides.

As in Kafka, a listener at its limit or a broker at ``max.connections`` stops accepting
until a connection closes (new ones wait in the listen backlog), while a connection from
an address already at its per-address limit is accepted and closed at once.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import socket
from collections.abc import Iterable

from onceflow.broker.memory_trim import TrimAfterCloses
from onceflow.config import LISTENER_MAX_CONNECTIONS, BrokerConfig, parse_per_ip_overrides


class ConnectionQuotas:
    def __init__(
        self,
        max_connections: int,
        per_ip: int,
        per_ip_overrides: dict[str, int],
        per_listener: dict[str, int],
    ) -> None:
        self.max_connections = max_connections
        self.per_ip = per_ip
        self.per_ip_overrides = per_ip_overrides  # by IP address
        self.per_listener = per_listener  # by listener name, upper case
        self.total = 0
        self._by_ip: collections.Counter[str] = collections.Counter()
        self._by_listener: collections.Counter[str] = collections.Counter()
        self._waiters: list[asyncio.Future[None]] = []  # acceptors waiting for a slot
        self._trim = TrimAfterCloses()

    @classmethod
    def from_config(cls, config: BrokerConfig, listeners: Iterable[str]) -> ConnectionQuotas:
        """Raises ValueError for an override host that does not resolve."""
        overrides: dict[str, int] = {}
        text = config["max.connections.per.ip.overrides"]
        for host, limit in parse_per_ip_overrides(text).items():
            for address in _addresses(host):
                overrides[address] = limit
        per_listener = {}
        for name, value in config.values.items():
            match = LISTENER_MAX_CONNECTIONS.fullmatch(name)
            if match and match.group(1).upper() in set(listeners):
                per_listener[match.group(1).upper()] = value
        return cls(
            config["max.connections"], config["max.connections.per.ip"], overrides, per_listener
        )

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(_canonical(ip), self.per_ip)

    def slot_available(self, listener: str) -> bool:
        if self._by_listener[listener] >= self.per_listener.get(listener, self.max_connections):
            return False
        return self.total < self.max_connections

    async def wait_for_slot(self, listener: str) -> None:
        """Until the listener and the broker are below their limits."""
        while not self.slot_available(listener):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def admit(self, listener: str, ip: str) -> bool:
        """Count a new connection; False (nothing counted) if its address is at its limit."""
        ip = _canonical(ip)
        if self._by_ip[ip] >= self.limit_for(ip):
            return False
        self._by_ip[ip] += 1
        self._by_listener[listener] += 1
        self.total += 1
        return True

    def by_listener(self) -> dict[str, int]:
        """Open connections per listener."""
        return dict(self._by_listener)

    def release(self, listener: str, ip: str) -> None:
        ip = _canonical(ip)
        self._by_ip[ip] -= 1
        if self._by_ip[ip] <= 0:
            del self._by_ip[ip]
        self._by_listener[listener] -= 1
        self.total -= 1
        self._trim.closed()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _canonical(ip: str) -> str:
    """One spelling per address (an IPv4-mapped IPv6 address as IPv4)."""
    try:
        address = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _addresses(host: str) -> set[str]:
    try:
        return {_canonical(str(ipaddress.ip_address(host)))}
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as error:
        raise ValueError(
            f"max.connections.per.ip.overrides: cannot resolve host {host!r}: {error}"
        ) from None
    return {_canonical(str(info[4][0])) for info in infos}
