"""The broker: a data directory, its coordinators and an asyncio Kafka-protocol server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from pathlib import Path

import onceflow.broker.handlers  # noqa: F401  (registers every API handler)
from onceflow.broker import dynamic_configs
from onceflow.broker.connection import Connection
from onceflow.broker.framing import FrameProtocol
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
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.advertised_host = advertised_host or host
        self.config = config or BrokerConfig.from_strings({})
        self.node_id = self.config["broker.id"]
        self.logs = LogManager(self.data_dir, self.config)
        self.producer_ids: ProducerIdManager | None = None
        self.cluster_id = ""
        # Coordinators are started in this order after the logs load (the group
        # coordinator first: transaction recovery completes pending offset commits).
        self.coordinators: list = []
        self.groups: GroupCoordinator | None = GroupCoordinator(self)
        self.coordinators.append(self.groups)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        # Last, so that it starts after the group coordinator.
        self.transactions = TransactionCoordinator(self)
        self.coordinators.append(self.transactions)

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_cluster_id()
        dynamic_configs.load(self.data_dir, self.config)
        self.logs.load()
        self.producer_ids = ProducerIdManager(self.data_dir)
        self.logs.start()
        for coordinator in self.coordinators:
            await coordinator.start()
        max_frame_bytes = self.config["socket.request.max.bytes"]
        self._server = await asyncio.get_running_loop().create_server(
            lambda: FrameProtocol(max_frame_bytes, self._accept),
            self.host,
            self.port,
            reuse_address=True,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        if self.advertised_host in ("0.0.0.0", "::", ""):
            self.advertised_host = "127.0.0.1"
        log.info(
            "broker %d serving %s:%d from %s", self.node_id, self.host, self.port, self.data_dir
        )

    def _load_cluster_id(self) -> str:
        path = self.data_dir / "meta.json"
        if path.exists():
            return json.loads(path.read_text())["cluster_id"]
        cluster_id = uuid.uuid4().hex[:22]
        write_atomically(
            path, json.dumps({"cluster_id": cluster_id, "node_id": self.node_id}).encode()
        )
        return cluster_id

    def _accept(self, frames: FrameProtocol) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(Connection(self, frames)))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, connection: Connection) -> None:
        try:
            await connection.serve()
        except asyncio.CancelledError:
            connection.frames.close()  # broker shutdown

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
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

    async def serve_forever(self, stop: asyncio.Event) -> None:
        await self.start()
        print(f"ready {self.advertised_host}:{self.port}", flush=True)
        await stop.wait()
        await self.stop()
