"""The broker: the asyncio Kafka-protocol server around :class:`BrokerCore`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import onceflow.broker.handlers  # noqa: F401  (registers every API handler)
from onceflow.broker.acceptor import Acceptor
from onceflow.broker.connection import Connection
from onceflow.broker.connection_quotas import ConnectionQuotas
from onceflow.broker.core import BrokerCore
from onceflow.broker.framing import FrameProtocol
from onceflow.broker.listeners import Listener
from onceflow.broker.metrics_server import MetricsServer
from onceflow.broker.security.session import Session
from onceflow.broker.security.settings import SecuritySettingError

log = logging.getLogger(__name__)


class Broker(BrokerCore):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Takes :class:`BrokerCore`'s arguments."""
        super().__init__(*args, **kwargs)
        self._acceptors: list[Acceptor] = []
        self.quotas: ConnectionQuotas  # made by start(), from the connection settings
        self._bound: dict[str, Listener] = {}
        self._connections: set[asyncio.Task[None]] = set()
        self.metrics_server: MetricsServer | None = None  # with metrics.port set

    async def start(self) -> None:
        try:
            self.quotas = ConnectionQuotas.from_config(
                self.config, [listener.name for listener in self.listeners]
            )
        except ValueError as error:
            raise SecuritySettingError(str(error)) from None
        # The ports first: a port in use fails before the data directory is touched.
        bound = []
        try:
            for listener in self.listeners:
                bound.append(await self._listen(listener))
            if self.config["metrics.port"] >= 0:
                self.metrics_server = MetricsServer(
                    self, self.config["metrics.host"], self.config["metrics.port"]
                )
                self.metrics_server.start(asyncio.get_running_loop())
            await self.open()
        except BaseException:
            for acceptor in self._acceptors:
                acceptor.close()
            if self.metrics_server is not None:
                self.metrics_server.stop()
            raise
        for acceptor in self._acceptors:
            acceptor.serve()
        self.listeners = bound
        self.port = bound[0].port
        self.advertised_host = bound[0].advertised_host
        log.info(
            "broker %d serving %s from %s",
            self.node_id,
            ", ".join(str(listener) for listener in bound),
            self.data_dir,
        )

    async def _listen(self, listener: Listener) -> Listener:
        """Bind ``listener`` (serving starts later); the listener with its bound port."""
        # Before authentication a SASL listener takes frames up to sasl.server.max.receive.size.
        max_frame_bytes = self.config["socket.request.max.bytes"]
        if listener.protocol.uses_sasl:
            max_frame_bytes = min(max_frame_bytes, self.config["sasl.server.max.receive.size"])
        name = listener.name

        def protocol_for(ip: str) -> FrameProtocol:
            return FrameProtocol(
                max_frame_bytes,
                lambda frames: self._accept(listener, frames),
                lambda: self.quotas.release(name, ip),
            )

        acceptor = Acceptor(listener, self.quotas, protocol_for)
        port = await acceptor.bind()
        self._acceptors.append(acceptor)
        listener = listener.bound(port)
        # Connections accepted from now on see the bound listener (its advertised port).
        self._bound[listener.name] = listener
        return listener

    def _accept(self, listener: Listener, frames: FrameProtocol) -> None:
        listener = self._bound.get(listener.name, listener)
        session = Session(
            client_host=frames.peer.rsplit(":", 1)[0],
            listener_name=listener.name,
            advertised_host=listener.advertised_host,
            advertised_port=listener.advertised_port,
            authenticating=listener.protocol.uses_sasl,
        )
        tls = self.tls if listener.protocol.uses_tls else None
        if tls is not None:
            frames.pause_reading()  # the TLS handshake reads first (Connection.serve)
        connection = Connection(self, frames, session, tls)
        task = asyncio.get_running_loop().create_task(self._serve(connection))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, connection: Connection) -> None:
        try:
            await connection.serve()
        except asyncio.CancelledError:
            connection.frames.close()  # broker shutdown

    async def stop(self) -> None:
        if self.metrics_server is not None:
            await asyncio.to_thread(self.metrics_server.stop)
        for acceptor in self._acceptors:
            acceptor.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.close()
        log.info("broker stopped cleanly")

    def ready_line(self) -> str:
        """``ready HOST:PORT`` for the default listener (as always); with ``listeners``
        set, ``ready NAME://HOST:PORT,...`` listing every listener's advertised address."""
        if not self.config["listeners"]:
            return f"ready {self.advertised_host}:{self.port}"
        return "ready " + ",".join(listener.advertised for listener in self.listeners)

    async def serve_forever(self, stop: asyncio.Event) -> None:
        await self.start()
        print(self.ready_line(), flush=True)
        await stop.wait()
        await self.stop()
