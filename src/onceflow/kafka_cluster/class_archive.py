"""A class-data-sharing archive of Kafka's classes, so every node's JVM starts faster.

A node normally spends most of its start loading and verifying thousands of classes from
the jars. Java's dynamic CDS archive (``-XX:ArchiveClassesAtExit``) records them once from
one node that started and stopped cleanly; later JVMs map it (``-XX:SharedArchiveFile``).
It is only valid for the same JVM binary and the same jars, so its name is a digest of
both. Making it (:mod:`onceflow.kafka_cluster.archive_maker`) is optional
(``onceflow kafka-cluster --fetch`` does it); without it, or if
the JVM cannot make one, nodes start the slow way.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

from onceflow.cds_archive import used
from onceflow.kafka_cluster import jars


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
            return used(path)
    return None
