"""Driver-side metadata: which partitions are read and where they start and end.

Uses one confluent-kafka ``AdminClient`` (created lazily, never pickled): Metadata for the
partitions of the subscription, ListOffsets for earliest and latest offsets. Latest
offsets honour the isolation level, so under ``read_committed`` "latest" is the last
stable offset and a micro-batch never includes an open transaction.

Both ride out a leader election, a partition without a leader and a cluster that cannot be
reached for up to the source's ``unavailableTimeoutMs`` (see ``leader_change``); Spark
waits for ``latestOffset`` meanwhile, as it waits for the ListOffsets of its own
connector.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from onceflow.client_errors import error_code
from onceflow.spark.kafka_source.offsets import (
    EARLIEST,
    EARLIEST_OFFSET,
    LATEST,
    LATEST_OFFSET,
    OffsetMap,
    TopicPartition,
)
from onceflow.spark.kafka_source.options import OnceflowOptionError, SourceOptions
from onceflow.spark.leader_change import (
    ATTEMPT_TIMEOUT_S,
    NO_LEADER_ERRORS,
    Patience,
    error_text,
    is_unavailable,
    while_leader_moves,
)

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_MISSING = (
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._UNKNOWN_PARTITION,
)


def tp_name(tp: KafkaTopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


class OffsetReader:
    def __init__(self, options: SourceOptions, timeout: float = 30.0) -> None:
        self.options = options
        self.timeout = timeout
        self._admin: AdminClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_admin"] = None
        return state

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.options.client_config())
        return self._admin

    def close(self) -> None:
        self._admin = None

    # -- partitions ------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """The topic partitions the subscription reads now, in order."""
        subscription = self.options.subscription
        if subscription.kind == "assign":
            return list(subscription.assignment)
        metadata = while_leader_moves(
            self._metadata,
            self.options.unavailable_timeout_s,
            f"metadata of {self.options.bootstrap_servers}",
        )
        result = []
        for name, topic in metadata.topics.items():
            if topic.error is not None or name in INTERNAL_TOPICS:
                continue
            if subscription.matches(name):
                result.extend((name, p) for p in topic.partitions)
        return sorted(result)

    def _metadata(self) -> Any:
        """All topics' metadata; a subscribed topic that the cluster reports with a
        transient error (no leader yet, a broker that is loading) is asked for again."""
        attempt = min(self.timeout, ATTEMPT_TIMEOUT_S, self.options.unavailable_timeout_s)
        metadata = self.admin.list_topics(timeout=attempt)
        for name, topic in metadata.topics.items():
            if topic.error is None or not self.options.subscription.matches(name):
                continue
            error = KafkaException(topic.error)
            if topic.error.code() not in _MISSING and is_unavailable(error):
                self._admin = None  # a new client asks other brokers
                raise error
        return metadata

    # -- offsets ---------------------------------------------------------------------

    def earliest(self, partitions: list[TopicPartition]) -> OffsetMap:
        return self._list_offsets(partitions, OffsetSpec.earliest())

    def latest(self, partitions: list[TopicPartition]) -> OffsetMap:
        return self._list_offsets(partitions, OffsetSpec.latest())

    def _list_offsets(self, partitions: list[TopicPartition], spec: OffsetSpec) -> OffsetMap:
        """Offsets of the partitions that exist; missing ones are left out. A partition
        without a leader (one is being elected, or its replicas' nodes are down) or a
        cluster that does not answer is asked again until it does, for up to
        ``unavailableTimeoutMs``; then ``KafkaUnavailableError`` names the partitions."""
        if not partitions:
            return {}
        isolation = (
            IsolationLevel.READ_COMMITTED
            if self.options.isolation_level == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        attempt = min(self.timeout, ATTEMPT_TIMEOUT_S, self.options.unavailable_timeout_s)
        result: OffsetMap = {}
        pending = list(partitions)
        patience: Patience | None = None
        while pending:
            request = {KafkaTopicPartition(t, p): spec for t, p in pending}
            moving: list[TopicPartition] = []
            missing: dict[TopicPartition, BaseException] = {}
            last: BaseException | None = None
            try:
                futures = self.admin.list_offsets(
                    request, isolation_level=isolation, request_timeout=attempt
                )
            except KafkaException as error:  # the request as a whole was refused
                if not is_unavailable(error, NO_LEADER_ERRORS):
                    raise
                futures, moving, last = {}, list(pending), error
            for tp, future in futures.items():
                try:
                    offset = int(future.result(attempt + 1).offset)
                    if offset < 0:
                        # No error, no offset (-1001): seen on Kafka while the partition's
                        # leader was being replaced.
                        raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE))
                    result[(tp.topic, tp.partition)] = offset
                except (KafkaException, TimeoutError) as error:
                    if error_code(error) in _MISSING:
                        missing[(tp.topic, tp.partition)] = error
                        continue
                    # _NOENT: "Failed to query partition leaders: No leaders found", when
                    # none of the partitions asked for has a leader.
                    if not is_unavailable(error, NO_LEADER_ERRORS):
                        raise
                    moving.append((tp.topic, tp.partition))
                    last = error
            if missing:
                # librdkafka also says _UNKNOWN_PARTITION, and a broker that has not caught
                # up UNKNOWN_TOPIC_OR_PART, about a partition whose leader is moving (seen
                # right after a leader's SIGKILL): only the metadata tells it from a
                # deleted one.
                for tp, error in self._still_there(missing).items():
                    log.info("offsets of %s-%s: %s, though it exists", *tp, error_text(error))
                    moving.append(tp)
                    last = error
            pending = moving
            if pending:
                assert last is not None
                if patience is None:
                    patience = Patience(self.options.unavailable_timeout_s, "")
                patience.what = f"offsets of {', '.join(f'{t}-{p}' for t, p in pending)}"
                # A new client: the old one kept answering -1001 for a minute after the
                # leader it knew was SIGKILLed, while a new one found the new leader.
                self._admin = None
                patience.failed(last)
        if patience is not None:
            patience.succeeded()
        return result

    def _still_there(
        self, missing: dict[TopicPartition, BaseException]
    ) -> dict[TopicPartition, BaseException]:
        """The partitions of ``missing`` that the cluster's metadata still has."""
        self._admin = None  # a new client, with fresh metadata
        metadata = while_leader_moves(
            self._metadata,
            self.options.unavailable_timeout_s,
            f"metadata of {self.options.bootstrap_servers}",
        )
        found = {}
        for (name, partition), error in missing.items():
            topic = metadata.topics.get(name)
            if topic is not None and topic.error is None and partition in topic.partitions:
                found[(name, partition)] = error
        return found

    def resolve(self, spec: Any, partitions: list[TopicPartition], name: str) -> OffsetMap:
        """``earliest``/``latest``/explicit offsets → concrete offsets of ``partitions``."""
        if spec == EARLIEST:
            return self.earliest(partitions)
        if spec == LATEST:
            return self.latest(partitions)
        assert isinstance(spec, dict)
        wanted = set(partitions)
        if self.options.subscription.kind == "subscribePattern":
            wanted = {tp for tp in wanted if tp[0] in {t for t, _ in spec}}
        missing = sorted(wanted - set(spec))
        if missing:
            raise OnceflowOptionError(
                f"option '{name}' with specific offsets must name every partition read; "
                f"missing: {', '.join(f'{t}-{p}' for t, p in missing)} (use -2 for earliest, "
                "-1 for latest)"
            )
        unknown = sorted(set(spec) - set(partitions))
        if unknown:
            raise OnceflowOptionError(
                f"option '{name}' names partitions that do not exist or are not read: "
                f"{', '.join(f'{t}-{p}' for t, p in unknown)}"
            )
        earliest_needed = [tp for tp, o in spec.items() if o == EARLIEST_OFFSET]
        latest_needed = [tp for tp, o in spec.items() if o != EARLIEST_OFFSET]
        earliest = self.earliest(earliest_needed)
        latest = self.latest(latest_needed)
        past_end = [
            f"{t}-{p} offset {o} > end {latest[(t, p)]}"
            for (t, p), o in sorted(spec.items())
            if o >= 0 and (t, p) in latest and o > latest[(t, p)]
        ]
        if past_end:
            raise OnceflowOptionError(
                f"option '{name}' asks for offsets past the end of their partitions: "
                f"{', '.join(past_end)} (use -1 for the end)"
            )
        result: OffsetMap = {}
        for tp, offset in spec.items():
            if offset == EARLIEST_OFFSET:
                if tp in earliest:
                    result[tp] = earliest[tp]
            elif offset == LATEST_OFFSET:
                if tp in latest:
                    result[tp] = latest[tp]
            else:
                result[tp] = offset
        return result
