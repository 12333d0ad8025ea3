"""Produce latency at a fixed moderate rate: onceflow's broker against Apache Kafka.

    python benchmarks/produce_latency.py [--rate 5000] [--seconds 10] [--repeat 3]
                                         [--engines onceflow,kafka,kafka-fsync]
                                         [--linger-ms 0]

Every engine (bench_engines.py: onceflow, Apache Kafka with its defaults, Apache Kafka
with an fsync before every answer) runs at the same time on 127.0.0.1. Each repetition
measures every engine in turn (the order rotating), on a fresh 4-partition topic: one
confluent-kafka producer (idempotent, acks=all, ``linger.ms=--linger-ms``) sends 1 KB
records (1,000-byte value, 8-byte key, round-robin over the partitions) on a fixed
schedule of ``--rate`` records/s for ``--seconds`` seconds (the records due are handed to
the producer every millisecond). A record's latency runs from the moment the schedule said
to send it to its delivery report (the acknowledgement), so a producer that falls behind
its schedule counts against it (no coordinated omission).
The first second of each run is a warm-up and is not counted.

Printed: p50, p99, p99.9 and max per engine (all counted records of all repetitions),
the p50 and p99 of each repetition, the ratio onceflow/peer of p50 and p99 (below 1 is
faster) and the machine's load average at the start and the end.
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
from pathlib import Path

from bench_engines import Engine, parse_engines, start_engine
from bench_topics import create_topics, delete_topics
from confluent_kafka import Producer

PARTITIONS = 4
VALUE_SIZE = 1000
WARMUP_SECONDS = 1.0
TICK_SECONDS = 0.001  # the records due are sent every millisecond, late ones count late


def measure(engine: Engine, rate: int, seconds: float, linger_ms: int) -> list[float]:
    """Latencies in ms of the records sent after the warm-up second."""
    topic = f"latency-{uuid.uuid4().hex[:10]}"
    create_topics(engine.bootstrap, [topic], PARTITIONS)
    producer = Producer(
        {
            "bootstrap.servers": engine.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": linger_ms,
            "compression.type": "none",
        }
    )
    producer.list_topics(topic, timeout=10)
    value = os.urandom(VALUE_SIZE // 2).hex().encode()
    keys = [f"key{n:05d}".encode() for n in range(PARTITIONS)]
    total = int(rate * seconds)
    latencies: list[float] = []
    errors: list[str] = []
    clock = time.perf_counter
    start = clock()
    counted_from = start + WARMUP_SECONDS

    def delivered(due: float, error, _message) -> None:
        if error is not None:
            errors.append(str(error))
        elif due >= counted_from:
            latencies.append((clock() - due) * 1000)

    sent = 0
    while sent < total:
        now = clock()
        while sent < total and start + sent / rate <= now:
            due = start + sent / rate
            partition = sent % PARTITIONS
            producer.produce(
                topic,
                value,
                keys[partition],
                partition,
                lambda error, message, due=due: delivered(due, error, message),
            )
            sent += 1
        # Wake at the next tick (or earlier, for a delivery report): not once per record.
        next_send = max(start + sent / rate, now + TICK_SECONDS)
        producer.poll(max(0.0, next_send - clock()))
    if producer.flush(60):
        raise RuntimeError(f"{engine.name}: records left unacknowledged")
    delete_topics(engine.bootstrap, [topic])
    if errors:
        raise RuntimeError(f"{engine.name}: {len(errors)} delivery errors, {errors[:3]}")
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=5000, help="records per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of one run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per engine")
    parser.add_argument("--engines", default="onceflow,kafka,kafka-fsync")
    parser.add_argument("--linger-ms", type=int, default=0, help="the producer's linger.ms")
    args = parser.parse_args()
    names = parse_engines(args.engines)

    work = Path(tempfile.mkdtemp(prefix="produce-latency-"))
    engines: list[Engine] = []
    runs: dict[str, list[list[float]]] = {name: [] for name in names}
    try:
        engines = [start_engine(name, work) for name in names]
        print(
            f"{args.rate:,} records/s of 1 KB for {args.seconds:g} s (first second not counted),"
            f" {PARTITIONS} partitions, idempotent acks=all, linger.ms={args.linger_ms}, "
            f"{args.repeat} repetitions; engines {', '.join(names)}",
            flush=True,
        )
        print(f"machine load at start: {load()}", flush=True)
        for engine in engines:  # warm-up: connections, JIT, first segments
            measure(engine, args.rate, 2.0, args.linger_ms)
        for repetition in range(args.repeat):
            shift = repetition % len(engines)
            line = []
            for engine in engines[shift:] + engines[:shift]:
                latencies = measure(engine, args.rate, args.seconds, args.linger_ms)
                runs[engine.name].append(latencies)
                line.append(
                    f"{engine.name} p50 {percentile(latencies, 0.5):6.2f} ms"
                    f" p99 {percentile(latencies, 0.99):7.2f} ms"
                )
            print(f"repetition {repetition + 1}/{args.repeat}: " + " | ".join(line), flush=True)
    finally:
        for engine in engines:
            engine.stop()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{'engine':12s} {'p50 ms':>8s} {'p99 ms':>8s} {'p99.9 ms':>9s} {'max ms':>8s}"
          f" {'records':>8s}")  # fmt: skip
    summary: dict[str, tuple[float, float]] = {}
    for name in names:
        every = [value for run in runs[name] for value in run]
        p50, p99 = percentile(every, 0.5), percentile(every, 0.99)
        summary[name] = (p50, p99)
        print(
            f"{name:12s} {p50:8.2f} {p99:8.2f} {percentile(every, 0.999):9.2f}"
            f" {max(every):8.2f} {len(every):8d}"
        )
    if "onceflow" in summary:
        for name in names:
            if name == "onceflow":
                continue
            paired50 = [
                percentile(a, 0.5) / percentile(b, 0.5)
                for a, b in zip(runs["onceflow"], runs[name], strict=True)
            ]
            paired99 = [
                percentile(a, 0.99) / percentile(b, 0.99)
                for a, b in zip(runs["onceflow"], runs[name], strict=True)
            ]
            print(
                f"onceflow/{name} latency: p50 {summary['onceflow'][0] / summary[name][0]:.2f}x,"
                f" p99 {summary['onceflow'][1] / summary[name][1]:.2f}x (below 1: onceflow"
                f" faster); within repetitions median p50 {statistics.median(paired50):.2f}x,"
                f" p99 {statistics.median(paired99):.2f}x"
            )
    print(f"machine load at end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
