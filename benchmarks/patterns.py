"""Throughput of the exactly-once patterns against at-least-once, and against Quix Streams.

    python benchmarks/patterns.py [--records 20000] [--database-url URL] [--bootstrap H:P]
                                  [--quix-python PATH]

Two workloads, each on its own fresh input topic of the same broker (an embedded onceflow
broker unless --bootstrap is given), with the same JSON events:

* ``db``: decode the event, insert one row into a database table. Modes: at_least_once
  (commit after), db_offsets, inbox, inbox + outbox (rows for a relay).
* ``kafka``: decode the event, produce it to an output topic. Modes: at_least_once
  (idempotent producer flushed before the commit), kafka_transactions, inbox + outbox
  (rows written in the database transaction) followed by the relay publishing them, and
  Quix Streams doing the same (``processing_guarantee="at-least-once"`` and
  ``"exactly-once"``).

records/s is measured from the first record handled to the end of the run (the final
commit included); each mode runs ``--repeats`` times on fresh topics and the median is
kept (the machine is shared: spreads are printed). Ratios are printed against
at_least_once of the same workload and, for Kafka transactions, against Quix Streams
exactly-once. Quix Streams runs in its own interpreter (``--quix-python``, default: this
one if it imports quixstreams, else ``.venv-quix/bin/python``, which ``make bench``
creates) because it pins an older confluent-kafka.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench_topics import create_topics
from confluent_kafka import Producer

from onceflow.db import connect
from onceflow.patterns import Runner, RunnerConfig

PARTITIONS = 3


def produce(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "enable.idempotence": True})  # fmt: skip
    for n in range(records):
        key = f"k{n % 64}"
        value = json.dumps({"id": f"e{n}", "key": key, "n": n, "payload": "x" * 100})
        while True:
            try:
                producer.produce(topic, key=key.encode(), value=value.encode())
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


def run_onceflow(
    bootstrap: str, name: str, records: int, db_url: str | None, produce_out: bool, **settings
) -> float:
    topic = f"in-{name}"
    create_topics(bootstrap, [topic, f"out-{name}"], PARTITIONS)
    produce(bootstrap, topic, records)
    if db_url is not None:
        with connect(db_url) as db:
            db.script([f"DROP TABLE IF EXISTS rows_{name}",
                       f"CREATE TABLE rows_{name} (event_id TEXT, n INTEGER)"])  # fmt: skip
    state = {"count": 0, "first": 0.0}
    runner: Runner

    def handle(record, ctx) -> None:
        if state["count"] == 0:
            state["first"] = time.perf_counter()
        event = record.value
        if ctx.tx is not None:
            ctx.tx.execute(f"INSERT INTO rows_{name} (event_id, n) VALUES (?, ?)",
                           (event["id"], event["n"]))  # fmt: skip
        if produce_out:
            ctx.produce(f"out-{name}", record.raw_value, key=record.key)
        state["count"] += 1
        if state["count"] >= records:
            runner.stop()

    config = RunnerConfig(
        bootstrap_servers=bootstrap,
        group_id=f"bench-{name}",
        topics=[topic],
        database_url=db_url,
        assign=True,
        transactional_id=f"bench-{name}",
        batch_size=1000,
        idle_exit_s=20,
        consumer_config={"fetch.wait.max.ms": 20},
        **settings,
    )
    runner = Runner(config, handle)
    runner.run()
    if state["count"] < records:
        raise RuntimeError(f"{name}: handled {state['count']} of {records}")
    return records / (time.perf_counter() - state["first"])


def run_relay(bootstrap: str, db_url: str, records: int) -> float:
    """Publish the outbox rows the inbox+outbox runs left (at least ``records``)."""
    from onceflow.patterns import Outbox, Relay, RelayConfig

    with connect(db_url) as db:
        outbox = Outbox(db)
        outbox.create_schema()
        backlog = outbox.backlog()
        if backlog < records:
            raise RuntimeError(f"outbox holds {backlog} rows, expected {records}")
        relay = Relay(db, outbox, RelayConfig(bootstrap, batch_size=2000, shards_per_cycle=16))
        started = time.perf_counter()
        while relay.run_once():
            pass
        elapsed = time.perf_counter() - started
        if outbox.backlog():
            raise RuntimeError("relay stopped with a backlog")
    return backlog / elapsed


QUIX_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from quixstreams import Application
    bootstrap, source, target, records, guarantee = sys.argv[1:6]
    records = int(records)
    app = Application(broker_address=bootstrap, consumer_group="quix-" + source,
                      auto_offset_reset="earliest", processing_guarantee=guarantee,
                      loglevel="WARNING", auto_create_topics=False)
    state = {"count": 0, "first": 0.0}
    def count(value):
        if state["count"] == 0:
            state["first"] = time.perf_counter()
        state["count"] += 1
        if state["count"] >= records:
            app.stop()
        return value
    sdf = app.dataframe(app.topic(source, value_deserializer="json"))
    sdf = sdf.apply(count)
    sdf.to_topic(app.topic(target, value_serializer="json"))
    app.run()
    print(json.dumps({"count": state["count"],
                      "rate": state["count"] / (time.perf_counter() - state["first"])}))
    """
)


def quix_python(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    probe = subprocess.run([sys.executable, "-c", "import quixstreams"], capture_output=True)
    if probe.returncode == 0:
        return sys.executable
    own = Path(__file__).resolve().parents[1] / ".venv-quix" / "bin" / "python"  # make bench
    return str(own) if own.exists() else None


def run_quix(python: str, bootstrap: str, name: str, records: int, guarantee: str) -> float:
    source, target = f"in-{name}", f"out-{name}"
    create_topics(bootstrap, [source, target], PARTITIONS)
    produce(bootstrap, source, records)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(QUIX_SCRIPT)
    try:
        result = subprocess.run(
            [python, script.name, bootstrap, source, target, str(records), guarantee],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        os.unlink(script.name)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"quix {guarantee} failed: {result.stderr.strip()[-600:]}")
    return float(json.loads(lines[-1])["rate"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--bootstrap", help="use this broker instead of an embedded one")
    parser.add_argument("--database-url", help="default: a temporary SQLite file")
    parser.add_argument("--quix-python", help="interpreter with quixstreams installed")
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode (median)")
    args = parser.parse_args()

    broker = None
    if args.bootstrap is None:
        from onceflow.testing import temporary_broker

        broker = temporary_broker()
        bootstrap = broker.bootstrap
    else:
        bootstrap = args.bootstrap
    tmp = tempfile.mkdtemp(prefix="onceflow-bench-")
    db_url = args.database_url or f"sqlite:///{tmp}/bench.db"
    n = args.records
    results: dict[str, float | str] = {}

    def measure(label: str, function, *fargs, repeats: int = args.repeats, **fkwargs) -> None:
        """Median of ``repeats`` runs; an argument "@name" becomes a per-run topic name."""
        rates = []
        try:
            for run in range(repeats):
                run_args = [f"{a[1:]}{run}" if isinstance(a, str) and a.startswith("@") else a
                            for a in fargs]  # fmt: skip
                rates.append(function(*run_args, **fkwargs))
            results[label] = statistics.median(rates)
            spread = f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})" if repeats > 1 else ""
            print(f"  {label:<40} {results[label]:>9,.0f} records/s {spread}", flush=True)
        except Exception as error:  # report and go on: one failing mode is a finding
            results[label] = f"failed: {error}"
            print(f"  {label:<40} FAILED: {str(error)[:300]}", flush=True)

    try:
        print(f"records per run: {n}, broker {bootstrap}, database {db_url.split('://')[0]}")
        print("workload db (decode + insert a row):")
        measure("db/at_least_once", run_onceflow, bootstrap, "@db_alo", n, db_url, False,
                processing_guarantee="at_least_once")  # fmt: skip
        measure("db/exactly_once db_offsets", run_onceflow, bootstrap, "@db_off", n, db_url, False,
                pattern="db_offsets")  # fmt: skip
        measure("db/exactly_once inbox", run_onceflow, bootstrap, "@db_inbox", n, db_url, False,
                pattern="inbox")  # fmt: skip
        print("workload kafka (decode + produce to an output topic):")
        measure("kafka/at_least_once", run_onceflow, bootstrap, "@k_alo", n, None, True,
                processing_guarantee="at_least_once")  # fmt: skip
        measure("kafka/exactly_once kafka_transactions", run_onceflow, bootstrap, "@k_txn", n,
                None, True, pattern="kafka_transactions")  # fmt: skip
        measure("kafka/inbox+outbox (db rows)", run_onceflow, bootstrap, "@k_outbox", n,
                db_url, True, pattern="inbox", outbox=True)  # fmt: skip
        measure("relay (outbox -> topic)", run_relay, bootstrap, db_url, n, repeats=1)
        python = quix_python(args.quix_python)
        if python is None:
            print("  quixstreams not found (pip install quixstreams, or --quix-python)")
        else:
            measure("quix/at-least-once", run_quix, python, bootstrap, "@q_alo", n,
                    "at-least-once")  # fmt: skip
            measure("quix/exactly-once", run_quix, python, bootstrap, "@q_eos", n,
                    "exactly-once")  # fmt: skip
    finally:
        if broker is not None:
            broker.stop()

    def ratio(a: str, b: str) -> None:
        x, y = results.get(a), results.get(b)
        if isinstance(x, float) and isinstance(y, float):
            print(f"  {a} / {b}: {x / y:.2f}")
        else:
            print(f"  {a} / {b}: n/a")

    print("ratios:")
    ratio("db/exactly_once db_offsets", "db/at_least_once")
    ratio("db/exactly_once inbox", "db/at_least_once")
    ratio("kafka/exactly_once kafka_transactions", "kafka/at_least_once")
    ratio("kafka/inbox+outbox (db rows)", "kafka/at_least_once")
    ratio("relay (outbox -> topic)", "kafka/at_least_once")
    ratio("kafka/exactly_once kafka_transactions", "quix/exactly-once")
    ratio("kafka/at_least_once", "quix/at-least-once")
    ratio("quix/exactly-once", "quix/at-least-once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
