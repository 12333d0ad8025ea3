"""Makes the class-data-sharing archive that :mod:`onceflow.kafka_cluster.class_archive`
finds: one node started and stopped cleanly records the classes it loaded."""

from __future__ import annotations

from pathlib import Path

from onceflow.cds_archive import make_once
from onceflow.kafka_cluster import jars
from onceflow.kafka_cluster.class_archive import archive_path
from onceflow.kafka_cluster.cluster import KafkaCluster
from onceflow.kafka_cluster.errors import KafkaClusterError
from onceflow.kafka_cluster.node import FAST_START_OPTIONS


def make_archive(java: str) -> Path | None:
    """Start one node with ``-XX:ArchiveClassesAtExit``, stop it cleanly, keep the archive."""
    jars.ensure_jars()

    def record(partial: Path, work: Path) -> None:
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

    binary = Path(java).resolve()
    return make_once(archive_path(java), record, "onceflow-kafka-cds-", made_from=(binary,))
