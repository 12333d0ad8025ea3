"""How fast a streaming query on a Python data source starts, with and without the launcher.

    python benchmarks/spark_query_start.py [--sessions 2] [--queries 4] [--load 0]

Every streaming query on a Python data source makes Spark start one Python process of its
own (the source runner), which must connect back within a fixed 10 seconds. Spark puts its
``pyspark.zip`` first on that process's ``PYTHONPATH``, so it compiles pyspark from source
each time; ``onceflow.spark.worker_python`` gives local sessions a launcher that imports the
installed, byte-compiled pyspark instead.

For each of ``--sessions`` rounds, one local SparkSession per variant (plain interpreter,
then the launcher) is started in a subprocess, warmed up with a batch job, then runs
``--queries`` AvailableNow queries of a one-row Python streaming source into the ``noop``
sink, one after the other; each query is timed from ``start()`` to its end. ``--load N``
runs N busy-looping processes meanwhile (a loaded machine, as CI or a busy laptop is).
Prints the median per variant, the first query's time, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager

QUERY_TIMES = r"""
import json, os, sys, time
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from onceflow.spark.session import local_session

class OneRow(DataSourceStreamReader):
    def initialOffset(self): return {"offset": 0}
    def latestOffset(self): return {"offset": 1}
    def partitions(self, start, end): return [InputPartition(0)]
    def read(self, partition): yield (1,)
    def commit(self, end): pass

class OneRowSource(DataSource):
    @classmethod
    def name(cls): return "one_row"
    def schema(self): return "x int"
    def streamReader(self, schema): return OneRow()

spark = local_session("query-start", python=sys.argv[3])
spark.dataSource.register(OneRowSource)
spark.range(10).count()
times = []
for i in range(int(sys.argv[1])):
    started = time.monotonic()
    query = (spark.readStream.format("one_row").load().writeStream.format("noop")
             .option("checkpointLocation", os.path.join(sys.argv[2], f"cp-{i}"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    times.append(time.monotonic() - started)
print(json.dumps(times))
spark.stop()
"""


def query_times(python: str, queries: int) -> list[float]:
    with tempfile.TemporaryDirectory() as work:
        result = subprocess.run(
            [sys.executable, "-c", QUERY_TIMES, str(queries), work, python],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


@contextmanager
def busy_processes(count: int):
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> None:
    from onceflow.spark.worker_python import worker_python

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--queries", type=int, default=4)
    parser.add_argument("--load", type=int, default=0, help="busy-looping processes")
    args = parser.parse_args()
    variants = {"pyspark.zip (Spark's default)": sys.executable, "launcher": worker_python()}
    if variants["launcher"] == sys.executable:
        sys.exit("the launcher is not available here (not POSIX, or pyspark not installed)")
    times: dict[str, list[float]] = {name: [] for name in variants}
    firsts: dict[str, list[float]] = {name: [] for name in variants}
    with busy_processes(args.load):
        for _ in range(args.sessions):
            for name, python in variants.items():
                run = query_times(python, args.queries)
                firsts[name].append(run[0])
                times[name] += run
    load = os.getloadavg()[0]
    print(f"query start to end, {args.sessions} sessions x {args.queries} queries, "
          f"{args.load} busy processes, load {load:.1f}")  # fmt: skip
    for name in variants:
        print(
            f"  {name:32} median {statistics.median(times[name]):5.2f} s   "
            f"first query median {statistics.median(firsts[name]):5.2f} s"
        )
    plain, fast = (statistics.median(times[name]) for name in variants)
    print(f"  ratio (zip / launcher): {plain / fast:.2f}")


if __name__ == "__main__":
    main()
