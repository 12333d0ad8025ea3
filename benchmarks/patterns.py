"""Throughput of the exactly-once patterns against at-least-once, and against Quix Streams.

    python benchmarks/patterns.py [--records 20000] [--database-url URL | --postgres]
                                  [--bootstrap H:P] [--quix-python PATH] [--repeats 3]
                                  [--modes kafka/at_least_once,hand/transactional,...]

Two workloads, each on its own fresh input topic of the same broker (an embedded onceflow
broker unless --bootstrap is given), with the same JSON events:

* ``db``: decode the event, insert one row into a database table. Modes: at_least_once
  (commit after), db_offsets, inbox, inbox + outbox (rows for a relay).
* ``kafka``: decode the event, produce it to an output topic. Modes: at_least_once
  (idempotent producer flushed before the commit), kafka_transactions, inbox + outbox
  (rows written in the database transaction) followed by the relay publishing them, and
  Quix Streams doing the same (``processing_guarantee="at-least-once"`` and
  ``"exactly-once"``), and the **hand-written** confluent-kafka loop (``hand/...``): the
  ceiling any Python framework can reach with this client. It consumes batches of up to
  1,000 records (``consume(1000)``, as the Runner's ``batch_size``), decodes each value
  with ``json.loads`` and produces the raw value with the record's key, then commits the
  batch: ``hand/transactional`` in one Kafka transaction per batch
  (``begin_transaction``, ``send_offsets_to_transaction``, ``commit_transaction``, the
  Runner's kafka_transactions shape), ``hand/at_least_once`` with an idempotent producer
  ``flush()``ed before a synchronous offset ``commit()`` (the Runner's at_least_once
  shape). Nothing else: no error handling, no dead letters, no progress, no crash points.
  The modes ending in ``commit every 100 ms`` (the Runner with ``commit_interval_ms=100``,
  Kafka Streams' default under exactly-once, and the hand-written loops doing the same)
  let the batches of 100 ms share one transaction or one offset commit; Quix Streams
  commits every 5 s by default. Every consumer here (the Runner's, the hand-written
  loops', Quix Streams' through ``consumer_extra_config``) runs with
  ``fetch.queue.backoff.ms=20``: at librdkafka's default of 1 s a consumer whose prefetch
  queue passes 100,000 records stops fetching for up to a second, which decided whole
  runs at random (benchmarks/README.md).

records/s is measured from the first record handled to the end of the run (the final
commit included); each mode runs ``--repeats`` times on fresh topics, the modes
interleaved (every mode once, then every mode again), and the median is kept (the
machine is shared: spreads are printed). Ratios are printed against at_least_once of the
same workload, against Quix Streams and against the hand-written loop. ``--postgres``
starts a throwaway PostgreSQL server as the tests do (``fsync=off``) for the db
workload. Quix Streams runs in its own interpreter (``--quix-python``, default: this
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
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

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


def prepare(bootstrap: str, name: str, records: int) -> None:
    """Topics ``in-NAME`` (filled with ``records`` events) and ``out-NAME``."""
    create_topics(bootstrap, [f"in-{name}", f"out-{name}"], PARTITIONS)
    produce(bootstrap, f"in-{name}", records)


def run_onceflow(
    bootstrap: str,
    name: str,
    records: int,
    db_url: str | None,
    produce_out: bool,
    prepared: bool = False,
    **settings,
) -> float:
    topic = f"in-{name}"
    if not prepared:
        prepare(bootstrap, name, records)
    if db_url is not None:
        with connect(db_url) as db:
            db.script([f"DROP TABLE IF EXISTS rows_{name}",
                       f"CREATE TABLE rows_{name} (event_id TEXT, n INTEGER)"])  # fmt: skip
    count, first = 0, 0.0  # the handler's own bookkeeping, as cheap as the hand-written loop's
    runner: Runner
    insert, target = f"INSERT INTO rows_{name} (event_id, n) VALUES (?, ?)", f"out-{name}"

    def handle(record, ctx) -> None:
        nonlocal count, first
        if not count:
            first = time.perf_counter()
        event = record.value
        if ctx.tx is not None:
            ctx.tx.execute(insert, (event["id"], event["n"]))
        if produce_out:
            ctx.produce(target, record.raw_value, record.key)
        count += 1
        if count == records:
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
    if count < records:
        raise RuntimeError(f"{name}: handled {count} of {records}")
    return records / (time.perf_counter() - first)


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


def run_handwritten(
    bootstrap: str,
    name: str,
    records: int,
    transactional: bool,
    prepared: bool = False,
    interval_ms: int = 0,
) -> float:
    """The plain confluent-kafka consume-decode-produce-commit loop (the Python ceiling);
    with ``interval_ms`` the batches of that interval share one commit."""
    source, target = f"in-{name}", f"out-{name}"
    if not prepared:
        prepare(bootstrap, name, records)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"hand-{name}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 20,  # as the Runner runs in this benchmark
            "fetch.queue.backoff.ms": 20,  # as the Runner's consumer (see runner.py)
        }
    )
    settings: dict[str, object] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    if transactional:
        settings["transactional.id"] = f"hand-{name}"
    else:
        settings.update({"enable.idempotence": True, "acks": "all"})
    producer = Producer(settings)
    if transactional:
        producer.init_transactions(30)
    consumer.assign([TopicPartition(source, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    send, poll, decode = producer.produce, producer.poll, json.loads
    handled = 0
    first = 0.0
    deadline = time.monotonic() + 600
    opened = 0.0  # when the batches not committed yet began (0: none)
    ends: dict[int, int] = {}
    try:
        while handled < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"hand-written {name}: handled {handled} of {records}")
            messages = consumer.consume(1000, 1.0)
            if not messages:
                continue
            if not first:
                first = time.perf_counter()
            if not opened:
                opened = time.monotonic()
                if transactional:
                    producer.begin_transaction()
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(f"hand-written {name}: {message.error()}")
                raw = message.value()
                decode(raw)
                while True:
                    try:
                        send(target, raw, message.key())
                        break
                    except BufferError:
                        poll(0.005)
                ends[message.partition()] = message.offset() + 1
            handled += len(messages)
            if handled < records and (time.monotonic() - opened) * 1000 < interval_ms:
                continue
            offsets = [TopicPartition(source, p, o) for p, o in ends.items()]
            opened, ends = 0.0, {}
            if transactional:
                producer.send_offsets_to_transaction(
                    offsets, consumer.consumer_group_metadata(), 30
                )
                producer.commit_transaction(30)
            else:
                if producer.flush(30):
                    raise RuntimeError(f"hand-written {name}: flush timed out")
                consumer.commit(offsets=offsets, asynchronous=False)
        elapsed = time.perf_counter() - first
    finally:
        consumer.close()
    return handled / elapsed


QUIX_SCRIPT = textwrap.dedent(
    """
    import json, shutil, sys, tempfile, time
    from quixstreams import Application
    bootstrap, source, target, records, guarantee = sys.argv[1:6]
    records = int(records)
    app = Application(broker_address=bootstrap, consumer_group="quix-" + source,
                      auto_offset_reset="earliest", processing_guarantee=guarantee,
                      consumer_extra_config={"fetch.queue.backoff.ms": 20},
                      loglevel="WARNING", auto_create_topics=False,
                      state_dir=(state_dir := tempfile.mkdtemp(prefix="quix-state-")))
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
    shutil.rmtree(state_dir, ignore_errors=True)
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
    prepare(bootstrap, name, records)
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


def start_postgres() -> tuple[str, object]:
    """A throwaway PostgreSQL server, started as the tests start one (fsync=off)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.postgres import PostgresServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL binaries not found: give --database-url or ONCEFLOW_PG_BIN")
    server = PostgresServer(bin_dir).start()
    return server.create_database(), server


INTERVAL_MS = 100
INTERVAL = f"commit every {INTERVAL_MS} ms"
RATIOS = (
    ("db/exactly_once db_offsets", "db/at_least_once"),
    ("db/exactly_once inbox", "db/at_least_once"),
    ("kafka/exactly_once kafka_transactions", "kafka/at_least_once"),
    ("kafka/inbox+outbox (db rows)", "kafka/at_least_once"),
    ("relay (outbox -> topic)", "kafka/at_least_once"),
    ("kafka/exactly_once kafka_transactions", "quix/exactly-once"),
    ("kafka/exactly_once kafka_transactions", "hand/transactional"),
    ("kafka/at_least_once", "quix/at-least-once"),
    ("kafka/at_least_once", "hand/at_least_once"),
    ("hand/transactional", "quix/exactly-once"),
    ("quix/exactly-once", "quix/at-least-once"),
    (f"kafka/exactly_once kafka_transactions {INTERVAL}", "quix/exactly-once"),
    (f"kafka/exactly_once kafka_transactions {INTERVAL}", f"hand/transactional {INTERVAL}"),
    (f"kafka/at_least_once {INTERVAL}", "quix/at-least-once"),
    (f"kafka/at_least_once {INTERVAL}", f"hand/at_least_once {INTERVAL}"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--bootstrap", help="use this broker instead of an embedded one")
    parser.add_argument("--database-url", help="default: a temporary SQLite file")
    parser.add_argument(
        "--postgres", action="store_true", help="start a throwaway PostgreSQL server for it"
    )
    parser.add_argument("--quix-python", help="interpreter with quixstreams installed")
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode (median)")
    parser.add_argument("--modes", help="comma-separated mode labels to run (default: all)")
    args = parser.parse_args()

    broker = None
    postgres = None
    if args.bootstrap is None:
        from onceflow.testing import temporary_broker

        broker = temporary_broker()
        bootstrap = broker.bootstrap
    else:
        bootstrap = args.bootstrap
    tmp = tempfile.mkdtemp(prefix="onceflow-bench-")
    if args.postgres:
        db_url, postgres = start_postgres()
    else:
        db_url = args.database_url or f"sqlite:///{tmp}/bench.db"
    n = args.records
    results: dict[str, float | str] = {}
    rates: dict[str, list[float]] = {}
    python = quix_python(args.quix_python)

    # label -> (function, arguments; "@name" becomes a per-run topic name, keyword arguments)
    modes: dict[str, tuple] = {
        "db/at_least_once": (run_onceflow, (bootstrap, "@db_alo", n, db_url, False),
                             {"processing_guarantee": "at_least_once"}),
        "db/exactly_once db_offsets": (run_onceflow, (bootstrap, "@db_off", n, db_url, False),
                                       {"pattern": "db_offsets"}),
        "db/exactly_once inbox": (run_onceflow, (bootstrap, "@db_inbox", n, db_url, False),
                                  {"pattern": "inbox"}),
        "kafka/at_least_once": (run_onceflow, (bootstrap, "@k_alo", n, None, True),
                                {"processing_guarantee": "at_least_once"}),
        "kafka/exactly_once kafka_transactions": (
            run_onceflow, (bootstrap, "@k_txn", n, None, True), {"pattern": "kafka_transactions"}
        ),
        "kafka/inbox+outbox (db rows)": (run_onceflow, (bootstrap, "@k_outbox", n, db_url, True),
                                         {"pattern": "inbox", "outbox": True}),
        "hand/at_least_once": (run_handwritten, (bootstrap, "@h_alo", n, False), {}),
        "hand/transactional": (run_handwritten, (bootstrap, "@h_txn", n, True), {}),
        # Kafka Streams' default commit.interval.ms under exactly-once: 100 ms
        f"kafka/at_least_once {INTERVAL}": (
            run_onceflow, (bootstrap, "@k_alo_i", n, None, True),
            {"processing_guarantee": "at_least_once", "commit_interval_ms": INTERVAL_MS}),
        f"kafka/exactly_once kafka_transactions {INTERVAL}": (
            run_onceflow, (bootstrap, "@k_txn_i", n, None, True),
            {"pattern": "kafka_transactions", "commit_interval_ms": INTERVAL_MS}),
        f"hand/at_least_once {INTERVAL}": (
            run_handwritten, (bootstrap, "@h_alo_i", n, False), {"interval_ms": INTERVAL_MS}),
        f"hand/transactional {INTERVAL}": (
            run_handwritten, (bootstrap, "@h_txn_i", n, True), {"interval_ms": INTERVAL_MS}),
    }  # fmt: skip
    if python is not None:
        modes["quix/at-least-once"] = (
            run_quix,
            (python, bootstrap, "@q_alo", n, "at-least-once"),
            {},
        )
        quix_eos = (python, bootstrap, "@q_eos", n, "exactly-once")
        modes["quix/exactly-once"] = (run_quix, quix_eos, {})
    chosen = [m.strip() for m in args.modes.split(",")] if args.modes else [*modes, "relay"]
    unknown = [m for m in chosen if m not in modes and m != "relay"]
    if unknown:
        raise SystemExit(f"unknown modes {unknown}; choose from {[*modes, 'relay']}")

    def run_one(label: str, run: int) -> None:
        function, fargs, fkwargs = modes[label]
        run_args = [f"{a[1:]}{run}" if isinstance(a, str) and a.startswith("@") else a
                    for a in fargs]  # fmt: skip
        try:
            rates.setdefault(label, []).append(function(*run_args, **fkwargs))
            print(f"  run {run + 1}: {label:<40} {rates[label][-1]:>9,.0f} records/s", flush=True)
        except Exception as error:  # report and go on: one failing mode is a finding
            results[label] = f"failed: {error}"
            print(f"  run {run + 1}: {label:<40} FAILED: {str(error)[:300]}", flush=True)

    try:
        print(
            f"records per run: {n}, broker {bootstrap}, database {db_url.split('://')[0]}, "
            f"machine load at start: {load()}",
            flush=True,
        )
        if python is None:
            print("  quixstreams not found (pip install quixstreams, or --quix-python)")
        for run in range(args.repeats):
            for label in chosen:
                if label in modes and not str(results.get(label, "")).startswith("failed"):
                    run_one(label, run)
        if "relay" in chosen:
            try:
                rates["relay (outbox -> topic)"] = [run_relay(bootstrap, db_url, n)]
            except Exception as error:
                results["relay (outbox -> topic)"] = f"failed: {error}"
    finally:
        if broker is not None:
            broker.stop()
        if postgres is not None:
            postgres.stop()

    print("medians (workload db: decode + insert a row; kafka: decode + produce to a topic):")
    for label, values in rates.items():
        if label not in results:
            results[label] = statistics.median(values)
            spread = ", ".join(f"{r:,.0f}" for r in values)
            print(f"  {label:<40} {results[label]:>9,.0f} records/s (runs: {spread})")
    for label, value in results.items():
        if isinstance(value, str):
            print(f"  {label:<40} {value[:300]}")

    print("ratios:")
    for a, b in RATIOS:
        x, y = results.get(a), results.get(b)
        if isinstance(x, float) and isinstance(y, float):
            paired = ""
            if len(rates.get(a, [])) == len(rates.get(b, [])) > 1:  # run r of both: same round
                within = [p / q for p, q in zip(rates[a], rates[b], strict=True)]
                paired = (f" (within rounds median {statistics.median(within):.2f},"
                          f" {min(within):.2f}-{max(within):.2f})")  # fmt: skip
            print(f"  {a} / {b}: {x / y:.2f}{paired}")
        elif a in chosen and b in chosen:
            print(f"  {a} / {b}: n/a")
    print(f"machine load at end: {load()}")
    return 0


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


if __name__ == "__main__":
    sys.exit(main())
