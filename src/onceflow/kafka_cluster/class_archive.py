"""A class-data-sharing archive of Kafka's classes, so every node's JVM starts faster.

A node normally spends most of its start loading and verifying thousands of classes from
the jars. Java's dynamic CDS archive (``-XX:ArchiveClassesAtExit``) records them once from
one node that started and stopped cleanly; later JVMs map it (``-XX:SharedArchiveFile``).
It is only valid for the same JVM binary and the same jars, so its name is a digest of
both. Making it is optional (``onceflow kafka-cluster --fetch`` does it); without it, or if
the JVM cannot make one, nodes start the slow way.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from onceflow.kafka_cluster import jars
from onceflow.kafka_cluster.errors import KafkaClusterError


def archive_path(java: str) -> Path:
    binary = Path(java).resolve()
    stat = binary.stat()
    stamp = (jars.cache_dir() / "libs.complete").read_text(errors="replace").strip()
    key = f"{binary}:{stat.st_size}:{stat.st_mtime_ns}:{stamp}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return jars.cache_dir() / "cds" / f"kafka-{digest}.jsa"


def existing_archive(java: str) -> Path | None:
    with contextlib.suppress(OSError):
        path = archive_path(java)
        if path.is_file():
            return path
    return None


def make_archive(java: str) -> Path | None:
    """Start one node with ``-XX:ArchiveClassesAtExit``, stop it cleanly, keep the archive."""
    from onceflow.kafka_cluster.cluster import KafkaCluster
    from onceflow.kafka_cluster.node import FAST_START_OPTIONS

    jars.ensure_jars()
    target = archive_path(java)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        partial = target.with_suffix(f".partial-{os.getpid()}")
        work = Path(tempfile.mkdtemp(prefix="onceflow-kafka-cds-"))
        cluster = KafkaCluster(
            1,
            directory=work,
            java=java,
            jvm_options=[*FAST_START_OPTIONS, f"-XX:ArchiveClassesAtExit={partial}"],
            class_archive=False,
        )
        try:
            cluster.start()
            cluster.stop(graceful=True)
        except KafkaClusterError:
            cluster.stop(graceful=False)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if not partial.is_file():
            return None
        partial.rename(target)
    return target
