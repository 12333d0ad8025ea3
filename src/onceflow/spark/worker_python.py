"""The Python that local Spark sessions start their workers with.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's
``PYTHONPATH``. Python cannot cache compiled code for modules imported from a zip, so each
worker Spark starts on its own (not forked from its daemon) compiles pyspark again. The
streaming source runner of every Python data source query is such a worker, and Spark gives
it a fixed 10 seconds to connect back: on a loaded machine the compile alone takes that long
("Python worker failed to connect back", the query dies at start).

When the interpreter has pyspark installed as a package (``pip install pyspark``: the same
files as the zip, byte-compiled), a three-line launcher that drops the zip from
``PYTHONPATH`` and execs the interpreter lets those workers import the installed copy
(``benchmarks/spark_query_start.py`` measures the difference).

When a fork server runs (``fork_server.py``; local sessions start one), the launcher hands
Spark's ``-m pyspark...`` processes to its client, which has them forked from the server's
preloaded interpreter instead of starting one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

LAUNCHER = """#!/bin/sh
# onceflow: workers import the installed pyspark (byte-compiled) instead of pyspark.zip.
set -f
kept=
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in
    */python/lib/pyspark.zip) ;;
    *) kept="${{kept:+$kept:}}$entry" ;;
  esac
done
PYTHONPATH=$kept
export PYTHONPATH
case "$ONCEFLOW_SPARK_FORK_SERVER:$1:$2" in
  ?*:-m:pyspark.*) exec {python} -I -S {client} "$@" ;;
esac
exec {python} "$@"
"""
FORK_CLIENT = Path(__file__).with_name("fork_client.py")


def pyspark_is_installed() -> bool:
    """This interpreter imports pyspark from a plain package directory (not a zip)."""
    try:
        import pyspark
    except ImportError:
        return False
    return Path(pyspark.__file__).parent.is_dir()


def worker_python(python: str = sys.executable, cache_dir: Path | None = None) -> str:
    """A ``PYSPARK_PYTHON`` for local sessions: ``python`` itself where the launcher cannot
    help (not POSIX, pyspark not installed as a package, no writable or executable cache
    directory)."""
    if os.name != "posix" or not pyspark_is_installed():
        return python
    script = LAUNCHER.format(python=shlex.quote(python), client=shlex.quote(str(FORK_CLIENT)))
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    directory = cache_dir or Path.home() / ".cache" / "onceflow"
    launcher = directory / f"worker-python-{digest}"
    if launcher.exists():
        return str(launcher)
    partial = launcher.with_name(f"{launcher.name}.{os.getpid()}.tmp")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        partial.write_text(script)
        partial.chmod(0o755)
        subprocess.run([str(partial), "-c", ""], check=True, timeout=60)  # not on noexec
        partial.replace(launcher)  # atomic: concurrent sessions see a whole file or none
    except (OSError, subprocess.SubprocessError):
        with contextlib.suppress(OSError):  # also when the directory could not be made
            partial.unlink()
        return python
    return str(launcher)
