"""Cost of Kafka transactions: a transactional copy against the same copy at-least-once.

    python benchmarks/transactions.py [--records 500000] [--repeat 7] [--partitions 4]
                                      [--commit-interval-ms 100] [--value-bytes 100]
                                      [--warmup 20000] [--bootstrap HOST:PORT]
                                      [--engines onceflow,kafka,kafka-fsync]

One embedded onceflow broker (``python -m onceflow broker`` on a temporary data directory,
default settings: ``log.flush.policy=always``, so every acks=all answer, offset commit and
transaction state change is fsynced) unless ``--bootstrap`` is given; with ``--engines``
also Apache Kafka, one node with its defaults (``kafka``) and one with an fsync before
every answer (``kafka-fsync``), as bench_engines.py describes, all running at once: every
repetition then runs both modes on every engine, the engines' order rotating, and the
ratio onceflow/peer of each mode is printed. On each engine an input topic of
``--partitions`` partitions is filled once with ``--records`` small records (8-byte key,
``--value-bytes`` value; not timed). Every repetition then copies the whole input twice,
to a fresh output topic with a fresh consumer group each time, once per mode, in
alternating order (so that noise from other work on the machine hits both alike):

* **transactional** (exactly-once): a confluent-kafka consumer in the group
  (``isolation.level=read_committed``, no auto commit) and a transactional producer;
  each record's value is transformed (upper-cased) and produced to the same partition of
  the output topic; every ``--commit-interval-ms`` the consumer positions are sent with
  ``send_offsets_to_transaction`` and the transaction is committed, then the next one
  begins.
* **at-least-once**: the same consumer and loop with an idempotent producer (acks=all);
  every ``--commit-interval-ms`` the producer is flushed, then the positions are committed
  with a synchronous ``commit()``.

records/s is timed from the first record received to the end of the last commit (the
group join before it is not counted); the time spent in the commit calls is shown too
(``send_offsets_to_transaction`` + ``commit_transaction``, or ``flush`` + ``commit``).
A warm-up copy of ``--warmup`` records in each mode runs first and is not counted. The
median over ``--repeat`` repetitions is reported with min/max, and the overhead of
transactions = 1 - transactional / at-least-once records/s (the ratio within each
repetition, the two copies run back to back, is shown too, with the machine's load
average at the start and the end). Each copy is checked: the group's committed offsets
reach the end of the input and the output holds every record (plus one commit marker
per partition and transaction in the transactional mode).

Both modes read with the same consumer settings (a 4 MiB prefetch queue, so that the
consumer fetches while the copy runs). The copy loop is bound by the client's per-record
work, the fetches and the commits; what transactions add is the commit's extra round
trips and fsyncs (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn with its
Prepare record and markers) against the at-least-once flush and OffsetCommit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench_engines import Engine, parse_engines, start_engine
from bench_topics import create_topics, delete_topics
from confluent_kafka import Consumer, Producer, TopicPartition

KEY_BYTES = 8
MODES = ("transactional", "at-least-once")

CONSUMER_CONFIG = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    "session.timeout.ms": 10_000,
    # A small prefetch queue (4 MiB instead of 64 MiB): the consumer keeps fetching while
    # the copy runs, as in a pipeline whose input keeps arriving, instead of holding most
    # of the input in memory before the first record is timed. librdkafka postpones a
    # partition's next fetch by fetch.queue.backoff.ms (1 s by default) once the queue is
    # full; 10 ms keeps those pauses from drowning what is measured.
    "queued.max.messages.kbytes": 4096,
    "fetch.queue.backoff.ms": 10,
}
PRODUCER_CONFIG = {
    "linger.ms": 5,
    "compression.type": "none",
    "queue.buffering.max.messages": 500_000,
}


@dataclass
class Copy:
    """One timed copy: records copied, seconds, commits made and the time spent in them."""

    records: int
    seconds: float
    commits: int
    commit_seconds: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds


@dataclass
class Results:
    runs: dict[str, list[Copy]] = field(default_factory=lambda: {mode: [] for mode in MODES})

    def median_rate(self, mode: str) -> float:
        return statistics.median(copy.rate for copy in self.runs[mode])


# -- topics -------------------------------------------------------------------------------


def fill(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int) -> None:
    """Write the input: ``records`` records spread evenly over the partitions (not timed)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, **PRODUCER_CONFIG}
    )
    value = (b"record-value-" * (value_bytes // 13 + 1))[:value_bytes]
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value, f"{n:0{KEY_BYTES}d}".encode(), n % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError(f"could not fill {topic}")


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "transactions-bench-end"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


# -- the copy -----------------------------------------------------------------------------


def positions(consumer: Consumer) -> list[TopicPartition]:
    """Next offset to read for every assigned partition that has been read from."""
    return [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]


def copy(
    bootstrap: str,
    mode: str,
    source: str,
    target: str,
    group: str,
    records: int,
    interval: float,
) -> Copy:
    """Copy ``records`` records of ``source`` into ``target`` in the given mode."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_CONFIG})
    transactional = mode == "transactional"
    settings: dict[str, object] = {"bootstrap.servers": bootstrap, **PRODUCER_CONFIG}
    if transactional:
        settings["transactional.id"] = f"{group}-txn"
    else:
        settings["enable.idempotence"] = True  # acks=all
    producer = Producer(settings)
    if transactional:
        producer.init_transactions(30)

    def commit() -> None:
        if transactional:
            producer.send_offsets_to_transaction(
                positions(consumer), consumer.consumer_group_metadata(), 30
            )
            producer.commit_transaction(30)
        else:
            if producer.flush(30):
                raise RuntimeError("at-least-once flush timed out")
            consumer.commit(offsets=positions(consumer), asynchronous=False)

    send: Callable[..., None] = producer.produce
    consumer.subscribe([source])
    copied = commits = 0
    start = last_commit = commit_seconds = 0.0
    open_transaction = False
    deadline = time.monotonic() + 600
    try:
        while copied < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{mode}: copied only {copied} of {records} records")
            messages = consumer.consume(1000, 0.05)
            if messages and not start:
                start = last_commit = time.perf_counter()
            if messages and transactional and not open_transaction:
                producer.begin_transaction()
                open_transaction = True
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(f"{mode}: {message.error()}")
                value = message.value()
                while True:
                    try:
                        send(target, value.upper(), message.key(), message.partition())
                        break
                    except BufferError:
                        producer.poll(0.005)
            copied += len(messages)
            producer.poll(0)
            now = time.perf_counter()
            due = start and (now - last_commit >= interval or copied >= records)
            if due and (open_transaction or not transactional):
                began = time.perf_counter()
                commit()
                commit_seconds += time.perf_counter() - began
                commits += 1
                open_transaction = False
                last_commit = now
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if copied != records:
        raise RuntimeError(f"{mode}: copied {copied} records, expected {records}")
    return Copy(copied, elapsed, commits, commit_seconds)


def check(bootstrap: str, copy_: Copy, mode: str, source: str, target: str, group: str,
          partitions: int) -> None:  # fmt: skip
    """The group committed the end of the input; the output holds every record."""
    ends = end_offsets(bootstrap, source, partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = consumer.committed(
            [TopicPartition(source, p) for p in range(partitions)], timeout=10
        )
    finally:
        consumer.close()
    if [tp.offset for tp in committed] != ends:
        raise RuntimeError(f"{mode}: committed {[tp.offset for tp in committed]}, end {ends}")
    written = sum(end_offsets(bootstrap, target, partitions))
    # Transactional: data records plus one commit marker per partition per transaction.
    if written < copy_.records or (mode == "at-least-once" and written != copy_.records):
        raise RuntimeError(f"{mode}: output holds {written} offsets for {copy_.records} records")


def run_copy(bootstrap: str, mode: str, source: str, partitions: int, records: int,
             interval: float) -> Copy:  # fmt: skip
    suffix = uuid.uuid4().hex[:8]
    target, group = f"copy-{suffix}", f"copy-{mode}-{suffix}"
    create_topics(bootstrap, [target], partitions)
    result = copy(bootstrap, mode, source, target, group, records, interval)
    check(bootstrap, result, mode, source, target, group, partitions)
    delete_topics(bootstrap, [target])
    return result


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def per_commit_ms(copy_: Copy) -> float:
    return copy_.commit_seconds / max(copy_.commits, 1) * 1000


# -- main ---------------------------------------------------------------------------------


def print_results(name: str, results: Results) -> None:
    print(f"{name}:")
    print(
        f"  {'mode':15s} {'records/s median':>16s} {'(min-max)':>22s} {'commits':>8s}"
        f" {'ms/commit':>10s} {'in commits':>11s}"
    )
    for mode in MODES:
        runs = results.runs[mode]
        rates = [copy_.rate for copy_ in runs]
        commits = statistics.median(copy_.commits for copy_ in runs)
        per_commit = statistics.median(per_commit_ms(copy_) for copy_ in runs)
        share = statistics.median(copy_.commit_seconds / copy_.seconds for copy_ in runs)
        print(
            f"  {mode:15s} {statistics.median(rates):16,.0f} "
            f"({min(rates):9,.0f}-{max(rates):9,.0f}) {commits:8.0f} {per_commit:10.1f}"
            f" {share:11.0%}"
        )
    ratio = results.median_rate("transactional") / results.median_rate("at-least-once")
    print(f"  transactional/at-least-once: {ratio:.2f}x, overhead of transactions {1 - ratio:.1%}")
    paired = [
        ours.rate / theirs.rate
        for ours, theirs in zip(
            results.runs["transactional"], results.runs["at-least-once"], strict=True
        )
    ]
    print(
        f"    ratio within each repetition: median {statistics.median(paired):.2f}x "
        f"(min {min(paired):.2f}x, max {max(paired):.2f}x)"
    )


def print_engine_ratios(ours: Results, theirs: Results, peer: str) -> None:
    for mode in MODES:
        ratio = ours.median_rate(mode) / theirs.median_rate(mode)
        paired = [a.rate / b.rate for a, b in zip(ours.runs[mode], theirs.runs[mode], strict=True)]
        print(
            f"onceflow/{peer} {mode}: {ratio:.2f}x (within repetitions median "
            f"{statistics.median(paired):.2f}x, min {min(paired):.2f}x, max {max(paired):.2f}x)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000, help="records per copy")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions (median reported)")
    parser.add_argument("--partitions", type=int, default=4, help="input/output partitions")
    parser.add_argument("--commit-interval-ms", type=int, default=100, help="commit cadence")
    parser.add_argument("--value-bytes", type=int, default=100, help="record value size")
    parser.add_argument("--warmup", type=int, default=20_000, help="warm-up records per mode")
    parser.add_argument("--bootstrap", help="use this broker instead of an embedded one")
    parser.add_argument(
        "--engines",
        default="onceflow",
        help="brokers to start and compare (comma-separated: onceflow, kafka, kafka-fsync)",
    )
    args = parser.parse_args()
    interval = args.commit_interval_ms / 1000

    work = Path(tempfile.mkdtemp(prefix="transactions-bench-"))
    engines: list[Engine] = []
    results: dict[str, Results] = {}
    try:
        if args.bootstrap is not None:
            engines = [Engine("given", args.bootstrap, 0, lambda: None)]
        else:
            engines = [start_engine(name, work) for name in parse_engines(args.engines)]
        sources: dict[str, str] = {}
        for engine in engines:
            results[engine.name] = Results()
            sources[engine.name] = f"input-{uuid.uuid4().hex[:8]}"
            create_topics(engine.bootstrap, [sources[engine.name]], args.partitions)
            fill(engine.bootstrap, sources[engine.name], args.partitions, args.records,
                 args.value_bytes)  # fmt: skip
        print(
            f"{args.records:,} records ({KEY_BYTES}-byte key, {args.value_bytes}-byte value) on "
            f"{args.partitions} partitions, commit every {args.commit_interval_ms} ms, "
            f"{args.repeat} repetitions; "
            + ", ".join(f"{engine.name} at {engine.bootstrap}" for engine in engines),
            flush=True,
        )
        print(f"machine load at start: {load()}", flush=True)
        if args.warmup:
            for engine in engines:
                warm = f"warmup-{uuid.uuid4().hex[:8]}"
                create_topics(engine.bootstrap, [warm], args.partitions)
                fill(engine.bootstrap, warm, args.partitions, args.warmup, args.value_bytes)
                for mode in MODES:
                    run_copy(engine.bootstrap, mode, warm, args.partitions, args.warmup,
                             interval)  # fmt: skip
                delete_topics(engine.bootstrap, [warm])
        for repetition in range(args.repeat):
            order = MODES if repetition % 2 == 0 else tuple(reversed(MODES))
            shift = repetition % len(engines)
            line = []
            for engine in engines[shift:] + engines[:shift]:
                for mode in order:
                    result = run_copy(engine.bootstrap, mode, sources[engine.name],
                                      args.partitions, args.records, interval)  # fmt: skip
                    results[engine.name].runs[mode].append(result)
                    line.append(
                        f"{engine.name} {mode} {result.rate:9,.0f} rec/s ({result.seconds:5.2f}"
                        f" s, {result.commits} commits of {per_commit_ms(result):4.1f} ms)"
                    )
            print(f"repetition {repetition + 1}/{args.repeat}:", flush=True)
            for entry in line:
                print(f"  {entry}", flush=True)
    finally:
        for engine in engines:
            engine.stop()
        shutil.rmtree(work, ignore_errors=True)

    print()
    for engine in engines:
        print_results(engine.name, results[engine.name])
    for engine in engines:
        if engine.name != "onceflow" and "onceflow" in results:
            print_engine_ratios(results["onceflow"], results[engine.name], engine.name)
    print(f"machine load at end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
