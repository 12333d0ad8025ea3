"""Makes the class-data-sharing archive that :mod:`onceflow.kafka_cluster.class_archive`
finds: one node started and stopped cleanly records the classes it loaded."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

from onceflow.kafka_cluster import jars
from onceflow.kafka_cluster.class_archive import archive_path
from onceflow.kafka_cluster.cluster import KafkaCluster
from onceflow.kafka_cluster.errors import KafkaClusterError
from onceflow.kafka_cluster.node import FAST_START_OPTIONS


def make_archive(java: str) -> Path | None:
    """Start one node with ``-XX:ArchiveClassesAtExit``, stop it cleanly, keep the archive."""
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
