"""The broker's Prometheus metrics, named as the Prometheus JMX exporter's Kafka rules
(``example_configs/kafka-2_0_0.yml``, ``lowercaseOutputName``) name Kafka's own MBeans, so
that Kafka dashboards and alerts work unchanged; ``onceflow_*`` where Kafka has none.

Kafka MBean -> series here (all names lower case, as the exporter writes them):

* ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec[,topic=T]`` ->
  ``kafka_server_brokertopicmetrics_messagesin_total{topic}``; BytesIn, BytesOut,
  TotalProduceRequests, TotalFetchRequests, FailedProduceRequests, FailedFetchRequests
  the same way (without ``topic``: all topics);
* ``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=R,version=V`` ->
  ``kafka_network_requestmetrics_requests_total{request,version}``;
  ``name=TotalTimeMs,request=R`` -> ``kafka_network_requestmetrics_totaltimems{request,
  quantile}`` and ``..._count``;
* ``kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs`` -> the fsyncs, the same way;
* ``kafka.log:type=Log,name=Size|LogStartOffset|LogEndOffset|NumLogSegments,topic,
  partition`` -> ``kafka_log_log_size{topic,partition}`` ...;
* ``kafka.server:type=ReplicaManager,name=PartitionCount|LeaderCount|OfflineReplicaCount``,
  ``kafka.controller:type=KafkaController,name=OfflinePartitionsCount|
  ActiveControllerCount|GlobalTopicCount|GlobalPartitionCount``;
* ``kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups[State]|NumOffsets``
  -> ``kafka_coordinator_group_groupmetadatamanager_numgroups`` ...;
* ``kafka.server:type=socket-server-metrics,listener=L,networkProcessor=N``
  ``connection-count`` -> ``kafka_server_socket_server_metrics_connection_count``.

onceflow's own: ``onceflow_log_partition_last_stable_offset``, ``..._high_watermark`` and
``onceflow_log_partition_unstable_records`` (high watermark minus LSO: what
read_committed consumers cannot see yet), ``onceflow_log_partition_offline``, and the
transaction coordinator's ``onceflow_transactions{state}``,
``onceflow_transactions_completed_total{result}`` and
``onceflow_transactions_oldest_open_seconds``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.samples import Sample

from onceflow.coordinator.group_metadata import GroupState
from onceflow.coordinator.transaction_metadata import TxnState
from onceflow.timings import Timings

if TYPE_CHECKING:
    from onceflow.broker.core import BrokerCore

TOPIC_COUNTERS = {  # BrokerTopicMetrics name (without PerSec) -> TopicCounters field
    "messagesin": "messages_in",
    "bytesin": "bytes_in",
    "bytesout": "bytes_out",
    "totalproducerequests": "produce_requests",
    "totalfetchrequests": "fetch_requests",
    "failedproducerequests": "failed_produce_requests",
    "failedfetchrequests": "failed_fetch_requests",
}
GROUP_STATES = {  # GroupMetadataManager gauge -> the classic state it counts
    "numgroupsstable": GroupState.STABLE,
    "numgroupspreparingrebalance": GroupState.PREPARING_REBALANCE,
    "numgroupscompletingrebalance": GroupState.COMPLETING_REBALANCE,
    "numgroupsempty": GroupState.EMPTY,
    "numgroupsdead": GroupState.DEAD,
}
OPEN = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
QUANTILE_LABELS = {0.5: "0.50", 0.75: "0.75", 0.95: "0.95", 0.98: "0.98", 0.99: "0.99",
                   0.999: "0.999"}  # the exporter's "0.$N" of each NthPercentile  # fmt: skip


def families(broker: BrokerCore) -> list[Metric]:
    """Every series, read from the broker's state now (on its event loop)."""
    return [
        *_topic_counters(broker),
        *_requests(broker),
        *_logs(broker),
        *_groups(broker),
        *_transactions(broker),
        *_connections(broker),
    ]


def _gauge(name: str, text: str, value: float, **labels: str) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, text, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def _timer(
    name: str, text: str, keys: list[str], timings: Iterable[tuple[list[str], Timings]]
) -> Metric:
    """A Yammer timer as the exporter renders it, ``name{quantile}`` and ``name_count``
    (in ms), as the Prometheus summary it emulates (with ``name_sum`` too)."""
    family = SummaryMetricFamily(name, text, labels=keys)
    for values, timing in timings:
        family.add_metric(values, timing.count, timing.sum * 1000)
        for quantile, seconds in timing.quantiles().items():
            labels = {**dict(zip(keys, values, strict=True)), "quantile": QUANTILE_LABELS[quantile]}
            family.samples.append(Sample(name, labels, seconds * 1000))
    return family


def _topic_counters(broker: BrokerCore) -> Iterator[Metric]:
    topics = broker.metrics.topics
    for name, field in TOPIC_COUNTERS.items():
        family = CounterMetricFamily(
            f"kafka_server_brokertopicmetrics_{name}", f"BrokerTopicMetrics {name}",
            labels=["topic"],
        )  # fmt: skip
        every = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", "")
        for topic, counters in topics.items():
            if topic is None:
                every.add_metric([], getattr(counters, field))
            else:
                family.add_metric([topic], getattr(counters, field))
        family.samples.extend(every.samples)  # one family: with and without the topic
        yield family


def _requests(broker: BrokerCore) -> Iterator[Metric]:
    metrics = broker.metrics
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests", "Requests served, by API and version",
        labels=["request", "version"],
    )  # fmt: skip
    for (name, version), count in sorted(metrics.requests.items()):
        requests.add_metric([name, str(version)], count)
    yield requests
    yield _timer(
        "kafka_network_requestmetrics_totaltimems",
        "Milliseconds from a request read to its answer, recent ones", ["request"],
        (([name], timing) for name, timing in sorted(metrics.request_times.items())),
    )  # fmt: skip
    yield _timer(
        "kafka_log_logflushstats_logflushrateandtimems", "Milliseconds per log fsync", [],
        [([], broker.logs.group_commit.fsync_times)],
    )  # fmt: skip


def _logs(broker: BrokerCore) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    series = {
        "kafka_log_log_size": ("Bytes on disk", lambda p: p.size_bytes()),
        "kafka_log_log_logstartoffset": ("First offset", lambda p: p.log_start_offset),
        "kafka_log_log_logendoffset": ("Next offset to write", lambda p: p.log_end_offset),
        "kafka_log_log_numlogsegments": ("Segment files", lambda p: len(p.segments)),
        "onceflow_log_partition_high_watermark": (
            "Offset below which records are durable", lambda p: p.high_watermark),
        "onceflow_log_partition_last_stable_offset": (
            "Offset read_committed consumers read up to (first open transaction's first)",
            lambda p: p.last_stable_offset),
        "onceflow_log_partition_unstable_records": (
            "High watermark minus LSO: records read_committed consumers wait for",
            lambda p: p.high_watermark - p.last_stable_offset),
        "onceflow_log_partition_offline": (
            "1 while the partition is offline (corrupt acknowledged data, storage error)",
            lambda p: 1 if p.offline else 0),
    }  # fmt: skip
    made = {name: GaugeMetricFamily(name, text, labels=labels)
            for name, (text, _) in series.items()}  # fmt: skip
    partitions = [p for p in broker.logs.all_partitions() if not p.deleted]
    offline = 0
    for partition in partitions:
        key = [partition.topic, str(partition.partition)]
        offline += bool(partition.offline)
        for name, (_, read) in series.items():
            made[name].add_metric(key, _safely(read, partition))
    yield from made.values()
    count = len(partitions)
    topics = len(broker.logs.topics)
    yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions here", count)
    yield _gauge("kafka_server_replicamanager_leadercount", "Partitions led here", count)
    yield _gauge("kafka_server_replicamanager_offlinereplicacount", "Offline replicas", offline)
    yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                 "Partitions below their replication factor (one broker: none)", 0)  # fmt: skip
    yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                 "Partitions without a leader", offline)  # fmt: skip
    yield _gauge("kafka_controller_kafkacontroller_activecontrollercount",
                 "1 on the active controller (a single broker is its own)", 1)  # fmt: skip
    yield _gauge("kafka_controller_kafkacontroller_globaltopiccount", "Topics", topics)
    yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions", count)


def _safely(read: Any, partition: Any) -> float:
    """A partition's figure, NaN for one that cannot answer (offline, closing)."""
    try:
        return float(read(partition))
    except Exception:
        return float("nan")


def _groups(broker: BrokerCore) -> Iterator[Metric]:
    groups = list(broker.groups.groups.values())
    states = Counter(group.state for group in groups if group.consumer is None)
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    yield _gauge(f"{prefix}numgroups", "Consumer groups",
                 sum(1 for g in groups if not g.is_(GroupState.DEAD)))  # fmt: skip
    for name, state in GROUP_STATES.items():
        yield _gauge(f"{prefix}{name}", f"Classic groups {state.value}", states[state])
    yield _gauge(f"{prefix}numoffsets", "Committed offsets",
                 sum(len(group.offsets) for group in groups))  # fmt: skip
    consumer = Counter(g.consumer.state for g in groups if g.consumer is not None)
    family = GaugeMetricFamily(
        "kafka_server_group_coordinator_metrics_consumer_group_count",
        "KIP-848 consumer groups by state", labels=["state"],
    )  # fmt: skip
    for state, count in sorted(consumer.items()):
        family.add_metric([state.lower()], count)
    yield family


def _transactions(broker: BrokerCore) -> Iterator[Metric]:
    coordinator = broker.transactions
    now_ms = time.time() * 1000
    by_state = Counter(txn.state for txn in coordinator.transactions.values())
    family = GaugeMetricFamily("onceflow_transactions", "Transactional ids by state",
                               labels=["state"])  # fmt: skip
    for state in TxnState:
        family.add_metric([state.value], by_state[state])
    yield family
    completed = CounterMetricFamily(
        "onceflow_transactions_completed", "Transactions completed since the broker started",
        labels=["result"],
    )  # fmt: skip
    done = coordinator.completion.completed
    completed.add_metric(["commit"], done[True])
    completed.add_metric(["abort"], done[False])
    yield completed
    starts = [txn.start_ms for txn in coordinator.transactions.values()
              if txn.state in OPEN and txn.start_ms > 0]  # fmt: skip
    oldest = (now_ms - min(starts)) / 1000 if starts else 0.0
    yield _gauge("onceflow_transactions_oldest_open_seconds",
                 "Age of the oldest open transaction (what holds an LSO back)", oldest)  # fmt: skip


def _connections(broker: BrokerCore) -> Iterator[Metric]:
    family = GaugeMetricFamily(
        "kafka_server_socket_server_metrics_connection_count", "Open connections",
        labels=["listener", "networkprocessor"],
    )  # fmt: skip
    quotas = getattr(broker, "quotas", None)
    open_by_listener = quotas.by_listener() if quotas is not None else {}
    for listener in broker.listeners:
        family.add_metric([listener.name, "0"], open_by_listener.get(listener.name, 0))
    yield family
