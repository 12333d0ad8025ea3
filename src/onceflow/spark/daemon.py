"""Spark's Python daemon for executors that run onceflow, on any cluster.

    spark.python.daemon.module=onceflow.spark.daemon

An executor starts one Python daemon (``pyspark.daemon``) and forks a worker from it for
each task slot; a worker then imports pyarrow, confluent-kafka and onceflow at its first
task, and PySpark's daemon runs a full ``gc.collect()`` after every task a reused worker
runs, walking every object of those imports each time. This daemon imports them once,
moves them out of the garbage collector's reach (``gc.freeze``), and then runs PySpark's
own daemon: its workers start with the modules loaded and collect only what their tasks
made. On a local master ``local_session``'s fork server does the same for every Python
process of the session (``fork_server.py``).
"""

from __future__ import annotations


def main() -> None:
    from onceflow.spark.fork_server import preload

    preload()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
