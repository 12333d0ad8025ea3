"""A pattern worker the pattern tests run as a process and SIGKILL (crash points by env).

Usage: python -m tests.integration.pattern_worker MODE BOOTSTRAP DB_URL [options]

Consumes ``input`` (JSON events {"id", "key", "n"}), inserts one row per processed event
into ``effects`` (in the pattern's database transaction) and, for modes that produce,
sends the event to ``output``. Undecodable values go to ``dlq``. Exits 0 when idle.
``--input``, ``--output`` and ``--dlq`` rename the topics (a shared cluster needs names
unique per test).

MODE:
  baseline          at_least_once, no deduplication (the article's first flow)
  alo_produce       at_least_once, output topic only, no database
  at_most_once      commit before processing
  inbox             exactly_once, idempotent consumer
  db_offsets        exactly_once, offsets stored in the database transaction
  inbox_outbox      exactly_once, idempotent consumer + transactional outbox (relay apart)
  db_offsets_outbox exactly_once, database offsets + transactional outbox
  kafka_txn         exactly_once, Kafka transactions (output topic only, no database)
  unsafe_inbox_txn  inbox + Kafka transactions with the override (can lose events)
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import json
import logging
import signal
import sys
import time

from onceflow.patterns import Record, Runner, RunnerConfig
from onceflow.patterns.runner import Context

MODES = {
    "baseline": {"processing_guarantee": "at_least_once"},
    "alo_produce": {"processing_guarantee": "at_least_once"},
    "at_most_once": {"processing_guarantee": "at_most_once"},
    "inbox": {"pattern": "inbox"},
    "db_offsets": {"pattern": "db_offsets"},
    "inbox_outbox": {"pattern": "inbox", "outbox": True},
    "db_offsets_outbox": {"pattern": "db_offsets", "outbox": True},
    "kafka_txn": {"pattern": "kafka_transactions"},
    "unsafe_inbox_txn": {
        "pattern": "kafka_transactions",
        "inbox": True,
        "allow_unsafe_inbox_with_kafka_transactions": True,
    },
}
PRODUCES = {"inbox_outbox", "db_offsets_outbox", "kafka_txn", "unsafe_inbox_txn", "alo_produce"}
USES_DB = set(MODES) - {"kafka_txn", "alo_produce"}

EFFECTS_DDL = {
    "sqlite": "CREATE TABLE IF NOT EXISTS effects (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " event_id TEXT NOT NULL, key TEXT, n INTEGER)",
    "postgresql": "CREATE TABLE IF NOT EXISTS effects (seq BIGINT GENERATED ALWAYS AS IDENTITY"
    " PRIMARY KEY, event_id TEXT NOT NULL, key TEXT, n INTEGER)",
}


def build(args: argparse.Namespace) -> Runner:
    mode = args.mode
    settings = dict(MODES[mode])

    def handle(record: Record, ctx: Context) -> None:
        event = record.value
        if not isinstance(event, dict) or "id" not in event:
            raise ValueError(f"not an event: {event!r}")
        if args.slow_ms:
            time.sleep(args.slow_ms / 1000)
        if ctx.tx is not None:
            ctx.tx.execute(
                "INSERT INTO effects (event_id, key, n) VALUES (?, ?, ?)",
                (event["id"], event.get("key"), event.get("n")),
            )
        if mode in PRODUCES:
            ctx.produce(args.output, json.dumps(event).encode(), key=record.key)

    config = RunnerConfig(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        topics=[args.input],
        database_url=args.db if mode in USES_DB else None,
        assign=args.assign,
        transactional_id=args.txn_id,
        dead_letter_topic=args.dlq,
        batch_size=args.batch_size,
        idle_exit_s=args.idle_exit,
        commit_interval_ms=args.commit_interval_ms,
        max_poll_interval_ms=60_000,
        consumer_config={
            "session.timeout.ms": 6000,
            "fetch.wait.max.ms": 50,
            # static membership: a restarted worker takes its predecessor's place at once
            **({"group.instance.id": args.instance} if args.instance else {}),
        },
        **settings,
    )
    runner = Runner(config, handle)
    if config.database_url is not None:
        from onceflow.db import connect

        with connect(config.database_url) as db:
            db.script([EFFECTS_DDL[db.dialect]])
    return runner


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("bootstrap")
    parser.add_argument("db")
    parser.add_argument("--group", default="workers")
    parser.add_argument("--txn-id", default="worker-txn")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--idle-exit", type=float, default=3.0)
    parser.add_argument("--commit-interval-ms", type=int, default=0)
    parser.add_argument("--assign", action="store_true", help="assign, not subscribe")
    parser.add_argument("--slow-ms", type=float, default=0, help="sleep per record")
    parser.add_argument("--instance", default="worker-1",
                        help="group.instance.id ('': a dynamic member)")  # fmt: skip
    parser.add_argument("--input", default="input", help="topic consumed")
    parser.add_argument("--output", default="output", help="topic produced to")
    parser.add_argument("--dlq", default="dlq", help="dead-letter topic")
    args = parser.parse_args(argv)
    faulthandler.register(signal.SIGUSR1)  # a test can ask where a stuck worker is
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    stats = build(args).run()
    print(json.dumps({"stats": dataclasses.asdict(stats)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
