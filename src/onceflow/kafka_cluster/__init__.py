"""Apache Kafka on demand: a KRaft cluster of real Kafka nodes from Maven's jars, no Docker.

``KafkaCluster(nodes=3).start()`` (or ``with KafkaCluster() as cluster:``) fetches the
pinned release's jars once (``jars.py``), starts combined broker+controller nodes on
loopback and returns when every node serves Metadata. ``onceflow kafka-cluster`` (or
``python -m onceflow kafka-cluster``) runs one until Ctrl-C; the pytest plugin's
``apache_kafka_cluster`` fixture shares one per test session. See docs/kafka-cluster.md.
This package is below the CLI: it does not run the command itself.
"""

from onceflow.kafka_cluster.cluster import KafkaCluster
from onceflow.kafka_cluster.errors import KafkaClusterError
from onceflow.kafka_cluster.jars import KAFKA_VERSION, cache_dir, classpath, ensure_jars
from onceflow.kafka_cluster.node import KafkaNode
from onceflow.kafka_cluster.probe import coordinator_partition
from onceflow.kafka_cluster.secured import SecuredListener
from onceflow.kafka_cluster.settings import default_properties

__all__ = [
    "KAFKA_VERSION",
    "KafkaCluster",
    "KafkaClusterError",
    "KafkaNode",
    "SecuredListener",
    "cache_dir",
    "classpath",
    "coordinator_partition",
    "default_properties",
    "ensure_jars",
]
