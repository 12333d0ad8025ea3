"""A class-data-sharing archive of the Spark driver's classes, so local sessions start faster.

A local SparkSession spends most of its start in the driver JVM loading and verifying the
classes of Spark's jars. Java's dynamic CDS archive (``-XX:ArchiveClassesAtExit``) records
them once from a session that ran a streaming query on a Python data source and a Python
sink and then exited cleanly; later JVMs map it (``-XX:SharedArchiveFile``). On a 2-core
machine ``local_session`` took 8.6 s without it and 4.8 s with it, the first micro-batch
of a query 4.0 s and 2.6 s (benchmarks/spark_session_start.py, benchmarks/README.md).

An archive is only valid for the same JVM binary and the same jars at the same place (the
JVM compares each jar's path, size and time: a reinstalled venv needs a new archive), so its
name is a digest of these; a JVM that finds it does not match ignores it, silently. Making
one is optional and done once per installation::

    python -m onceflow.spark.archive_maker      # prints the archive's path

``make spark-archive`` (run by ``make demo`` and ``make test``) does it; ``local_session``
uses an archive that exists and never waits for one to be made.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from onceflow.cds_archive import used

ARCHIVE_OPTION = "-XX:SharedArchiveFile="
RECORD_OPTION = "-XX:ArchiveClassesAtExit="
QUIET = "-Xlog:cds*=off"  # the classes CDS cannot keep (signed jars, ...), one line each


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "onceflow" / "spark-cds"


def spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def java_binary(java_home: str | None) -> Path | None:
    if java_home is None:
        return None
    binary = Path(java_home) / "bin" / "java"
    return binary.resolve() if binary.is_file() else None


def archive_path(java: Path) -> Path:
    """Where the archive of this JVM binary and this pyspark's jars is (or would be)."""
    stat = java.stat()
    folder = spark_jars()  # the JVM checks the class path: each jar's place, size and time
    jars = sorted(
        (entry.name, stat.st_size, stat.st_mtime_ns)
        for entry in folder.glob("*.jar")
        for stat in (entry.stat(),)
    )
    key = f"{java}:{stat.st_size}:{stat.st_mtime_ns}:{folder}:{jars}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / f"spark-driver-{digest}.jsa"


def existing_archive(java: Path | None) -> Path | None:
    if java is None:
        return None
    with contextlib.suppress(OSError):
        path = archive_path(java)
        if path.is_file():
            return used(path)
    return None


def with_java_option(settings: dict[str, str], option: str) -> None:
    """Add ``option`` to the driver's JVM options, after any the caller gave."""
    given = settings.get("spark.driver.extraJavaOptions", "").strip()
    settings["spark.driver.extraJavaOptions"] = f"{given} {option}".strip()


def usable(settings: dict[str, str]) -> bool:
    """An archive records one class path: one the caller extends cannot use it."""
    options = settings.get("spark.driver.extraJavaOptions", "")
    return (
        not settings.get("spark.driver.extraClassPath")
        and ARCHIVE_OPTION not in options
        and RECORD_OPTION not in options
        and "-Xshare" not in options
    )
