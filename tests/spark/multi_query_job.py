"""Several streaming queries on the ``onceflow`` source in one SparkSession, as a subprocess.

Like examples/orders/pipeline.py: every query reads the same ``format("onceflow")``
DataFrame and keeps per-store revenue in its own SQLite file through the
``onceflow-database`` sink. All queries start at once. Prints ``started`` and then
``batch NAME ID ROWS`` for each finished micro-batch; exits 1 if a query fails.
test_multi_query_restart.py SIGKILLs it and starts it again.

python tests/spark/multi_query_job.py --bootstrap H:P --topic T --state DIR --queries 3
    [--available-now]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--queries", type=int, default=3)
    parser.add_argument("--max-offsets-per-trigger", default="20")
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args()

    from onceflow.spark.session import local_session
    from tests.spark.sink_helpers import orders_stream, revenue_rows

    spark = local_session("onceflow-multi-query-job")

    orders = orders_stream(
        spark, args.bootstrap, args.topic, maxOffsetsPerTrigger=args.max_offsets_per_trigger
    )
    queries = []
    for i in range(args.queries):
        writer = (
            revenue_rows(orders)
            .writeStream.format("onceflow-database")
            .option("url", f"sqlite:///{args.state}/q{i}.db")
            .option("table", "store_revenue")
            .option("mode", "accumulate")
            .option("keyColumns", "store")
            .option("sinkId", f"q{i}")
            .option("checkpointLocation", f"{args.state}/checkpoint-q{i}")
            .queryName(f"q{i}")
        )
        writer = writer.trigger(availableNow=True) if args.available_now else writer
        queries.append(writer.start())
    print("started", flush=True)

    reported: dict[str, int] = {}
    while any(query.isActive for query in queries):
        for query in queries:
            progress = query.lastProgress
            if progress and progress["batchId"] != reported.get(query.name):
                reported[query.name] = progress["batchId"]
                print(
                    f"batch {query.name} {progress['batchId']} {progress['numInputRows']}",
                    flush=True,
                )
        if any(query.exception() is not None for query in queries):
            break
        time.sleep(0.1)
    failed = [query for query in queries if query.exception() is not None]
    for query in failed:
        print(f"query {query.name} failed: {query.exception()}", file=sys.stderr)
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
