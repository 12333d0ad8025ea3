"""``onceflow transactions``: list, describe and find hanging transactions.

librdkafka's admin client has no transaction APIs, so this speaks ListTransactions,
DescribeTransactions and DescribeProducers directly. It works against onceflow's broker
and against a Kafka cluster (it asks every broker listed in the cluster metadata).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import click
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from rich.console import Console
from rich.table import Table

from onceflow.protocol.client import WireClient


@dataclass
class ClusterView:
    brokers: dict[int, str]
    leaders: dict[tuple[str, int], int]


def cluster_view(bootstrap: str, topics: list[str] | None = None) -> ClusterView:
    with WireClient(bootstrap) as client:
        wanted = (
            None
            if topics is None
            else tuple(MetadataRequestTopic(topic_id=None, name=t) for t in topics)
        )
        metadata = client.request(
            MetadataRequest,
            topics=wanted,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
    leaders = {
        (topic.name, partition.partition_index): partition.leader_id
        for topic in metadata.topics
        for partition in topic.partitions
        if topic.error_code == ErrorCode.none
    }
    return ClusterView(brokers, leaders)


def list_transactions(bootstrap: str, states: tuple[str, ...] = ()) -> list[tuple[str, int, str]]:
    view = cluster_view(bootstrap, [])
    found = []
    for address in view.brokers.values():
        with WireClient(address) as client:
            response = client.request(
                ListTransactionsRequest,
                state_filters=states,
                producer_id_filters=(),
                duration_filter=-1,
            )
        found += [
            (s.transactional_id, s.producer_id, s.transaction_state)
            for s in response.transaction_states
        ]
    return sorted(found)


def describe_transactions(bootstrap: str, transactional_ids: list[str]):
    view = cluster_view(bootstrap, [])
    states = {}
    for address in view.brokers.values():
        with WireClient(address) as client:
            response = client.request(
                DescribeTransactionsRequest, transactional_ids=tuple(transactional_ids)
            )
        for state in response.transaction_states:
            if state.error_code == ErrorCode.none:
                states[state.transactional_id] = state
    return states


def describe_producers(bootstrap: str, topic: str):
    view = cluster_view(bootstrap, [topic])
    by_leader: dict[int, list[int]] = {}
    for (name, partition), leader in view.leaders.items():
        if name == topic:
            by_leader.setdefault(leader, []).append(partition)
    rows = []
    for leader, partitions in by_leader.items():
        with WireClient(view.brokers[leader]) as client:
            response = client.request(
                DescribeProducersRequest,
                topics=(TopicRequest(name=topic, partition_indexes=tuple(sorted(partitions))),),
            )
        for topic_response in response.topics:
            for partition in topic_response.partitions:
                for producer in partition.active_producers:
                    rows.append((partition.partition_index, producer))
    return sorted(rows, key=lambda row: (row[0], row[1].producer_id))


@click.group("transactions")
def transactions_command() -> None:
    """Inspect transactions: list, describe, and find hanging ones."""


@transactions_command.command("list")
@click.option("--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT.")
@click.option(
    "--state",
    "states",
    multiple=True,
    help="Only transactions in this state (Ongoing, PrepareCommit, ...). Repeatable.",
)
def list_command(bootstrap: str, states: tuple[str, ...]) -> None:
    """List transactional ids with their producer id and state."""
    table = Table("transactional.id", "producer id", "state")
    for transactional_id, producer_id, state in list_transactions(bootstrap, states):
        table.add_row(transactional_id, str(producer_id), state)
    Console().print(table)


@transactions_command.command("describe")
@click.option("--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT.")
@click.argument("transactional_ids", nargs=-1, required=True)
def describe_command(bootstrap: str, transactional_ids: tuple[str, ...]) -> None:
    """Show state, epoch, timeout and partitions of transactional ids."""
    states = describe_transactions(bootstrap, list(transactional_ids))
    table = Table(
        "transactional.id", "state", "producer id", "epoch", "timeout ms", "open for", "partitions"
    )
    now = int(time.time() * 1000)
    for transactional_id in transactional_ids:
        state = states.get(transactional_id)
        if state is None:
            table.add_row(transactional_id, "[red]not found[/red]", "", "", "", "", "")
            continue
        started_ms = int(state.transaction_start_time.timestamp() * 1000)
        open_for = (
            f"{(now - started_ms) / 1000:.1f}s"
            if started_ms > 0 and state.transaction_state == "Ongoing"
            else ""
        )
        partitions = ", ".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
        table.add_row(
            transactional_id,
            state.transaction_state,
            str(state.producer_id),
            str(state.producer_epoch),
            str(int(state.transaction_timeout.total_seconds() * 1000)),
            open_for,
            partitions,
        )
    Console().print(table)


@transactions_command.command("producers")
@click.option("--bootstrap", required=True, help="Kafka bootstrap servers, HOST:PORT.")
@click.argument("topic")
def producers_command(bootstrap: str, topic: str) -> None:
    """Active producers per partition of TOPIC, with open transactions marked.

    A producer with an open transaction (current txn start offset >= 0) holds the last
    stable offset back: read_committed consumers wait until it commits, aborts or times
    out. Open transactions whose producer id is not ongoing at any coordinator are hanging.
    """
    rows = describe_producers(bootstrap, topic)
    ongoing = {pid for _, pid, state in list_transactions(bootstrap) if state == "Ongoing"}
    table = Table(
        "partition", "producer id", "epoch", "last sequence", "txn start offset", "status"
    )
    for partition, producer in rows:
        status = ""
        if producer.current_txn_start_offset >= 0:
            status = "open" if producer.producer_id in ongoing else "[red]hanging[/red]"
        table.add_row(
            str(partition),
            str(producer.producer_id),
            str(producer.producer_epoch),
            str(producer.last_sequence),
            str(producer.current_txn_start_offset),
            status,
        )
    Console().print(table)
