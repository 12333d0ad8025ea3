"""The broker's ``/metrics`` (Prometheus' text format) on ``metrics.host:metrics.port``.

prometheus_client's HTTP server answers on a thread of its own; each scrape reads the
broker's state on the broker's event loop (``metrics_families``), so it sees the logs and
coordinators between two requests, never in the middle of one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server

from onceflow.broker.metrics_families import families

if TYPE_CHECKING:
    from onceflow.broker.core import BrokerCore

log = logging.getLogger(__name__)
SCRAPE_TIMEOUT_S = 10.0


class _OnTheLoop:
    """A collector that builds the families on the broker's event loop."""

    def __init__(self, broker: BrokerCore, loop: asyncio.AbstractEventLoop) -> None:
        self.broker = broker
        self.loop = loop

    def collect(self) -> Iterator[Any]:
        async def read() -> list[Any]:
            return families(self.broker)

        yield from asyncio.run_coroutine_threadsafe(read(), self.loop).result(SCRAPE_TIMEOUT_S)


class MetricsServer:
    def __init__(self, broker: BrokerCore, host: str, port: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self._server: Any = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve; raises OSError when the port is taken."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_OnTheLoop(self.broker, loop))
        try:
            self._server, _ = start_http_server(self.port, addr=self.host, registry=registry)
        except OSError as error:
            raise OSError(error.errno, f"metrics.port {self.port} on {self.host}: "
                          f"{error.strerror}") from None  # fmt: skip
        self.port = self._server.server_port
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
