"""Readers that turn topics and database tables into audit inputs and sinks.

``topics`` reads a topic from its log start to the last stable offset of each partition;
``markers`` decides from the log itself which offsets belong to aborted transactions;
``events`` makes input events, dead letters and output-topic sinks of them; ``tables``
reads a database table or query as a sink.
"""

from onceflow.verify.sources.errors import SourceError, SourceNotAuthorized, SourceNotFound
from onceflow.verify.sources.events import (
    InputRead,
    read_dead_letters,
    read_input,
    read_output_topic,
)
from onceflow.verify.sources.markers import TransactionOutcomes, transaction_outcomes
from onceflow.verify.sources.tables import read_table
from onceflow.verify.sources.topics import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Cluster,
    PartitionRange,
    RawRecord,
    client_conf,
    matching_topics,
    read_topic,
    topic_ranges,
)

__all__ = [
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "Cluster",
    "InputRead",
    "PartitionRange",
    "RawRecord",
    "SourceError",
    "SourceNotAuthorized",
    "SourceNotFound",
    "TransactionOutcomes",
    "client_conf",
    "matching_topics",
    "read_dead_letters",
    "read_input",
    "read_output_topic",
    "read_table",
    "read_topic",
    "topic_ranges",
    "transaction_outcomes",
]
