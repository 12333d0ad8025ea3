"""Kafka's listener settings: ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``.

A listener is ``NAME://HOST:PORT``; its name maps to a security protocol (the names
PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL map to themselves unless the map says
otherwise). Port 0 picks a free port.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from onceflow.security.protocols import SecurityProtocol

DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
ANY_ADDRESS = ("0.0.0.0", "::", "")


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    protocol: SecurityProtocol
    advertised_host: str = ""
    advertised_port: int = 0

    def __str__(self) -> str:
        return f"{self.name}://{_host_text(self.host)}:{self.port}"

    @property
    def advertised(self) -> str:
        return f"{self.name}://{_host_text(self.advertised_host)}:{self.advertised_port}"

    def bound(self, port: int) -> Listener:
        """This listener once its socket is bound to ``port`` (which port 0 became)."""
        advertised_port = self.advertised_port or port
        advertised_host = self.advertised_host or self.host
        if advertised_host in ANY_ADDRESS:
            advertised_host = "127.0.0.1"
        return dataclasses.replace(
            self, port=port, advertised_host=advertised_host, advertised_port=advertised_port
        )


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    protocols = {}
    for entry in _items(text):
        name, separator, protocol = entry.partition(":")
        if not separator or not name.strip():
            raise ValueError(
                f"listener.security.protocol.map: expected NAME:PROTOCOL, got {entry!r}"
            )
        protocols[name.strip().upper()] = SecurityProtocol.parse(protocol)
    return protocols


def parse_endpoints(text: str, setting: str) -> list[tuple[str, str, int]]:
    """(NAME, host, port) of each ``NAME://HOST:PORT`` in a comma-separated list."""
    endpoints = []
    for entry in _items(text):
        name, separator, address = entry.partition("://")
        host, colon, port_text = address.rpartition(":")
        if not separator or not colon or not name:
            raise ValueError(f"{setting}: expected NAME://HOST:PORT, got {entry!r}")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"{setting}: bad port in {entry!r}") from None
        if not 0 <= port <= 65535:
            raise ValueError(f"{setting}: port {port} is outside 0..65535 in {entry!r}")
        endpoints.append((name.upper(), host, port))
    names = [name for name, _, _ in endpoints]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{setting}: listener name {duplicates[0]} appears twice")
    return endpoints


def parse_listeners(
    listeners: str, advertised: str = "", protocol_map: str = DEFAULT_PROTOCOL_MAP
) -> list[Listener]:
    protocols = parse_protocol_map(protocol_map)
    result = []
    for name, host, port in parse_endpoints(listeners, "listeners"):
        if name not in protocols:
            raise ValueError(
                f"listeners: listener name {name} has no security protocol; "
                f"add {name}:PROTOCOL to listener.security.protocol.map"
            )
        result.append(Listener(name, host, port, protocols[name]))
    if not result:
        raise ValueError("listeners: no listener given")
    by_name = {listener.name: listener for listener in result}
    for name, host, port in parse_endpoints(advertised, "advertised.listeners"):
        if name not in by_name:
            raise ValueError(f"advertised.listeners: {name} is not one of the listeners")
        by_name[name] = dataclasses.replace(
            by_name[name], advertised_host=host, advertised_port=port
        )
    return [by_name[listener.name] for listener in result]


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
