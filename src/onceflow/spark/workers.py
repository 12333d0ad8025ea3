"""Will Spark's Python workers find onceflow? Checked when the data sources are registered.

Spark starts its Python workers (executors, and the driver's data source planners) with
``spark.pyspark.python`` / ``PYSPARK_PYTHON``, by default ``python3`` from ``PATH``, which
is not the virtual environment a user ran their job from. Without this check the first
sign is a ``ModuleNotFoundError`` some 15 seconds into the query, inside a Spark traceback.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import warnings
from typing import Any

from onceflow.spark.worker_python import worker_python

log = logging.getLogger(__name__)


class PythonWorkerWarning(UserWarning):
    """Spark's Python workers would not be able to import onceflow."""


def _same_interpreter(python: str) -> bool:
    """``python`` is this interpreter, or the launcher local sessions start it with."""
    found = shutil.which(python)
    if found is None:
        return False
    ours = {os.path.realpath(sys.executable), os.path.realpath(worker_python())}
    return os.path.realpath(found) in ours


def worker_problem(python: str, master: str, timeout_s: float = 30.0) -> str | None:
    """Why workers started as ``python`` under ``master`` cannot import onceflow, or None.

    Only checked for local masters (workers on this machine); on a cluster every node
    needs onceflow installed for its own interpreter, which this machine cannot see.
    """
    if not master.startswith("local") or _same_interpreter(python):
        return None
    try:
        result = subprocess.run(
            [python, "-c", "import onceflow.spark"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        reason = f"it cannot be run ({error})"
    else:
        if result.returncode == 0:
            return None
        lines = result.stderr.strip().splitlines()
        reason = f"it cannot import onceflow ({lines[-1] if lines else 'no output'})"
    return (
        f"Spark's Python workers run {python!r}, and {reason}: every onceflow query would "
        f"fail. Set PYSPARK_PYTHON={sys.executable} (or the Spark setting "
        "spark.pyspark.python) before the SparkSession is created, or install onceflow "
        f"for {python!r}."
    )


def warn_if_workers_lack_onceflow(spark: Any) -> str | None:
    """Warn (PythonWorkerWarning and a log line) if local Python workers lack onceflow."""
    context = getattr(spark, "sparkContext", None)
    if context is None:  # Spark Connect: workers run on the server
        return None
    problem = worker_problem(context.pythonExec, context.master)
    if problem is not None:
        log.warning("%s", problem)
        warnings.warn(problem, PythonWorkerWarning, stacklevel=3)
    return problem
