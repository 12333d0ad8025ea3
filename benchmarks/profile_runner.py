"""Where the Runner's time goes against the hand-written loop: py-spy profiles of both.

    python benchmarks/profile_runner.py [--records 20000] [--top 20] [--keep DIR]

One embedded onceflow broker. For each of the Runner's ``kafka_transactions`` and
``at_least_once`` (kafka workload of benchmarks/patterns.py: decode the JSON event,
produce it to an output topic) and the hand-written confluent-kafka loops of the same
shape, the input topic is filled first (not profiled), then this process is recorded with
py-spy (``--threads --idle``, 200 samples/s: a wall-clock profile, waits included) while
the loop runs; only the samples inside the loop are kept. Time inside
confluent-kafka's C calls is charged to the Python line that made the call (py-spy sees
Python frames), so "consume", "produce", "commit_transaction" in the tables below include
librdkafka's work and the waits for the broker in this thread.

Printed per loop: records/s, samples per thread, the buckets (the client's calls, JSON
decoding, the Runner's per-record work, the rest) and the functions with the most samples
of their own and including callees. Needs py-spy (the ``bench`` extra) and permission to
trace this process.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from patterns import prepare, run_handwritten, run_onceflow
from profile_broker import read_stacks, record, summarize, within

BUCKETS = (
    ("client: consume", ("consume (",)),
    ("client: produce", ("send (", "produce (")),
    ("client: commit / flush / send_offsets", ("commit", "flush", "send_offsets", "begin")),
    ("JSON decode", ("json/", "json_decoder", "decode (")),
    ("Record / Context objects", ("from_message", "Record", "records.py")),
    ("Runner bookkeeping", ("runner_progress", "progress", "crash_points", "reached")),
)

LOOPS = {
    "runner kafka_transactions": (
        run_onceflow,
        (False,),
        {"pattern": "kafka_transactions"},
        "run (onceflow/patterns/runner.py",
    ),
    "hand-written transactional": (run_handwritten, (True,), {}, "run_handwritten"),
    "runner at_least_once": (
        run_onceflow,
        (False,),
        {"processing_guarantee": "at_least_once"},
        "run (onceflow/patterns/runner.py",
    ),
    "hand-written at_least_once": (run_handwritten, (False,), {}, "run_handwritten"),
    "runner kafka_transactions, commit every 100 ms": (
        run_onceflow,
        (False,),
        {"pattern": "kafka_transactions", "commit_interval_ms": 100},
        "run (onceflow/patterns/runner.py",
    ),
    "hand-written transactional, commit every 100 ms": (
        run_handwritten,
        (True,),
        {"interval_ms": 100},
        "run_handwritten",
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--keep", help="copy the raw profiles into this directory")
    args = parser.parse_args()

    from onceflow.testing import temporary_broker

    broker = temporary_broker()
    work = Path(tempfile.mkdtemp(prefix="profile-runner-"))
    try:
        for label, (function, extra, settings, marker) in LOOPS.items():
            name = f"prof{uuid.uuid4().hex[:8]}"
            prepare(broker.bootstrap, name, args.records)
            if function is run_onceflow:
                call_args = (broker.bootstrap, name, args.records, None, True, True)
            else:
                call_args = (broker.bootstrap, name, args.records, *extra, True)
            rate: dict[str, float] = {}
            output = work / f"{label.replace(' ', '-')}.txt"

            def loop(f=function, a=call_args, k=settings, into=rate) -> None:
                into["r"] = f(*a, **k)

            record(os.getpid(), output, loop, idle=True)
            stacks = within(read_stacks(output), marker)
            summarize(f"{label} ({rate['r']:,.0f} records/s)", stacks, args.top, BUCKETS)
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                shutil.copy(output, Path(args.keep) / output.name)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
