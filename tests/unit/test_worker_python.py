"""The local sessions' worker launcher: Spark's pyspark.zip off PYTHONPATH, the rest kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from onceflow.spark.worker_python import worker_python

pytestmark = pytest.mark.skipif(os.name != "posix", reason="a POSIX shell launcher")

SPARK_ZIP = "/opt/spark/python/lib/pyspark.zip"
PY4J_ZIP = "/opt/spark/python/lib/py4j-0.10.9.9-src.zip"


def run(launcher: str, code: str, pythonpath: str) -> str:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run(
        [launcher, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_the_launcher_drops_only_sparks_zip(tmp_path):
    launcher = worker_python(cache_dir=tmp_path)
    assert launcher != sys.executable and Path(launcher).parent == tmp_path
    path = f"{SPARK_ZIP}:/data/my libs:{PY4J_ZIP}:*"  # a space and a glob stay as they are
    code = "import os, sys; print(os.environ['PYTHONPATH']); print(sys.executable)"
    seen, executable = run(launcher, code, path).splitlines()
    assert seen == f"/data/my libs:{PY4J_ZIP}:*"
    assert Path(executable).resolve() == Path(sys.executable).resolve()


def test_workers_import_the_installed_pyspark(tmp_path):
    import pyspark

    zip_path = Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"
    if not zip_path.exists():
        pytest.skip("this pyspark has no pyspark.zip")
    launcher = worker_python(cache_dir=tmp_path)
    where = run(launcher, "import pyspark; print(pyspark.__file__)", str(zip_path))
    assert where == pyspark.__file__
    plain = run(sys.executable, "import pyspark; print(pyspark.__file__)", str(zip_path))
    assert "pyspark.zip" in plain  # what Spark's workers import without the launcher


def test_the_launcher_is_written_once(tmp_path):
    first = worker_python(cache_dir=tmp_path)
    assert worker_python(cache_dir=tmp_path) == first
    assert [p.name for p in tmp_path.iterdir()] == [Path(first).name]


def test_no_launcher_without_a_usable_directory(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert worker_python(cache_dir=blocked / "cache") == sys.executable
