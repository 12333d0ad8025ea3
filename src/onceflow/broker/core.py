"""What every request handler works with: the broker's data directory, configuration,
logs, coordinators and security stores. The asyncio server (:mod:`broker.broker`)
builds on it; nothing here knows about sockets."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import uuid
from pathlib import Path

from onceflow.broker import dynamic_configs
from onceflow.broker.metrics import BrokerMetrics
from onceflow.broker.security import settings
from onceflow.broker.security.authorizer import Authorizer
from onceflow.broker.security.credential_store import ScramCredentialStore
from onceflow.broker.security.sasl_server import SaslServer
from onceflow.broker.security.settings import ScramUser
from onceflow.broker.traps import RequestTraps
from onceflow.config import BrokerConfig
from onceflow.coordinator.group import GroupCoordinator
from onceflow.coordinator.producer_ids import ProducerIdManager
from onceflow.coordinator.transaction import TransactionCoordinator
from onceflow.log.dir_lock import DataDirLock
from onceflow.log.durability import write_atomically
from onceflow.log.manager import LogManager


class BrokerCore:
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
        self.cluster_id = ""
        self.dir_lock = DataDirLock(self.data_dir)
        self.logs = LogManager(self.data_dir, self.config)
        self.producer_ids = ProducerIdManager(self.data_dir)
        self.groups = GroupCoordinator(self.logs, self.config)
        self.transactions = TransactionCoordinator(
            self.logs, self.config, self.data_dir, self.producer_ids, self.groups
        )
        # Started in this order after the logs load (the group coordinator first:
        # transaction recovery completes pending offset commits).
        self.coordinators = (self.groups, self.transactions)
        self.traps = RequestTraps.from_env()  # the fault engine's request traps (tests)
        self.metrics = BrokerMetrics()

    async def open(self) -> None:
        """Security, cluster id, logs and coordinators; bad settings fail before any log
        is opened."""
        created = not self.data_dir.exists()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # DataDirInUse while another broker has it (one just killed gets time to exit)
        await asyncio.to_thread(self.dir_lock.acquire, 5.0)
        try:
            self._start_security()
            self.cluster_id = self._load_cluster_id()
            dynamic_configs.load(self.data_dir, self.config)
            self.logs.load()
            self.producer_ids.load()
            self.logs.start()
            for coordinator in self.coordinators:
                await coordinator.start()
        except BaseException:
            self.dir_lock.release()
            if created:  # a start that failed leaves no new data directory behind
                shutil.rmtree(self.data_dir, ignore_errors=True)
            raise

    async def close(self) -> None:
        try:
            for coordinator in reversed(self.coordinators):
                await coordinator.stop()
            await self.logs.stop()
            self.logs.close()
        finally:
            self.dir_lock.release()

    def _start_security(self) -> None:
        if settings.needs(self.listeners, "uses_tls"):
            self.tls = settings.server_tls_context(self.config)
        self.authorizer = settings.authorizer(self.config, self.data_dir)
        self.scram_credentials = ScramCredentialStore(self.data_dir)
        self.sasl = settings.sasl_server(self.config, self.scram_credentials)
        settings.add_scram_users(self.scram_credentials, self.scram_users)

    def _load_cluster_id(self) -> str:
        path = self.data_dir / "meta.json"
        if path.exists():
            return json.loads(path.read_text())["cluster_id"]
        cluster_id = uuid.uuid4().hex[:22]
        write_atomically(
            path, json.dumps({"cluster_id": cluster_id, "node_id": self.node_id}).encode()
        )
        return cluster_id
