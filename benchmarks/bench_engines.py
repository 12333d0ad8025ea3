"""The brokers the benchmarks compare: onceflow's and Apache Kafka (single node, two settings).

    engine = start_engine("kafka-fsync", work_dir)
    engine.bootstrap, engine.pid
    engine.stop()

* ``onceflow``: the embedded broker as shipped (``log.flush.policy=always``: every acks=all
  answer waits for an fsync of its batch).
* ``kafka``: Apache Kafka (the release ``onceflow.kafka_cluster`` pins), one combined
  broker+controller node, Kafka's own defaults: a produce is answered once the batch is in
  the page cache, nothing is fsynced per request.
* ``kafka-fsync``: the same node with ``log.flush.interval.messages=1`` (every topic's
  ``flush.messages=1``, internal topics included): the log is fsynced after every append,
  before the answer, which is the durability onceflow promises.

Kafka runs with the JVM settings of Kafka's own start script (1 GB heap, G1), not the
launcher's fast-start defaults, which are tuned for tests. Automatic topic creation is off
on every engine: the benchmarks create their topics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ENGINES = ("onceflow", "kafka", "kafka-fsync")

# What bin/kafka-server-start.sh gives a broker (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS).
KAFKA_HEAP = "1g"
KAFKA_SERVER_JVM_OPTIONS = (
    "-server",
    "-Xms1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)


@dataclass
class Engine:
    name: str
    bootstrap: str
    pid: int
    stop: Callable[[], None]


def start_engine(name: str, work: Path) -> Engine:
    if name == "onceflow":
        return _start_onceflow(work / "onceflow")
    if name in ("kafka", "kafka-fsync"):
        return _start_kafka(name, work / name, fsync=name == "kafka-fsync")
    raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}")


def _start_onceflow(directory: Path) -> Engine:
    from onceflow.broker.process import BrokerProcess

    broker = BrokerProcess(
        directory / "data",
        config={"auto.create.topics.enable": "false"},
        log_path=directory.parent / "onceflow.log",
    ).start()
    assert broker.process is not None
    return Engine("onceflow", broker.bootstrap, broker.process.pid, broker.stop)


def _start_kafka(name: str, directory: Path, fsync: bool) -> Engine:
    from onceflow.kafka_cluster import KafkaCluster

    config = {"auto.create.topics.enable": "false"}
    if fsync:
        config["log.flush.interval.messages"] = "1"
    cluster = KafkaCluster(
        nodes=1,
        directory=directory,
        config=config,
        heap=KAFKA_HEAP,
        jvm_options=KAFKA_SERVER_JVM_OPTIONS,
    ).start()
    node = cluster.nodes[1]
    assert node.process is not None

    def stop() -> None:
        cluster.stop(graceful=False)

    return Engine(name, cluster.bootstrap, node.process.pid, stop)


def parse_engines(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ENGINES]
    if unknown:
        raise SystemExit(f"unknown engine(s) {unknown}; choose from {', '.join(ENGINES)}")
    return names
