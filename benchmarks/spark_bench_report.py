"""benchmarks/spark_pipeline.py's results: the figures of each mode and their ratios
against the goals."""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, field

# (measure, baseline, goal): the source is measured by the batch read against the plain
# consumer, the sinks against the Python no-op sink of the same query shape (see
# spark_pipeline.py's docstring). Database modes are named "mode:database".
GOALS = [
    ("batch", "consumer", 0.5),
    ("database:sqlite", "pynoop", 0.8),
    ("database:postgresql", "pynoop", 0.8),
    ("kafka", "pynoop", 0.9),
]
INFO_RATIOS = [
    ("source", "consumer"),
    ("pynoop", "source"),
    ("kafka", "pynoop-kv"),
    ("database-staged:sqlite", "pynoop"),
    ("database-staged:postgresql", "pynoop"),
    ("database-accumulate:sqlite", "pynoop"),
    ("database-accumulate:postgresql", "pynoop"),
    ("plain-database:sqlite", "pynoop"),
    ("plain-database:postgresql", "pynoop"),
    ("plain-kafka", "pynoop"),
]
# What exactly-once itself costs: each sink against a Python sink that writes the same
# data to the same place without it (see PlainDatabaseSink, PlainKafkaSink).
EXACTLY_ONCE_COST = [
    ("database:sqlite", "plain-database:sqlite"),
    ("database:postgresql", "plain-database:postgresql"),
    ("kafka", "plain-kafka"),
]


@dataclass
class Timing:
    seconds: float  # the measured figure (see spark_pipeline.py)
    wall: float | None = None  # streaming: start() to the end of awaitTermination()
    batches: int | None = None  # streaming: micro-batches run


@dataclass
class Result:
    mode: str
    records: int
    timings: list[Timing] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)  # 1-minute load average per run

    @property
    def seconds(self) -> float:
        return statistics.median(t.seconds for t in self.timings)

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def spread(self) -> str:
        rates = sorted(self.records / t.seconds for t in self.timings)
        return f"{rates[0]:,.0f}-{rates[-1]:,.0f}" if len(rates) > 1 else ""

    @property
    def wall(self) -> float | None:
        walls = [t.wall for t in self.timings if t.wall is not None]
        return statistics.median(walls) if walls else None

    @property
    def batches(self) -> int | None:
        return self.timings[0].batches


LABELS = {
    "consumer": "plain confluent-kafka consumer (ceiling)",
    "consumer-default": "plain consumer, librdkafka defaults (info)",
    "batch": "onceflow source, batch read -> noop",
    "source": "onceflow source, AvailableNow -> noop",
    "pynoop": "-> Python no-op sink (key, value, partition, offset)",
    "pynoop-kv": "-> Python no-op sink (key, value)",
    "database": "-> onceflow-database append, direct",
    "database-staged": "-> onceflow-database append, staged",
    "database-accumulate": "-> onceflow-database accumulate per store, direct",
    "plain-database": "-> plain Python ADBC append sink, at-least-once",
    "kafka": "-> onceflow-kafka",
    "plain-kafka": "-> plain Python Kafka sink, idempotent producer, at-least-once",
}


def print_report(
    results: dict[str, Result], args: argparse.Namespace, databases: list[str], loads: list
) -> None:
    print()
    print(
        f"{args.records:,} records, {args.partitions} partitions, master {args.master}, "
        f"maxOffsetsPerTrigger {args.max_offsets_per_trigger:,}, "
        f"databases {', '.join(databases)}"
    )
    header = ["mode", "records/s", "seconds", "batches", "wall s", "load 1m"]
    if args.repeat > 1:
        header[1:2] = ["records/s (median)", "min-max"]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for mode, r in results.items():
        name, _, database = mode.partition(":")
        label = LABELS[name] + (f" ({database})" if database else "")
        cells = [label, f"{r.rate:,.0f}"]
        if args.repeat > 1:
            cells.append(r.spread)
        cells += [
            f"{r.seconds:.2f}",
            str(r.batches) if r.batches is not None else "",
            f"{r.wall:.2f}" if r.wall is not None else "",
            "/".join(f"{load:.1f}" for load in r.loads),
        ]
        print("| " + " | ".join(cells) + " |")
    print()
    for mode, base, goal in GOALS:
        if mode in results and base in results:
            ratio = results[mode].rate / results[base].rate
            verdict = "ok" if ratio >= goal else "MISSED"
            print(f"{mode} / {base}: {ratio:.2f}  (goal >= {goal:.1f}: {verdict})")
    for mode, base in INFO_RATIOS:
        if mode in results and base in results:
            print(f"{mode} / {base}: {results[mode].rate / results[base].rate:.2f}  (information)")
    for mode, base in EXACTLY_ONCE_COST:
        if mode in results and base in results:
            ratio = results[mode].rate / results[base].rate
            print(f"{mode} / {base}: {ratio:.2f}  (the cost of exactly-once itself)")
    print("load average (1m, 5m, 15m) at start and end:", *loads)
