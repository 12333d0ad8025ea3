"""Local SparkSessions map the class archive of Spark's driver classes.

``python -m onceflow.spark.archive_maker`` (``make spark-archive``) records the classes a
session loads; ``local_session`` then starts its driver JVM with ``-XX:SharedArchiveFile``.
The JVM's class-loading log shows where each class came from: Spark's own classes must come
from the archive ("shared objects file (top)", the dynamic archive), not from the jars (a
JVM that cannot use the archive loads them all from the jars, silently).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from onceflow.spark.class_archive import ARCHIVE_OPTION, usable, with_java_option

pytestmark = [pytest.mark.spark]

SESSION = r"""
import sys
from onceflow.spark.session import local_session
spark = local_session("archive-check", config={
    "spark.driver.extraJavaOptions": "-Xlog:class+load=info:file=" + sys.argv[1]})
options = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
print("options", " ".join(str(option) for option in options))
spark.range(10).count()
spark.stop()
"""


def test_a_local_session_loads_sparks_classes_from_the_archive(tmp_path):
    # A process of its own (the maker ends its JVM); `make test` is making it beside the suite.
    made = subprocess.run(
        [sys.executable, "-m", "onceflow.spark.archive_maker"],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    archive = Path(made.stdout.strip().splitlines()[-1])
    assert archive.stat().st_size > 0
    log = tmp_path / "classes.log"
    result = subprocess.run(
        [sys.executable, "-c", SESSION, str(log)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{ARCHIVE_OPTION}{archive}" in result.stdout
    spark_classes = [line for line in log.read_text().splitlines() if " org.apache.spark." in line]
    from_archive = [line for line in spark_classes if "shared objects file (top)" in line]
    from_jars = [line for line in spark_classes if " source: file:" in line]
    # (the rest are lambdas and generated code, defined at run time either way)
    assert len(from_archive) > 3000, len(from_archive)
    assert len(from_jars) < 0.05 * len(from_archive), from_jars[:20]


def test_the_archive_is_added_after_the_callers_options_and_only_where_it_fits():
    settings = {"spark.driver.extraJavaOptions": "-Xmx2g"}
    with_java_option(settings, f"{ARCHIVE_OPTION}/a.jsa")
    assert settings["spark.driver.extraJavaOptions"] == f"-Xmx2g {ARCHIVE_OPTION}/a.jsa"
    assert usable({"spark.driver.extraJavaOptions": "-Xmx2g"})
    assert not usable({"spark.driver.extraClassPath": "/opt/extra.jar"})
    assert not usable({"spark.driver.extraJavaOptions": "-Xshare:off"})
    assert not usable({"spark.driver.extraJavaOptions": f"{ARCHIVE_OPTION}/mine.jsa"})


def test_the_archive_is_never_recorded_in_a_process_with_a_session(spark):
    from onceflow.spark.archive_maker import _record

    with pytest.raises(RuntimeError, match="JVM of its own"):
        _record(Path("/nonexistent/archive.partial"), Path("/nonexistent"))
    assert spark.range(3).count() == 3  # the session goes on
