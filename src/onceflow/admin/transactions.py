"""Transactions: list, describe, active producers, find hanging ones, abort one.

librdkafka's admin client has no transaction APIs, so this speaks ListTransactions,
DescribeTransactions, DescribeProducers and WriteTxnMarkers directly, with the semantics
of Kafka's ``kafka-transactions`` tool. It works against onceflow's broker and against a
Kafka cluster (it asks every broker listed in the cluster metadata).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from kio.schema.errors import ErrorCode

from onceflow import clock
from onceflow.admin.connect import ClusterSession, not_authorized
from onceflow.admin.errors import AdminError, NotFound
from onceflow.protocol.codec import fields_of

WRITE_TXN_MARKERS = 27
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15  # kafka-transactions find-hanging's default


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None  # None unless a transaction is open
    partitions: list[tuple[str, int]]

    def open_for_ms(self, now_ms: int) -> int | None:
        if self.start_time_ms is None or self.state != "Ongoing":
            return None
        return now_ms - self.start_time_ms


@dataclass(frozen=True, slots=True)
class ProducerState:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int  # -1 without an open transaction

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Cluster:
    brokers: dict[int, str]
    leaders: dict[tuple[str, int], int]
    replicas: dict[tuple[str, int], list[int]]


def cluster(session: ClusterSession, topic: str | None = None) -> Cluster:
    metadata = session.list_topics()
    brokers = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    if topic is not None and (
        topic not in metadata.topics or metadata.topics[topic].error is not None
    ):
        session.require_topics([topic])  # not authorized, or unknown
        raise NotFound(f"topic {topic!r} does not exist")
    leaders, replicas = {}, {}
    for name, described in metadata.topics.items():
        if described.error is not None:
            continue
        for number, partition in described.partitions.items():
            leaders[(name, number)] = partition.leader
            replicas[(name, number)] = list(partition.replicas)
    return Cluster(brokers, leaders, replicas)


def list_transactions(
    session: ClusterSession, states: tuple[str, ...] = (), producer_ids: tuple[int, ...] = ()
) -> list[TransactionListing]:
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest

    found = []
    for node, address in sorted(cluster(session, None).brokers.items()):
        with session.wire(address) as client:
            response = client.request(
                ListTransactionsRequest,
                state_filters=states,
                producer_id_filters=producer_ids,
                duration_filter=-1,
            )
        _check(response.error_code, f"list transactions on broker {node}", session.principal)
        found += [
            TransactionListing(s.transactional_id, s.producer_id, s.transaction_state, node)
            for s in response.transaction_states
        ]
    return sorted(found, key=lambda t: t.transactional_id)


def describe_transactions(
    session: ClusterSession, transactional_ids: list[str]
) -> dict[str, TransactionDescription]:
    """The described ids; ids no coordinator knows are left out."""
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    from onceflow.admin.transaction_wire import DescribeTransactionsResponse

    described = {}
    for address in cluster(session, None).brokers.values():
        with session.wire(address) as client:
            response = client.request(
                DescribeTransactionsRequest,
                decode_as=DescribeTransactionsResponse,
                transactional_ids=tuple(transactional_ids),
            )
        for state in response.transaction_states:
            if ErrorCode(state.error_code).name.upper().endswith("_AUTHORIZATION_FAILED"):
                where = f"describe transaction {state.transactional_id}"
                _check(state.error_code, where, session.principal)
            if state.error_code != ErrorCode.none:
                continue
            start_ms = int(state.transaction_start_time)
            described[state.transactional_id] = TransactionDescription(
                transactional_id=state.transactional_id,
                state=state.transaction_state,
                producer_id=state.producer_id,
                producer_epoch=state.producer_epoch,
                timeout_ms=int(state.transaction_timeout.total_seconds() * 1000),
                start_time_ms=start_ms if start_ms > 0 else None,
                partitions=[(t.topic, p) for t in state.topics for p in t.partitions],
            )
    return described


def describe_producers(
    session: ClusterSession,
    topic: str,
    partitions: list[int] | None = None,
    broker_id: int | None = None,
) -> list[ProducerState]:
    """Active producers of a topic's partitions, asked of each leader (or of ``broker_id``)."""
    view = cluster(session, topic)
    chosen = sorted(p for (name, p) in view.leaders if name == topic)
    if partitions is not None:
        missing = sorted(set(partitions) - set(chosen))
        if missing:
            raise NotFound(f"partition {topic}:{missing[0]} does not exist")
        chosen = sorted(partitions)
    return _producers(session, view, [(topic, p) for p in chosen], broker_id)


def _producers(
    session: ClusterSession,
    view: Cluster,
    partitions: list[tuple[str, int]],
    broker_id: int | None = None,
) -> list[ProducerState]:
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest

    by_broker: dict[int, dict[str, list[int]]] = {}
    for topic, partition in partitions:
        node = broker_id if broker_id is not None else view.leaders[(topic, partition)]
        by_broker.setdefault(node, {}).setdefault(topic, []).append(partition)
    rows = []
    for node, topics in sorted(by_broker.items()):
        if node not in view.brokers:
            raise NotFound(f"broker {node} is not in the cluster")
        with session.wire(view.brokers[node]) as client:
            response = client.request(
                DescribeProducersRequest,
                topics=tuple(
                    TopicRequest(name=t, partition_indexes=tuple(sorted(ps)))
                    for t, ps in sorted(topics.items())
                ),
            )
        for topic_response in response.topics:
            for partition in topic_response.partitions:
                where = f"describe producers of {topic_response.name}:{partition.partition_index}"
                _check(partition.error_code, where, session.principal)
                rows += [
                    ProducerState(
                        topic=topic_response.name,
                        partition=partition.partition_index,
                        **fields_of(
                            p,
                            "producer_id",
                            "producer_epoch",
                            "coordinator_epoch",
                            "last_sequence",
                            "last_timestamp",
                        ),
                        txn_start_offset=p.current_txn_start_offset,
                    )
                    for p in partition.active_producers
                ]
    return sorted(rows, key=lambda r: (r.topic, r.partition, r.producer_id))


@dataclass(frozen=True, slots=True)
class OpenTransactions:
    """The open transactions on the searched partitions, split as find-hanging sees them."""

    hanging: list[ProducerState]
    not_hanging: list[tuple[ProducerState, str]]  # and why it is not listed


def find_open_transactions(
    session: ClusterSession,
    *,
    topic: str | None = None,
    partition: int | None = None,
    broker_id: int | None = None,
    max_transaction_timeout_min: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
    now_ms: int | None = None,
) -> OpenTransactions:
    """Every open transaction on the searched partitions: hanging ones, and the others
    with the reason find-hanging does not list them.

    Candidates are producers with an open transaction whose last write is older than
    ``max_transaction_timeout_min`` (no transaction may legally stay open that long). A
    candidate hangs when no coordinator lists its producer id, when its transactional id
    is not described, or when its coordinator does not count the partition in the
    transaction (so it will never write the marker there).
    """
    if topic is None and broker_id is None:
        raise ValueError("find-hanging needs --topic or --broker-id to limit the search")
    if partition is not None and topic is None:
        raise ValueError("--partition needs --topic")
    view = cluster(session, topic)
    searched = sorted(
        tp
        for tp, replicas in view.replicas.items()
        if (topic is None or tp[0] == topic)
        and (partition is None or tp[1] == partition)
        and (broker_id is None or broker_id in replicas)
    )
    if partition is not None and not searched:
        raise NotFound(f"partition {topic}:{partition} does not exist")
    now_ms = now_ms if now_ms is not None else clock.now_ms()
    limit_ms = max_transaction_timeout_min * 60_000
    open_ones = [
        s for s in _producers(session, view, searched, broker_id) if s.txn_start_offset >= 0
    ]
    if not open_ones:
        return OpenTransactions([], [])
    producer_ids = tuple(sorted({c.producer_id for c in open_ones}))
    ids = {t.producer_id: t.transactional_id for t in list_transactions(session, (), producer_ids)}
    descriptions = describe_transactions(session, sorted(set(ids.values())))
    hanging, not_hanging = [], []
    for state in open_ones:
        transactional_id = ids.get(state.producer_id)
        description = descriptions.get(transactional_id) if transactional_id else None
        known = description is not None and (state.topic, state.partition) in description.partitions
        idle_ms = now_ms - state.last_timestamp
        if idle_ms > limit_ms and not known:
            hanging.append(state)
        elif known:
            assert description is not None
            not_hanging.append((state, _live_reason(description, now_ms)))
        else:
            not_hanging.append(
                (
                    state,
                    f"last written {idle_ms / 1000:.0f} s ago, less than "
                    f"--max-transaction-timeout ({max_transaction_timeout_min} min): a "
                    "producer may still finish it; it is reported as hanging after that "
                    "if no coordinator knows it",
                )
            )
    return OpenTransactions(hanging, not_hanging)


def _live_reason(description: TransactionDescription, now_ms: int) -> str:
    """Why a transaction its coordinator knows is not hanging, and when it ends."""
    who = f"transactional.id {description.transactional_id!r} is {description.state}"
    if description.start_time_ms is None:
        return f"{who}: its coordinator will write the markers"
    deadline_ms = description.start_time_ms + description.timeout_ms
    at = datetime.fromtimestamp(deadline_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    left = max(deadline_ms - now_ms, 0) / 1000
    return (
        f"{who} at its coordinator (transaction.timeout.ms {description.timeout_ms}): the "
        "producer may still finish it, or the coordinator aborts it once that timeout runs "
        f"out, at about {at} (in {left:.0f} s); do not abort it by hand"
    )


def abort_transaction(
    session: ClusterSession,
    topic: str,
    partition: int,
    *,
    start_offset: int | None = None,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    coordinator_epoch: int | None = None,
) -> ProducerState | None:
    """Write an abort marker for one open transaction on one partition (WriteTxnMarkers).

    Identify it by ``start_offset`` (the producer is looked up with DescribeProducers) or
    by producer id, epoch and coordinator epoch. Returns the producer found by offset.
    """
    view = cluster(session, topic)
    if (topic, partition) not in view.leaders:
        raise NotFound(f"partition {topic}:{partition} does not exist")
    found = None
    if start_offset is not None:
        producers = _producers(session, view, [(topic, partition)])
        found = next((p for p in producers if p.txn_start_offset == start_offset), None)
        if found is None:
            raise NotFound(
                f"no open transaction starts at offset {start_offset} on {topic}:{partition}"
            )
        producer_id, producer_epoch = found.producer_id, found.producer_epoch
        coordinator_epoch = found.coordinator_epoch
    elif producer_id is None or producer_epoch is None or coordinator_epoch is None:
        raise ValueError(
            "identify the transaction with --start-offset, or with --producer-id, "
            "--producer-epoch and --coordinator-epoch"
        )
    leader = view.brokers[view.leaders[(topic, partition)]]
    _write_abort_marker(
        session, leader, topic, partition, producer_id, producer_epoch, max(coordinator_epoch, 0)
    )
    return found


def _write_abort_marker(
    session: ClusterSession,
    leader: str,
    topic: str,
    partition: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
) -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from kio.schema.write_txn_markers.v1.request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )

    with session.wire(leader) as client:
        versions = client.request(
            ApiVersionsRequest, client_software_name="onceflow", client_software_version="0"
        )
        if not any(api.api_key == WRITE_TXN_MARKERS for api in versions.api_keys):
            raise AdminError(
                f"the broker at {leader} does not serve WriteTxnMarkers (API key 27), "
                "which aborting a transaction needs"
            )
        response = client.request(
            WriteTxnMarkersRequest,
            markers=(
                WritableTxnMarker(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=False,
                    topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),),
                    coordinator_epoch=coordinator_epoch,
                ),
            ),
        )
    for marker in response.markers:
        for topic_result in marker.topics:
            for result in topic_result.partitions:
                _check(
                    result.error_code,
                    f"abort transaction on {topic}:{partition}",
                    session.principal,
                )


def _check(code: Any, what: str, principal: str | None = None) -> None:
    if code == ErrorCode.none:
        return
    name = ErrorCode(code).name.upper()
    if name.endswith("_AUTHORIZATION_FAILED"):
        raise not_authorized(what, name, principal)
    message = f"{what}: {name}"
    if name in ("UNKNOWN_TOPIC_OR_PARTITION", "TRANSACTIONAL_ID_NOT_FOUND"):
        raise NotFound(message)
    raise AdminError(message)
