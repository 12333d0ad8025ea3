"""The chaos worker: one process the harness starts, SIGKILLs at a step, and starts again.

    python -m onceflow.chaos.worker article FLOW --bootstrap H:P --database-url URL ...
    python -m onceflow.chaos.worker runner MODE --bootstrap H:P --database-url URL ...

``article`` runs one of the seed article's flows step by step (``flows.py``); ``runner``
runs onceflow's ``Runner`` with one processing guarantee or pattern and a handler that
inserts one ``entities`` row per event and, where the mode produces, sends the event on.

Faults are armed through the environment by the fault engine (``onceflow.faults``):
``ONCEFLOW_CRASH_AT=STEP:N`` (SIGKILL the N-th time STEP is reached, see
``onceflow.crash_points``) and ``ONCEFLOW_PAUSE_AT=STEP:N`` with ``ONCEFLOW_PAUSE_DIR``
(wait there, so the harness can kill the broker, cut the network or lock the database at
exactly that point). Exits 0 when idle.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from onceflow.chaos.flows import FLOWS, ArticleFlow, FlowSettings, entities_ddl
from onceflow.crash_points import CrashPoints
from onceflow.db import connect
from onceflow.patterns import Record, Runner, RunnerConfig
from onceflow.patterns.runner import Context

DEBUG_VAR = "ONCEFLOW_CHAOS_CLIENT_DEBUG"  # librdkafka debug contexts, e.g. "eos,protocol"
GROUP_PROTOCOL_VAR = "ONCEFLOW_CHAOS_GROUP_PROTOCOL"  # the consumers' group.protocol

RUNNER_MODES: dict[str, dict[str, Any]] = {
    "at_most_once": {"processing_guarantee": "at_most_once"},
    "at_least_once": {"processing_guarantee": "at_least_once"},
    "db_offsets": {"pattern": "db_offsets"},
    "inbox": {"pattern": "inbox"},
    "inbox_outbox": {"pattern": "inbox", "outbox": True},
    "kafka_transactions": {"pattern": "kafka_transactions"},
}
RUNNER_PRODUCES = frozenset({"at_most_once", "at_least_once", "inbox_outbox",
                             "kafka_transactions"})  # fmt: skip
RUNNER_WITHOUT_DATABASE = frozenset({"kafka_transactions"})


def crash_points() -> CrashPoints:
    return CrashPoints.from_env()  # crash and pause points, armed by the fault engine


def client_debug() -> dict[str, str]:
    debug = os.environ.get(DEBUG_VAR)
    return {"debug": debug} if debug else {}


def consumer_settings() -> dict[str, str]:
    protocol = os.environ.get(GROUP_PROTOCOL_VAR)
    return {**client_debug(), **({"group.protocol": protocol} if protocol else {})}


def run_article(args: argparse.Namespace) -> int:
    settings = FlowSettings(
        bootstrap=args.bootstrap,
        input_topic=args.input,
        output_topic=args.output,
        group=args.group,
        transactional_id=args.transactional_id,
        rest_url=args.rest_url,
        idle_exit_s=args.idle_exit,
        consumer_config=consumer_settings(),
    )
    with connect(args.database_url, lock_timeout_ms=args.lock_timeout_ms) as db:
        return ArticleFlow(args.name, settings, db, crash_points()).run()


def run_runner(args: argparse.Namespace) -> int:
    mode = args.name
    produces = mode in RUNNER_PRODUCES
    database_url = None if mode in RUNNER_WITHOUT_DATABASE else args.database_url

    def handle(record: Record, ctx: Context) -> None:
        event = record.value
        if ctx.tx is not None:
            ctx.tx.execute(
                "INSERT INTO entities (event_id, key, n) VALUES (?, ?, ?)",
                (str(event["id"]), event.get("key"), event.get("n")),
            )
        if produces:
            ctx.produce(args.output, json.dumps(event).encode(), key=record.key)

    if database_url is not None:
        with connect(database_url) as db:
            db.script([entities_ddl(db)])
    config = RunnerConfig(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        topics=[args.input],
        database_url=database_url,
        assign=True,
        transactional_id=args.transactional_id,
        batch_size=args.batch_size,
        idle_exit_s=args.idle_exit,
        lock_timeout_ms=args.lock_timeout_ms,
        statement_timeout_ms=max(args.lock_timeout_ms * 2, 5_000),
        max_poll_interval_ms=60_000,
        retry_backoff_s=0.3,
        consumer_config={"fetch.wait.max.ms": 50, **consumer_settings()},
        producer_config=client_debug(),
        **RUNNER_MODES[mode],
    )
    return Runner(config, handle, crash_points()).run().processed


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m onceflow.chaos.worker")
    parser.add_argument("kind", choices=("article", "runner"))
    parser.add_argument("name", help=f"flow ({', '.join(FLOWS)}) or runner mode "
                                     f"({', '.join(RUNNER_MODES)})")  # fmt: skip
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--input", default="input")
    parser.add_argument("--output", default="output")
    parser.add_argument("--group", default="chaos")
    parser.add_argument("--transactional-id", default="chaos-txn")
    parser.add_argument("--rest-url", default="")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--idle-exit", type=float, default=2.0)
    parser.add_argument("--lock-timeout-ms", type=int, default=10_000)
    args = parser.parse_args(argv)
    known = FLOWS if args.kind == "article" else RUNNER_MODES
    if args.name not in known:
        parser.error(f"unknown {args.kind} {args.name!r}; known: {', '.join(known)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    processed = run_article(args) if args.kind == "article" else run_runner(args)
    print(json.dumps({"processed": processed}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
