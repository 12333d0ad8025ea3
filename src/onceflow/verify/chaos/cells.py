"""Run one cell of the chaos matrix: inject its fault, let the pattern finish, audit.

Every cell gets its own topics, consumer group, transactional id and database, so cells
can share one broker and run side by side. A SIGKILL cell runs the worker once armed at
its step (``ONCEFLOW_CRASH_AT``; the worker must die there), then unarmed until it exits
idle, then audits every output of the pattern against the input with ``onceflow.verify``.
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.broker.process import BrokerProcess
from onceflow.db import connect
from onceflow.log.durability import JOURNAL_ENV
from onceflow.log.power_loss import simulate_power_loss
from onceflow.patterns.outbox import Outbox
from onceflow.patterns.relay import Relay, RelayConfig
from onceflow.verify.audit import Sink, first_copies
from onceflow.verify.chaos.databases import CellDatabases, hold_unavailable
from onceflow.verify.chaos.flows import ENTITIES_QUERY
from onceflow.verify.chaos.proxy import TcpProxy
from onceflow.verify.chaos.rest import CALLS_QUERY, RestService
from onceflow.verify.chaos.scenarios import DUPLICATED, LOST, OK, Cell, Scenario
from onceflow.verify.chaos.spark_job import TABLE_QUERY as SPARK_TABLE_QUERY
from onceflow.verify.chaos.worker import PAUSE_VAR
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
        sys.executable, "-m", "onceflow.verify.chaos.worker", kind, name,
        "--bootstrap", bootstrap, "--database-url", database_url,
        "--input", names.input, "--output", names.output, "--group", names.group,
        "--transactional-id", names.transactional_id, "--batch-size", "5",
        "--idle-exit", "1.5", *extra,
    ]  # fmt: skip


def start(
    command: list[str], log: IO[str], extra_env: dict[str, str], **kwargs: object
) -> subprocess.Popen:
    environment = {**os.environ, **extra_env, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(command, stderr=log, env=environment, text=True, **kwargs)


def run_to_end(command: list[str], log_path: Path, extra_env: dict[str, str] | None = None) -> int:
    with open(log_path, "a") as log:
        process = start(command, log, extra_env or {}, stdout=log)
        try:
            return process.wait(RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise CellError(f"{command[4]} did not finish in {RUN_TIMEOUT_S:.0f} s") from None


def crash_then_finish(command: list[str], cell: Cell, log_path: Path) -> None:
    """Run armed at the cell's step (it must die there), then unarmed to the end."""
    code = run_to_end(command, log_path, {"ONCEFLOW_CRASH_AT": f"{cell.step}:{cell.occurrence}"})
    if code != -signal.SIGKILL:
        raise CellError(f"armed run exited {code}, not at crash point {cell.step}; see {log_path}")
    finish(command, log_path)


def finish(command: list[str], log_path: Path) -> None:
    code = run_to_end(command, log_path)
    if code != 0:
        raise CellError(f"run exited {code}; see {log_path}")


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
        sys.executable, "-m", "onceflow.verify.chaos.spark_job", "--bootstrap", env.bootstrap,
        "--input", names.input, "--checkpoint", str(cell_dir / "checkpoint"),
        "--sink-id", names.prefix, "--max-offsets-per-trigger", "10",
    ]  # fmt: skip
    if scenario.pattern.startswith("database_sink"):
        command += ["--database-url", database_url]
        if scenario.pattern.endswith("_staged"):
            command += ["--strategy", "staged"]
    else:
        command += ["--output-topic", names.output]
    log_path = cell_dir / "spark.log"
    crash_env = {
        "ONCEFLOW_SPARK_CRASH_AT": f"{cell.step}@{cell.occurrence}",
        "ONCEFLOW_SPARK_CRASH_FILE": str(cell_dir / "crashes.txt"),
    }
    for armed in (crash_env, {}):
        with open(log_path, "a") as log:
            process = start(command, log, armed, stdout=log, start_new_session=True)
            try:
                code = process.wait(SPARK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise CellError(f"Spark job did not finish; see {log_path}") from None
        if armed and code != -signal.SIGKILL:
            raise CellError(f"armed Spark job exited {code}, not at {cell.step}; see {log_path}")
        if not armed and code != 0:
            raise CellError(f"Spark job exited {code}; see {log_path}")
    readers = output_readers(env.bootstrap, tuple(cell.expected), names, database_url)
    if "db" in readers:  # rows of parallel tasks: a table promises no order
        readers["db"] = lambda: read_table(
            database_url, EXTRACTOR, query=SPARK_TABLE_QUERY, check_order=False
        )
    return audit_outputs(env.bootstrap, names.input, readers), "driver process group SIGKILLed"


# -- faults that are not a worker crash -----------------------------------------------------


def paused_run(
    command: list[str],
    pause_at: str,
    log_path: Path,
    fault: Injector,
    supervise: Injector | None = None,
) -> None:
    """Run until the worker pauses at ``pause_at``, apply ``fault``, let it finish: exit 0
    by itself, or, with ``supervise``, however that brings it to the end."""
    paused = threading.Event()
    with open(log_path, "a") as log:
        process = start(
            command, log, {PAUSE_VAR: pause_at}, stdout=subprocess.PIPE, stdin=subprocess.PIPE
        )

        def watch() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                if line.startswith("paused "):
                    paused.set()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while not paused.wait(0.2):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise CellError(f"worker never reached {pause_at}; see {log_path}")
            fault(process)
            if supervise is not None:
                supervise(process)
                return
            code = process.wait(RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CellError(f"worker did not finish after the fault; see {log_path}") from None
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            watcher.join(5)
    if code != 0:
        raise CellError(f"worker exited {code} after the fault; see {log_path}")


def release(process: subprocess.Popen) -> None:
    assert process.stdin is not None
    process.stdin.write("\n")
    process.stdin.flush()


@contextmanager
def fault_setting(
    kind: str, env: ChaosEnvironment, cell_dir: Path, database_url: str
) -> Iterator[tuple[str, Injector, str]]:
    """(bootstrap the worker uses, what to do once it paused, what was done)."""
    if kind == "database_unavailable":

        def lock_database(process: subprocess.Popen) -> None:
            with hold_unavailable(database_url, "entities"):
                release(process)
                time.sleep(3)

        yield env.bootstrap, lock_database, "database locked for 3 s (worker lock timeout 1 s)"
        return
    proxied = kind == "network_cut"
    journal = cell_dir / "fsync-journal"
    broker = BrokerProcess(
        cell_dir / "broker",
        advertised_host="127.0.0.2" if proxied else None,
        log_path=cell_dir / "broker.log",
        env={JOURNAL_ENV: str(journal)} if kind == "power_loss" else None,
    ).start()
    try:
        if kind == "disk_full":

            def fill_disk(process: subprocess.Popen) -> None:
                resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
                release(process)
                time.sleep(3)
                resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)

            yield broker.bootstrap, fill_disk, "broker's files limited (EFBIG) for 3 s"
            return
        if kind == "power_loss":

            def lose_power(process: subprocess.Popen) -> None:
                release(process)
                time.sleep(random.uniform(0.0, 0.02))  # the commit request is in flight
                broker.kill()
                simulate_power_loss(broker.data_dir, journal, random.Random())
                broker.start()

            yield broker.bootstrap, lose_power, "broker power loss (files cut to their last fsync)"
            return
        if not proxied:

            def kill_broker(process: subprocess.Popen) -> None:
                release(process)
                time.sleep(random.uniform(0.0, 0.02))  # the commit request is in flight
                broker.restart(kill=True)

            yield broker.bootstrap, kill_broker, "broker SIGKILLed and restarted"
            return
        # The broker advertises 127.0.0.2 (loopback on Linux), where the proxy listens on
        # the same port: every connection a client opens goes through the proxy.
        port = broker.port
        with TcpProxy(("127.0.0.2", port), ("127.0.0.1", port)) as proxy:

            def cut_network(process: subprocess.Popen) -> None:
                proxy.cut()
                release(process)
                time.sleep(3)
                proxy.restore()

            yield f"127.0.0.2:{port}", cut_network, "network cut for 3 s (TCP proxy)"
    finally:
        broker.stop()


def run_fault(
    env: ChaosEnvironment, scenario: Scenario, cell: Cell, names: CellNames, cell_dir: Path
) -> tuple[AuditReport, str]:
    """The worker pauses at the cell's step; the fault is applied; it must still finish."""
    mode, _, step = cell.step.partition(":")
    database_url = env.databases.create(names.prefix)
    extra = ("--lock-timeout-ms", "1000") if cell.fault == "database_unavailable" else ()
    with fault_setting(cell.fault, env, cell_dir, database_url) as (bootstrap, inject, note):
        if bootstrap == env.bootstrap:
            env.create_topics(names.input, names.output)
        else:
            create_topics(bootstrap, names.input, names.output)
        produce_events(bootstrap, names.input)
        command = worker_command(bootstrap, "runner", mode, names, database_url, *extra)
        paused_run(command, f"{step}:{cell.occurrence}", cell_dir / "worker.log", inject)
        readers = output_readers(bootstrap, tuple(cell.expected), names, database_url)
        return audit_outputs(bootstrap, names.input, readers), note


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
