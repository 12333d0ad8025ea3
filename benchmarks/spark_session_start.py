"""How fast a local SparkSession starts and runs its first micro-batch, with and without the
class archive of Spark's driver classes (``onceflow.spark.class_archive``).

    python benchmarks/spark_session_start.py [--rounds 3] [--records 3000]

Each round starts one fresh Python process per variant (the archive, then none; the order
alternates between rounds), which times ``local_session()``, then one streaming query of
the onceflow source (``Trigger.AvailableNow``, ``--records`` records on 3 partitions of an
embedded broker) into the ``noop`` sink: the query's wall time from ``start()`` and its
first micro-batch's ``triggerExecution``. A second query of the same session gives the
warm figures. Prints medians per variant and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROUND = r"""
import json, sys, time
from onceflow.spark.session import local_session
bootstrap, topic, work, archive = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
started = time.monotonic()
spark = local_session("session-start", class_archive=archive)
figures = {"session_s": time.monotonic() - started}
for name in ("first", "warm"):
    started = time.monotonic()
    query = (spark.readStream.format("onceflow").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.format("noop").option("checkpointLocation", f"{work}/{name}")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    figures[f"{name}_query_s"] = time.monotonic() - started
    figures[f"{name}_batch_s"] = query.recentProgress[0]["durationMs"]["triggerExecution"] / 1000
spark.stop()
print(json.dumps(figures))
"""


def one_round(bootstrap: str, topic: str, archive: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as work:
        result = subprocess.run(
            [sys.executable, "-c", ROUND, bootstrap, topic, work, "1" if archive else "0"],
            capture_output=True, text=True, check=True, timeout=600,
        )  # fmt: skip
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from onceflow.broker.process import BrokerProcess
    from onceflow.spark.archive_maker import make_archive
    from onceflow.testing import start_broker

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=3000)
    args = parser.parse_args()
    if make_archive() is None:
        sys.exit("no class archive could be made (no Java?)")
    with tempfile.TemporaryDirectory() as data:
        broker = start_broker(BrokerProcess(Path(data)))
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(30)
            producer = Producer({"bootstrap.servers": broker.bootstrap})
            for i in range(args.records):
                producer.produce("orders", value=b"x" * 100, key=str(i).encode(), partition=i % 3)
            producer.flush(30)
            del producer, admin  # closed before the broker stops
            runs: dict[str, list[dict[str, float]]] = {"archive": [], "none": []}
            for number in range(args.rounds):
                order = ("archive", "none") if number % 2 == 0 else ("none", "archive")
                for variant in order:
                    run = one_round(broker.bootstrap, "orders", archive=variant == "archive")
                    runs[variant].append(run)
        finally:
            broker.stop()
    print(f"local_session and first query, {args.rounds} rounds, {args.records} records, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    medians = {
        variant: {key: statistics.median(run[key] for run in found) for key in found[0]}
        for variant, found in runs.items()
    }
    for key in medians["none"]:
        with_archive, without = medians["archive"][key], medians["none"][key]
        print(f"  {key:16} archive {with_archive:6.2f} s   none {without:6.2f} s   "
              f"ratio {with_archive / without:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
