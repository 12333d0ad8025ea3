"""One way to start a SparkSession for onceflow jobs on this machine, data sources registered.

    from onceflow.spark.session import local_session
    spark = local_session("my-job")                       # local[2], loopback, UI off
    spark = local_session("orders", master=args.master, shuffle_partitions=4, loopback=False)

Used by the example pipeline, the tests, the chaos matrix's Spark job and the benchmark;
each passes what it needs on top (a cluster master, executor settings, time zone).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from onceflow.spark import register
from onceflow.spark.class_archive import (
    ARCHIVE_OPTION,
    QUIET,
    existing_archive,
    java_binary,
    usable,
    with_java_option,
)
from onceflow.spark.compiler_priority import CompilerPriority
from onceflow.spark.fork_client import SERVER_VARIABLE
from onceflow.spark.fork_server import start_fork_server
from onceflow.spark.scratch import scratch_dir
from onceflow.spark.worker_python import worker_python


def java_home() -> str | None:
    """``JAVA_HOME``, else the installation of the ``java`` on ``PATH``; None without Java."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    if java is None:
        return None
    return os.path.dirname(os.path.dirname(os.path.realpath(java)))


def _names(python: str, *paths: str) -> bool:
    """``python`` (a path, or a name on ``PATH``) is one of ``paths``."""
    found = shutil.which(python)
    return found is not None and os.path.abspath(found) in {os.path.abspath(p) for p in paths}


def local_session(
    app_name: str,
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 2,
    loopback: bool = True,
    python: str | None = None,
    config: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
    class_archive: bool = True,
    fork_server: bool = True,
) -> SparkSession:
    """The SparkSession of this process (``getOrCreate``), with onceflow registered.

    ``python`` is the interpreter of Spark's Python workers (``PYSPARK_PYTHON``); by
    default, or when it names this interpreter, this one, which has onceflow, through
    ``worker_python``'s launcher (workers import the installed, byte-compiled pyspark).
    ``loopback`` binds the driver to 127.0.0.1 (tests, benchmarks; a driver a real cluster
    must reach cannot). ``config`` adds or overrides Spark settings. The Spark UI and the
    console progress bar are off.
    ``class_archive``: the driver JVM maps the class archive of Spark's classes when one
    was made (``python -m onceflow.spark.archive_maker``; it starts in about half the time).
    ``fork_server``: on a local master, Spark's Python processes are forked from a server
    that imported pyspark, pyarrow and onceflow while the JVM started (``fork_server.py``),
    instead of each starting an interpreter and importing them.
    On a local master the driver JVM's optimizing (C2) compiler threads run at a lower CPU
    priority than the job's threads (``compiler_priority.py``;
    ``ONCEFLOW_SPARK_COMPILER_NICE=0`` leaves them alone).
    On a local master the driver's temporary files go to a folder of this process's own,
    removed by a later session once this process has ended, even by SIGKILL
    (``scratch.py``; a ``spark.local.dir`` or ``-Djava.io.tmpdir`` given in ``config``
    wins).
    """
    found = java_home()
    if found is not None:
        os.environ.setdefault("JAVA_HOME", found)
    launcher = worker_python()
    if python is None or _names(python, sys.executable, launcher):
        python = launcher
    os.environ["PYSPARK_PYTHON"] = python
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
    }
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if fork_server and python == launcher != sys.executable and master.startswith("local"):
        server = start_fork_server()
        if server is not None:
            settings[f"spark.executorEnv.{SERVER_VARIABLE}"] = server
    settings.update(config or {})
    scratch = scratch_dir() if master.startswith("local") else None
    if scratch is not None:
        settings.setdefault("spark.local.dir", str(scratch))
        if "-Djava.io.tmpdir=" not in settings.get("spark.driver.extraJavaOptions", ""):
            with_java_option(settings, f"-Djava.io.tmpdir={scratch}")
    archive = existing_archive(java_binary(found)) if class_archive else None
    if archive is not None and usable(settings):
        with_java_option(settings, f"{ARCHIVE_OPTION}{archive} {QUIET}")
    builder = SparkSession.builder.master(master).appName(app_name)
    for name, value in settings.items():
        builder = builder.config(name, value)
    compiler = CompilerPriority.start() if master.startswith("local") else None
    try:
        spark = builder.getOrCreate()
    finally:
        if compiler is not None:  # (no JVM after a failed start: the watcher then stops)
            compiler.session_started(_driver_jvm_pid())
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark


def _driver_jvm_pid() -> int | None:
    """The pid of the driver JVM this process started (None: it joined one, or Spark
    Connect)."""
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    return getattr(process, "pid", None)
