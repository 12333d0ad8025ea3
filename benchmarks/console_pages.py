"""How long each page of ``onceflow console`` takes on a large cluster.

    python benchmarks/console_pages.py [--topics 1000] [--partitions 10] [--groups 1000]
                                       [--rounds 5] [--engine onceflow|apache-kafka]

An embedded broker (or, with ``--engine apache-kafka``, a 3-node Apache Kafka cluster from
the launcher's jars) gets ``--topics`` topics of ``--partitions`` partitions (10,000 by
default) with a record in each partition, ``--groups`` consumer groups each with
committed offsets on the partitions of one topic, an open transaction, and a
dead-letter topic. ``onceflow console`` then serves it, and every page is fetched
``--rounds`` times over HTTP, as a browser would (the whole HTML); the median and the
slowest are printed per page, beside the CLI command that answers the same question
(``onceflow topics list``, ``groups list``, ``transactions list``), timed the same way
in the same run: the console must not be the slow way to look.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_topics import create_topics
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

SCRIPT = Path(sys.executable).with_name("onceflow")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engine", choices=("onceflow", "apache-kafka"), default="onceflow")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, engine(args.engine, Path(work)) as bootstrap:
        started = time.monotonic()
        names = fill(bootstrap, args.topics, args.partitions, args.groups)
        print(
            f"{args.topics * args.partitions} partitions, {args.groups} groups made in "
            f"{time.monotonic() - started:.0f} s ({args.engine}; load {os.getloadavg()[0]:.1f})"
        )
        pages = [
            "/",
            f"/topics/{names[0]}",
            f"/topics/{names[0]}/messages",
            "/groups",
            "/groups/bench-group-0",
            "/transactions",
            "/dead-letters",
            "/dead-letters/bench.dlq",
            "/reports",
        ]
        with console(bootstrap) as base:
            print(f"{'page':32} {'median s':>9} {'max s':>7}")
            for page in pages:
                times = [timed(lambda p=page: fetch(base + p)) for _ in range(args.rounds)]
                print(f"{page:32} {statistics.median(times):9.2f} {max(times):7.2f}")
        print(f"{'CLI (same question)':32} {'median s':>9} {'max s':>7}")
        for command in (["topics", "list"], ["groups", "list"], ["transactions", "list"]):
            times = [timed(lambda c=command: cli(bootstrap, c)) for _ in range(args.rounds)]
            print(f"{' '.join(command):32} {statistics.median(times):9.2f} {max(times):7.2f}")


def engine(name: str, work: Path):
    if name == "apache-kafka":
        from onceflow.kafka_cluster import KafkaCluster

        return _cluster(KafkaCluster(3, directory=work / "kafka"))
    from onceflow.broker.process import BrokerProcess

    return _broker(BrokerProcess(work / "broker", config={"num.partitions": "1"}))


class _broker:
    def __init__(self, process) -> None:
        self.process = process

    def __enter__(self) -> str:
        self.process.start()
        return self.process.bootstrap

    def __exit__(self, *_exc: object) -> None:
        self.process.stop()


class _cluster(_broker):
    def __exit__(self, *_exc: object) -> None:
        self.process.stop(graceful=False)


def fill(bootstrap: str, topics: int, partitions: int, groups: int) -> list[str]:
    names = [f"bench-topic-{n}" for n in range(topics)]
    for first in range(0, topics, 100):
        create_topics(bootstrap, names[first : first + 100], partitions)
    create_topics(bootstrap, ["bench.dlq"], 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for name in names:
        for partition in range(partitions):
            producer.produce(name, b"x", partition=partition)
    producer.produce(
        "bench.dlq",
        b"failed",
        headers=[
            ("onceflow-error", b"ValueError: x"),
            ("onceflow-source", f"{names[0]}/0/0".encode()),
        ],
    )
    producer.flush(120)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for group in range(groups):
        topic = names[group % topics]
        offsets = [TopicPartition(topic, p, 1) for p in range(partitions)]
        request = [ConsumerGroupTopicPartitions(f"bench-group-{group}", offsets)]
        admin.alter_consumer_group_offsets(request)[f"bench-group-{group}"].result(30)
    # bench-group-0 as a real member makes it: Apache Kafka 4 lists no group whose offsets
    # were only committed (it describes it as Dead), so there the other 999 are offsets only
    member = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-group-0", "enable.auto.commit": False}
    )
    member.subscribe([names[0]])
    while not member.assignment():
        member.poll(0.2)
    member.commit(
        offsets=[TopicPartition(names[0], p, 1) for p in range(partitions)], asynchronous=False
    )
    member.close()
    pending = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-open"})
    pending.init_transactions(30)
    pending.begin_transaction()
    pending.produce(names[0], b"open", partition=0)
    pending.flush(30)
    return names


class console:
    def __init__(self, bootstrap: str) -> None:
        self.command = [str(SCRIPT), "console", "--bootstrap", bootstrap, "--port", "0"]

    def __enter__(self) -> str:
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        return self.process.stdout.readline().split()[2].rstrip("/")

    def __exit__(self, *_exc: object) -> None:
        self.process.terminate()
        self.process.wait(20)


def fetch(url: str) -> None:
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()
        assert response.status == 200, url


def cli(bootstrap: str, command: list[str]) -> None:
    subprocess.run(
        [str(SCRIPT), *command, "--bootstrap", bootstrap], check=True, capture_output=True
    )


def timed(action) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


if __name__ == "__main__":
    main()
