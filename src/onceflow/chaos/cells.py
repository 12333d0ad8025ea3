"""Run one cell of the chaos matrix: inject its fault, let the pattern finish, audit.

Every cell gets its own topics, consumer group, transactional id and database, so cells
can share one broker and run side by side. A SIGKILL cell runs the worker once armed at
its step (``ONCEFLOW_CRASH_AT``; the worker must die there), then unarmed until it exits
idle, then audits every output of the pattern against the input with ``onceflow.verify``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.broker.process import BrokerProcess
from onceflow.chaos.flows import ENTITIES_QUERY
from onceflow.chaos.rest import CALLS_QUERY, RestService
from onceflow.chaos.scenarios import DUPLICATED, LOST, OK, Cell, Scenario
from onceflow.chaos.spark_job import TABLE_QUERY as SPARK_TABLE_QUERY
from onceflow.db import connect
from onceflow.faults.actions import FaultActions
from onceflow.faults.databases import CellDatabases
from onceflow.faults.failover import STALL_SECONDS
from onceflow.faults.process import ProcessGroup
from onceflow.faults.progress import Progress
from onceflow.faults.results import Limits, RunError, RunResult
from onceflow.faults.run import FaultRun
from onceflow.faults.schedule import (
    BROKER,
    DB_LOCK,
    DISK_FULL,
    NETWORK,
    POWER_LOSS,
    Fault,
    Schedule,
)
from onceflow.log.durability import JOURNAL_ENV
from onceflow.patterns.outbox import Outbox
from onceflow.patterns.relay import Relay, RelayConfig
from onceflow.tcp_proxy import TcpProxy
from onceflow.verify.audit import Sink, first_copies
from onceflow.verify.extract import Extractor
from onceflow.verify.report import AuditReport
from onceflow.verify.sources import read_input, read_output_topic, read_table

if TYPE_CHECKING:
    from onceflow.kafka_cluster import KafkaCluster

EVENTS = 30
PARTITIONS = 2
KEYS = 4
RUN_TIMEOUT_S = 120.0
SPARK_TIMEOUT_S = 300.0
OUTBOX_PATTERNS = frozenset({"outbox", "idempotent_consumer_outbox", "inbox_outbox"})
EXTRACTOR = Extractor("id", "key")


class CellError(RuntimeError):
    """The cell could not be run as designed (not an audit finding)."""


# What a cell's result says in the JSON report, in this order (then its seconds).
RESULT_FIELDS = ("scenario", "step", "number", "label", "fault", "expected", "observed", "counts",
                 "matches", "error", "note")  # fmt: skip


@dataclass
class CellResult:
    scenario: str
    step: str
    label: str
    fault: str
    expected: dict[str, str]
    observed: dict[str, str] = field(default_factory=dict)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    number: int | None = None
    seconds: float = 0.0
    error: str | None = None
    note: str = ""

    @property
    def matches(self) -> bool:
        return self.error is None and self.observed == self.expected

    def to_dict(self) -> dict[str, object]:
        shown = {name: getattr(self, name) for name in RESULT_FIELDS}
        return {**shown, "seconds": round(self.seconds, 1)}


def verdict(counts: dict[str, int]) -> str:
    """One word per output: ok, duplicated, lost, or the anomaly kind that was found."""
    missing, duplicated = counts.get("missing", 0), counts.get("duplicated", 0)
    if missing and duplicated:
        return f"{LOST}+{DUPLICATED}"
    if missing:
        return LOST
    if duplicated:
        return DUPLICATED
    for kind in ("aborted_visible", "reordered", "unexpected", "unreadable"):
        if counts.get(kind):
            return kind
    return OK


class CellNames:
    """Topic, group and transactional-id names that are this cell's alone."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.input = f"{prefix}.input"
        self.output = f"{prefix}.output"
        self.group = f"{prefix}.group"
        self.transactional_id = f"{prefix}.txn"


class ChaosEnvironment:
    """What every cell shares: a broker, a work directory, the databases, the log files.

    On an Apache Kafka cluster (``replication > 1``) the cells' topics are replicated
    with ``topic_config`` (``min.insync.replicas``); ``cluster`` is set when the harness
    controls the nodes (the failover cells need it)."""

    def __init__(
        self,
        work: Path,
        bootstrap: str,
        databases: CellDatabases,
        *,
        replication: int = 1,
        topic_config: dict[str, str] | None = None,
        cluster: KafkaCluster | None = None,
    ) -> None:
        self.work = work
        self.bootstrap = bootstrap
        self.databases = databases
        self.replication = replication
        self.topic_config = dict(topic_config or {})
        self.cluster = cluster
        self.runners: dict[str, CellRunner] = dict(CELL_RUNNERS)
        self._counter = 0
        self._lock = threading.Lock()

    def create_topics(self, *names: str) -> None:
        create_topics(self.bootstrap, *names, replication=self.replication,
                      config=self.topic_config)  # fmt: skip
        if self.cluster is not None:  # every node knows them before a worker asks
            for name in names:
                self.cluster.wait_for_topic(name)

    def next_names(self, scenario: Scenario, cell: Cell) -> CellNames:
        with self._lock:
            self._counter += 1
            number = self._counter
        slug = f"{scenario.pattern}-{cell.step}".replace(":", "-").replace(".", "-")
        return CellNames(f"c{number:03d}-{slug}")

    def run(self, scenario: Scenario, cell: Cell) -> CellResult:
        result = CellResult(
            scenario.name, cell.step, cell.label, cell.fault, dict(cell.expected),
            number=cell.number,
        )  # fmt: skip
        started = time.monotonic()
        names = self.next_names(scenario, cell)
        cell_dir = self.work / names.prefix
        cell_dir.mkdir(parents=True)
        try:
            runner = self.runners[cell.fault if cell.fault != "sigkill" else scenario.family]
            report, note = runner(self, scenario, cell, names, cell_dir)
            for summary in report.sinks:
                result.counts[summary.name] = {k: v for k, v in summary.counts.items() if v}
                result.observed[summary.name] = verdict(summary.counts)
            result.note = note
        except Exception as error:  # reported in the matrix, never hidden
            result.error = f"{type(error).__name__}: {error}"
        result.seconds = time.monotonic() - started
        return result


# -- shared steps ---------------------------------------------------------------------------


def create_topics(
    bootstrap: str, *names: str, replication: int = 1, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, PARTITIONS, replication, config=dict(config or {})) for name in names]
    futures = admin.create_topics(new)
    for future in futures.values():
        future.result(30)


def produce_events(bootstrap: str, topic: str, count: int = EVENTS) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
         "log_level": 4}
    )  # fmt: skip
    for n in range(count):
        key = f"k{n % KEYS}"
        event = {"id": f"e{n}", "key": key, "n": n}
        producer.produce(topic, key=key.encode(), value=json.dumps(event).encode())
    if producer.flush(30):
        raise CellError("input events were not acknowledged")


def worker_command(
    bootstrap: str, kind: str, name: str, names: CellNames, database_url: str, *extra: str
) -> list[str]:
    return [
        sys.executable, "-m", "onceflow.chaos.worker", kind, name,
        "--bootstrap", bootstrap, "--database-url", database_url,
        "--input", names.input, "--output", names.output, "--group", names.group,
        "--transactional-id", names.transactional_id, "--batch-size", "5",
        "--idle-exit", "1.5", *extra,
    ]  # fmt: skip


def run_through(
    command: list[str],
    log_path: Path,
    schedule: Schedule,
    actions: FaultActions | None = None,
    *,
    timeout_s: float = RUN_TIMEOUT_S,
    supervised: Progress | None = None,
    stall_s: float = STALL_SECONDS,
) -> RunResult:
    """Run ``command`` through ``schedule`` with the fault engine until its last, unarmed
    life exits 0 (idle). An error exit is a CellError, unless ``supervised``: then, as a
    deployment would, it is restarted, and SIGKILLed and restarted when ``supervised``
    (e.g. the group's committed offsets) stops moving (librdkafka can wedge under
    failover)."""

    def start(_worker: int, _life: int, arming: dict[str, str]) -> ProcessGroup:
        env = {**os.environ, **arming, "PYTHONUNBUFFERED": "1"}
        return ProcessGroup(command, log_path, env=env)

    limits = Limits(stall_s=stall_s if supervised else timeout_s, timeout_s=timeout_s)
    run = FaultRun(start, schedule, log_path.parent, until="exit", actions=actions,
                   progress=supervised, limits=limits, restart_crashed=supervised is not None,
                   supervised=supervised is not None)  # fmt: skip
    try:
        result = run.run()
    except RunError as error:
        raise CellError(f"{error}; see {log_path}") from None
    for landing in result.landings:
        if not landing.landed:
            raise CellError(f"{landing.fault} did not happen ({landing.note}); see {log_path}")
    return result


def crash_then_finish(command: list[str], cell: Cell, log_path: Path) -> None:
    """Run armed at the cell's step (it must die there), then unarmed to the end."""
    run_through(command, log_path, (Fault(cell.step, cell.occurrence),))


def relay_outbox(bootstrap: str, database_url: str) -> int:
    """Publish what the pattern left in the outbox (the article's CDC step)."""
    with connect(database_url) as db:
        outbox = Outbox(db)
        outbox.create_schema()
        relay = Relay(db, outbox, RelayConfig(bootstrap, batch_size=100, idle_sleep_s=0.1))
        return relay.run(lambda: False, idle_exit_s=0.5)


def audit_outputs(
    bootstrap: str,
    input_topic: str,
    outputs: dict[str, Callable[[], Sink]],
) -> AuditReport:
    """Audit every output (name -> reader) against the input events."""
    source = read_input(bootstrap, input_topic, EXTRACTOR, 60)
    sinks = []
    for name, read in outputs.items():
        sink = read()
        sink.name = name
        sinks.append(sink)
    return source.audit(sinks)


def output_readers(
    bootstrap: str,
    outputs: tuple[str, ...],
    names: CellNames,
    database_url: str,
    rest_url: str | None = None,
) -> dict[str, Callable[[], Sink]]:
    readers: dict[str, Callable[[], Sink]] = {
        "rest": lambda: read_table(rest_url or "", EXTRACTOR, query=CALLS_QUERY),
        "db": lambda: read_table(database_url, EXTRACTOR, query=ENTITIES_QUERY),
        "topic": lambda: read_output_topic(bootstrap, names.output, EXTRACTOR, timeout=60),
    }
    return {name: readers[name] for name in outputs}


# -- families -------------------------------------------------------------------------------

Injector = Callable[[subprocess.Popen], None]
CellRunner = Callable[[ChaosEnvironment, Scenario, Cell, CellNames, Path], tuple[AuditReport, str]]


def prepare(env: ChaosEnvironment, names: CellNames) -> str:
    """The cell's topics and input events; returns the URL of its new database."""
    env.create_topics(names.input, names.output)
    produce_events(env.bootstrap, names.input)
    return env.databases.create(names.prefix)


def run_worker(
    env: ChaosEnvironment, scenario: Scenario, cell: Cell, names: CellNames, cell_dir: Path
) -> tuple[AuditReport, str]:
    """An article flow (which calls the REST service) or a Runner mode, killed at a step."""
    database_url = prepare(env, names)
    with RestService(cell_dir / "rest.db") as rest:
        rest_option = ("--rest-url", rest.url) if scenario.family == "article" else ()
        command = worker_command(
            env.bootstrap, scenario.family, scenario.pattern, names, database_url, *rest_option
        )
        crash_then_finish(command, cell, cell_dir / "worker.log")
    note = ""
    if scenario.pattern in OUTBOX_PATTERNS:
        note = f"relay published {relay_outbox(env.bootstrap, database_url)}"
    readers = output_readers(
        env.bootstrap, tuple(cell.expected), names, database_url, rest.database_url
    )
    return audit_outputs(env.bootstrap, names.input, readers), note


def run_relay(
    env: ChaosEnvironment, scenario: Scenario, cell: Cell, names: CellNames, cell_dir: Path
) -> tuple[AuditReport, str]:
    """The outbox filled with every input event, then ``onceflow relay`` killed at a step."""
    database_url = prepare(env, names)
    source = read_input(env.bootstrap, names.input, EXTRACTOR, 60)
    with connect(database_url) as db:
        outbox = Outbox(db)
        outbox.create_schema()
        with db.transaction() as tx:
            for event in sorted(source.events, key=lambda e: (e.partition, e.offset)):
                body = {"id": event.id, "key": event.key}
                outbox.add(tx, names.output, event.key, json.dumps(body))
    command = [
        sys.executable, "-m", "onceflow", "relay", "--database-url", database_url,
        "--bootstrap", env.bootstrap, "--idle-exit", "2.5", "--batch-size", "5",
        "--lease-ttl-ms", "1000", "--log-level", "WARNING",
    ]  # fmt: skip
    crash_then_finish(command, cell, cell_dir / "relay.log")
    wire = read_output_topic(env.bootstrap, names.output, EXTRACTOR, timeout=60)
    deduplicated, removed = first_copies(wire)
    report = audit_outputs(env.bootstrap, names.input, {"topic": lambda: deduplicated})
    return report, f"{removed} duplicate copies on the wire, removed by the consumer's inbox"


def run_spark(
    env: ChaosEnvironment, scenario: Scenario, cell: Cell, names: CellNames, cell_dir: Path
) -> tuple[AuditReport, str]:
    database_url = prepare(env, names)
    command = [
        sys.executable, "-m", "onceflow.chaos.spark_job", "--bootstrap", env.bootstrap,
        "--input", names.input, "--checkpoint", str(cell_dir / "checkpoint"),
        "--sink-id", names.prefix, "--max-offsets-per-trigger", "10",
    ]  # fmt: skip
    if scenario.pattern.startswith("database_sink"):
        command += ["--database-url", database_url]
        if scenario.pattern.endswith("_staged"):
            command += ["--strategy", "staged"]
    else:
        command += ["--output-topic", names.output]
    run_through(command, cell_dir / "spark.log", (Fault(cell.step, cell.occurrence),),
                timeout_s=SPARK_TIMEOUT_S)  # fmt: skip
    readers = output_readers(env.bootstrap, tuple(cell.expected), names, database_url)
    if "db" in readers:  # rows of parallel tasks: a table promises no order
        readers["db"] = lambda: read_table(
            database_url, EXTRACTOR, query=SPARK_TABLE_QUERY, check_order=False
        )
    return audit_outputs(env.bootstrap, names.input, readers), "driver process group SIGKILLed"


# -- faults that are not a worker crash -----------------------------------------------------


# The chaos matrix's names for its faults, and the fault engine's actions.
FAULT_ACTIONS = {
    "broker_kill": BROKER,
    "database_unavailable": DB_LOCK,
    "network_cut": NETWORK,
    "disk_full": DISK_FULL,
    "power_loss": POWER_LOSS,
}


@contextmanager
def fault_setting(
    kind: str, env: ChaosEnvironment, cell_dir: Path, database_url: str
) -> Iterator[tuple[str, FaultActions]]:
    """(bootstrap the worker uses, the fault engine's actions for the cell)."""
    hold = FaultActions(hold_s=3.0)
    if kind == "database_unavailable":
        hold.database = (database_url, "entities")
        yield env.bootstrap, hold
        return
    proxied = kind == "network_cut"
    journal = cell_dir / "fsync-journal"
    broker = BrokerProcess(
        cell_dir / "broker",
        advertised_host="127.0.0.2" if proxied else None,
        log_path=cell_dir / "broker.log",
        env={JOURNAL_ENV: str(journal)} if kind == "power_loss" else None,
    ).start()
    hold.broker, hold.journal = broker, journal
    try:
        if not proxied:
            yield broker.bootstrap, hold
            return
        # The broker advertises 127.0.0.2 (loopback on Linux), where the proxy listens on
        # the same port: every connection a client opens goes through the proxy.
        port = broker.port
        with TcpProxy(("127.0.0.2", port), ("127.0.0.1", port)) as proxy:
            hold.proxies[1] = proxy
            yield f"127.0.0.2:{port}", hold
    finally:
        broker.stop()


def run_fault(
    env: ChaosEnvironment, scenario: Scenario, cell: Cell, names: CellNames, cell_dir: Path
) -> tuple[AuditReport, str]:
    """The worker pauses at the cell's step; the fault is applied; it must still finish."""
    mode, _, step = cell.step.partition(":")
    database_url = env.databases.create(names.prefix)
    extra = ("--lock-timeout-ms", "1000") if cell.fault == "database_unavailable" else ()
    with fault_setting(cell.fault, env, cell_dir, database_url) as (bootstrap, actions):
        if bootstrap == env.bootstrap:
            env.create_topics(names.input, names.output)
        else:
            create_topics(bootstrap, names.input, names.output)
        produce_events(bootstrap, names.input)
        command = worker_command(bootstrap, "runner", mode, names, database_url, *extra)
        fault = Fault(step, cell.occurrence, FAULT_ACTIONS[cell.fault])
        result = run_through(command, cell_dir / "worker.log", (fault,), actions)
        readers = output_readers(bootstrap, tuple(cell.expected), names, database_url)
        return audit_outputs(bootstrap, names.input, readers), result.landings[0].note


CELL_RUNNERS: dict[str, CellRunner] = {
    "article": run_worker,
    "runner": run_worker,
    "relay": run_relay,
    "spark": run_spark,
    "broker_kill": run_fault,
    "database_unavailable": run_fault,
    "network_cut": run_fault,
    "disk_full": run_fault,
    "power_loss": run_fault,
}

FAILOVER_FAULTS = frozenset(
    {"leader_kill", "txn_coordinator_kill", "group_coordinator_kill", "two_nodes_down"}
)
