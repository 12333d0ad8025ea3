"""One confluent-kafka group member for the rebalance tests (run as a subprocess).

It processes each record (writes it to its journal), then commits the record's offset
synchronously: commit-after-processing, so every record is processed at least once. The
journal also gets every assign/revoke/lost callback with a timestamp, which the test uses
to check that no partition is ever owned by two members at once. SIGTERM closes the
consumer cleanly (revoke, then LeaveGroup); SIGKILL is a crash.

usage: python -m tests.integration.group_member BOOTSTRAP GROUP TOPIC STRATEGY JOURNAL NAME
"""

from __future__ import annotations

import json
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException


def main() -> None:
    bootstrap, group, topic, strategy, journal_path, name = sys.argv[1:7]
    stopping = False

    def on_sigterm(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_sigterm)
    journal = open(journal_path, "a", buffering=1)  # noqa: SIM115  (line-buffered log)

    def event(kind: str, **fields: object) -> None:
        journal.write(json.dumps({"kind": kind, "t": time.time(), "name": name, **fields}) + "\n")

    def partitions_of(tps) -> list[int]:
        return sorted(tp.partition for tp in tps)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 300,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda c, tps: event("assign", partitions=partitions_of(tps)),
        on_revoke=lambda c, tps: event("revoke", partitions=partitions_of(tps)),
        on_lost=lambda c, tps: event("lost", partitions=partitions_of(tps)),
    )
    event("started")
    while not stopping:
        message = consumer.poll(0.1)
        if message is None:
            continue
        if message.error():
            event("error", error=str(message.error()))
            continue
        event("record", partition=message.partition(), offset=message.offset())
        time.sleep(0.002)  # some processing time, so rebalances find work in flight
        try:
            consumer.commit(message=message, asynchronous=False)
        except KafkaException as error:  # e.g. the partition moved: it is processed again
            event("commit_error", partition=message.partition(), error=str(error))
    consumer.close()
    event("closed")


if __name__ == "__main__":
    main()
