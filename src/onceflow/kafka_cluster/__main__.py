"""``python -m onceflow.kafka_cluster``: the same as ``onceflow kafka-cluster``."""

from onceflow.cli.kafka_cluster import kafka_cluster_command

kafka_cluster_command(prog_name="python -m onceflow.kafka_cluster")
