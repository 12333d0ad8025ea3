"""The broker: a data directory, its coordinators and an asyncio Kafka-protocol server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import uuid
from pathlib import Path

import onceflow.broker.handlers  # noqa: F401  (registers every API handler)
from onceflow.broker import dynamic_configs
from onceflow.broker.connection import Connection
from onceflow.broker.framing import FrameProtocol
from onceflow.broker.listeners import Listener
from onceflow.broker.security import settings
from onceflow.broker.security.authorizer import Authorizer
from onceflow.broker.security.credential_store import ScramCredentialStore
from onceflow.broker.security.sasl_server import SaslServer
from onceflow.broker.security.session import Session
from onceflow.broker.security.settings import ScramUser
from onceflow.config import BrokerConfig
from onceflow.coordinator.group import GroupCoordinator
from onceflow.coordinator.producer_ids import ProducerIdManager
from onceflow.coordinator.transaction import TransactionCoordinator
from onceflow.log.durability import write_atomically
from onceflow.log.manager import LogManager

log = logging.getLogger(__name__)


class Broker:
    def __init__(
        self,
        data_dir: Path,
        host: str = "127.0.0.1",
        port: int = 9092,
        config: BrokerConfig | None = None,
        advertised_host: str | None = None,
        scram_users: list[ScramUser] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.config = config or BrokerConfig.from_strings({})
        # SecuritySettingError (a ValueError) for listeners that cannot work.
        self.listeners = settings.configured_listeners(self.config, host, port, advertised_host)
        # The first listener's address, for whatever has no connection to ask (logs).
        self.host = self.listeners[0].host
        self.port = self.listeners[0].port
        self.advertised_host = advertised_host or self.host
        self.scram_users = list(scram_users or ())
        self.tls: ssl.SSLContext | None = None
        self.scram_credentials: ScramCredentialStore | None = None
        self.sasl: SaslServer | None = None
        self.authorizer: Authorizer | None = None
        self.node_id = self.config["broker.id"]
        self.logs = LogManager(self.data_dir, self.config)
        self.producer_ids: ProducerIdManager | None = None
        self.cluster_id = ""
        # Coordinators are started in this order after the logs load (the group
        # coordinator first: transaction recovery completes pending offset commits).
        self.coordinators: list = []
        self.groups: GroupCoordinator | None = GroupCoordinator(self)
        self.coordinators.append(self.groups)
        self._servers: list[asyncio.Server] = []
        self._bound: dict[str, Listener] = {}
        self._connections: set[asyncio.Task[None]] = set()
        # Last, so that it starts after the group coordinator.
        self.transactions = TransactionCoordinator(self)
        self.coordinators.append(self.transactions)

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._start_security()  # bad settings fail here, before any log is opened
        self.cluster_id = self._load_cluster_id()
        dynamic_configs.load(self.data_dir, self.config)
        self.logs.load()
        self.producer_ids = ProducerIdManager(self.data_dir)
        self.logs.start()
        for coordinator in self.coordinators:
            await coordinator.start()
        bound = []
        for listener in self.listeners:
            bound.append(await self._listen(listener))
        self.listeners = bound
        self.port = bound[0].port
        self.advertised_host = bound[0].advertised_host
        log.info(
            "broker %d serving %s from %s",
            self.node_id,
            ", ".join(str(listener) for listener in bound),
            self.data_dir,
        )

    def _start_security(self) -> None:
        if settings.needs(self.listeners, "uses_tls"):
            self.tls = settings.server_tls_context(self.config)
        self.authorizer = settings.authorizer(self.config, self.data_dir)
        self.scram_credentials = ScramCredentialStore(self.data_dir)
        self.sasl = settings.sasl_server(self.config, self.scram_credentials)
        settings.add_scram_users(self.scram_credentials, self.scram_users)

    async def _listen(self, listener: Listener) -> Listener:
        """Start serving ``listener``; the listener with its bound port."""
        # Before authentication a SASL listener takes frames up to sasl.server.max.receive.size.
        max_frame_bytes = self.config["socket.request.max.bytes"]
        if listener.protocol.uses_sasl:
            max_frame_bytes = min(max_frame_bytes, self.config["sasl.server.max.receive.size"])
        server = await asyncio.get_running_loop().create_server(
            lambda: FrameProtocol(max_frame_bytes, lambda frames: self._accept(listener, frames)),
            listener.host,
            listener.port,
            reuse_address=True,
        )
        self._servers.append(server)
        listener = listener.bound(server.sockets[0].getsockname()[1])
        # Connections accepted from now on see the bound listener (its advertised port).
        self._bound[listener.name] = listener
        return listener

    def _load_cluster_id(self) -> str:
        path = self.data_dir / "meta.json"
        if path.exists():
            return json.loads(path.read_text())["cluster_id"]
        cluster_id = uuid.uuid4().hex[:22]
        write_atomically(
            path, json.dumps({"cluster_id": cluster_id, "node_id": self.node_id}).encode()
        )
        return cluster_id

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
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for coordinator in reversed(self.coordinators):
            await coordinator.stop()
        await self.logs.stop()
        self.logs.close()
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
