"""Committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete.

OffsetCommit is answered only once its record is durable. Transactional offset commits
(TxnOffsetCommit) are transactional batches that stay pending until the transaction
coordinator writes the COMMIT or ABORT marker (``complete_transaction``).
"""

from __future__ import annotations

from onceflow.clock import Clock
from onceflow.coordinator.consumer_protocol import topic_metadata
from onceflow.coordinator.group_log import GroupLog
from onceflow.coordinator.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    CommittedOffset,
    Group,
    GroupState,
    GroupTable,
    TopicPartition,
)
from onceflow.coordinator.group_records import OffsetValue, offset_key, offset_value
from onceflow.coordinator.group_requests import (
    OffsetCommitRequest,
    OffsetRequest,
    TxnOffsetCommitRequest,
)
from onceflow.log.batch import KeyValue
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode, KafkaError

OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes default
GROUP_NOT_FOUND_SINCE = 9  # OffsetCommit v9+ answers an unknown group GROUP_ID_NOT_FOUND

# (partition, offset, leader epoch, metadata, error), as OffsetFetch answers each partition
FetchedOffset = tuple[TopicPartition, int, int, str, ErrorCode]


class OffsetStore:
    def __init__(self, groups: GroupTable, group_log: GroupLog, logs: LogManager, clock: Clock):
        self.groups = groups
        self.group_log = group_log
        self.logs = logs
        self.clock = clock
        self._txn_groups: dict[int, set[str]] = {}  # producer id -> groups with pending offsets

    # -- checks ---------------------------------------------------------------------------

    def _checked(
        self, offsets: OffsetRequest, error: ErrorCode | None
    ) -> tuple[dict[TopicPartition, ErrorCode], OffsetRequest]:
        """(failures, what passes): every partition fails with the request's ``error`` if
        there is one, else each is checked on its own."""
        results: dict[TopicPartition, ErrorCode] = {}
        if error is not None:
            return dict.fromkeys(offsets, error), {}
        return results, self._check_offsets(offsets, results)

    def _check_offsets(
        self, offsets: OffsetRequest, results: dict[TopicPartition, ErrorCode]
    ) -> OffsetRequest:
        """Per-partition checks; what passes is returned, failures go to ``results``."""
        valid = {}
        for topic_partition, (offset, epoch, metadata) in offsets.items():
            if not self.logs.has_partition(topic_partition):
                results[topic_partition] = ErrorCode.unknown_topic_or_partition
            elif metadata is not None and len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                results[topic_partition] = ErrorCode.offset_metadata_too_large
            else:
                valid[topic_partition] = (offset, epoch, metadata)
        return valid

    def _commit_error(self, group: Group, request: OffsetCommitRequest) -> ErrorCode | None:
        if group.consumer is not None:
            return group.consumer.validate_offset_commit(
                request.member_id, request.generation_id, False, request.api_version
            )
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.is_static_member_fenced(request.group_instance_id, request.member_id):
            return ErrorCode.fenced_instance_id
        if request.generation_id < 0 and group.is_(GroupState.EMPTY):
            return None  # the group only uses Kafka to store offsets
        member = group.members.get(request.member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if request.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        member.last_heartbeat = self.clock.monotonic()
        return None

    @staticmethod
    def _txn_commit_error(group: Group, request: TxnOffsetCommitRequest) -> ErrorCode | None:
        member_id, generation_id = request.member_id, request.generation_id
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.consumer is not None:
            return group.consumer.validate_offset_commit(member_id, generation_id, True, 0)
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return None  # a consumer outside group management, as Kafka allows
        if group.is_static_member_fenced(request.group_instance_id, member_id or ""):
            return ErrorCode.fenced_instance_id
        if member_id and not group.has(member_id):
            return ErrorCode.unknown_member_id
        if generation_id >= 0 and generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return None

    def _offset_records(
        self, group_id: str, offsets: OffsetRequest, timestamp: int
    ) -> list[KeyValue]:
        return [
            KeyValue(
                offset_key(group_id, topic, partition),
                offset_value(OffsetValue(offset, epoch, metadata or "", timestamp)),
            )
            for (topic, partition), (offset, epoch, metadata) in offsets.items()
        ]

    # -- OffsetCommit ---------------------------------------------------------------------

    async def commit(self, request: OffsetCommitRequest) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit: answered once the commit record is durable."""
        group_id, offsets = request.group_id, request.offsets
        if group_id is None:
            return dict.fromkeys(offsets, ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None:
            if request.generation_id >= 0:  # Kafka: GROUP_ID_NOT_FOUND from v9 on
                code = (
                    ErrorCode.group_id_not_found
                    if request.api_version >= GROUP_NOT_FOUND_SINCE
                    else ErrorCode.illegal_generation
                )
                return dict.fromkeys(offsets, code)
            group = self.groups.detached(group_id)  # a group that only stores offsets
        results, valid = self._checked(offsets, self._commit_error(group, request))
        if not valid:
            return results
        self.groups.setdefault(group_id, group)
        timestamp = self.clock.now_ms()
        try:
            appended = self.group_log.append(
                group_id, self._offset_records(group_id, valid, timestamp)
            )
        except KafkaError as error:
            results.update(dict.fromkeys(valid, error.code))
            return results
        for topic_partition in valid:
            group.pending_offset_commits[topic_partition] += 1
        try:
            await appended.durable()
        except KafkaError as error:
            results.update(dict.fromkeys(valid, error.code))
            return results
        finally:
            for topic_partition in valid:
                group.pending_offset_commits[topic_partition] -= 1
                if group.pending_offset_commits[topic_partition] <= 0:
                    del group.pending_offset_commits[topic_partition]
        for delta, (topic_partition, (offset, epoch, metadata)) in enumerate(valid.items()):
            group.apply_offset(
                topic_partition,
                CommittedOffset(
                    offset, epoch, metadata or "", timestamp, appended.base_offset + delta
                ),
            )
            results[topic_partition] = ErrorCode.none
        return results

    # -- TxnOffsetCommit and the transaction's end ---------------------------------------

    async def commit_transactional(
        self, request: TxnOffsetCommitRequest
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: a transactional batch, pending until the transaction ends."""
        group_id, offsets, producer_id = request.group_id, request.offsets, request.producer_id
        if group_id is None:
            return dict.fromkeys(offsets, ErrorCode.invalid_group_id)
        group = self.groups.get(group_id)
        if group is None:
            if request.generation_id >= 0:  # as OffsetCommit: no group has that generation
                return dict.fromkeys(offsets, ErrorCode.illegal_generation)
            group = Group(group_id)
        results, valid = self._checked(offsets, self._txn_commit_error(group, request))
        if not valid:
            return results
        timestamp = self.clock.now_ms()
        records = self._offset_records(group_id, valid, timestamp)
        # May raise KafkaError (a fenced producer epoch): the handler answers it.
        appended = self.group_log.append(group_id, records, producer_id, request.producer_epoch)
        group = self.groups.setdefault(group_id, group)
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        for delta, (topic_partition, (offset, epoch, metadata)) in enumerate(valid.items()):
            pending[topic_partition] = CommittedOffset(
                offset, epoch, metadata or "", timestamp, appended.base_offset + delta
            )
        self._txn_groups.setdefault(producer_id, set()).add(group_id)
        try:
            await appended.durable()
        except KafkaError as error:
            for topic_partition in valid:  # never staged: the record was cut
                pending.pop(topic_partition, None)
            results.update(dict.fromkeys(valid, error.code))
            return results
        results.update(dict.fromkeys(valid, ErrorCode.none))
        return results

    def stage(
        self,
        group: Group,
        producer_id: int,
        topic_partition: TopicPartition,
        committed: CommittedOffset,
    ) -> None:
        """A replayed transactional offset commit, pending until its marker."""
        group.pending_txn_offsets.setdefault(producer_id, {})[topic_partition] = committed
        self._txn_groups.setdefault(producer_id, set()).add(group.group_id)

    def complete_transaction(self, producer_id: int, committed: bool, partition: int) -> None:
        """The COMMIT/ABORT marker is in ``partition``: apply or drop the pending offsets."""
        group_ids = self._txn_groups.get(producer_id)
        if not group_ids:
            return
        for group_id in list(group_ids):
            if self.group_log.partition_for(group_id) != partition:
                continue
            group_ids.discard(group_id)
            group = self.groups.get(group_id)
            if group is not None:
                group.complete_txn_offsets(producer_id, committed)
        if not group_ids:
            del self._txn_groups[producer_id]

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        group = self.groups.get(group_id)
        return group is not None and group.has_pending_offsets((topic, partition))

    # -- OffsetFetch ----------------------------------------------------------------------

    def fetch(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool
    ) -> list[FetchedOffset]:
        """OffsetFetch: one answer per partition asked for; None asks for all."""
        group = self.groups.get(group_id)
        if group is not None and group.is_(GroupState.DEAD):
            group = None
        if partitions is None:
            if group is None:
                return []
            return [
                (tp, c.offset, c.leader_epoch, c.metadata, ErrorCode.none)
                for tp, c in sorted(group.offsets.items())
            ]
        answers: list[FetchedOffset] = []
        for topic_partition in partitions:
            if group is not None and require_stable and group.has_pending_offsets(topic_partition):
                answers.append((topic_partition, -1, -1, "", ErrorCode.unstable_offset_commit))
                continue
            committed = group.offsets.get(topic_partition) if group is not None else None
            if committed is None:
                answers.append((topic_partition, -1, -1, "", ErrorCode.none))
            else:
                answers.append(
                    (
                        topic_partition,
                        committed.offset,
                        committed.leader_epoch,
                        committed.metadata,
                        ErrorCode.none,
                    )
                )
        return answers

    # -- OffsetDelete ---------------------------------------------------------------------

    async def delete(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: only for partitions the group does not consume right now."""
        if not group_id:
            return ErrorCode.invalid_group_id, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        consumer = group.consumer
        if consumer is not None and not consumer.is_empty():
            busy = set(consumer.subscribed_topic_names(topic_metadata(self.logs)))
        elif group.is_(GroupState.EMPTY):
            busy = set()
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            busy = {topic for topic, _ in partitions if group.is_subscribed_to(topic)}
        else:
            return ErrorCode.non_empty_group, {}
        results = {tp: ErrorCode.group_subscribed_to_topic for tp in partitions if tp[0] in busy}
        deletable = [tp for tp in partitions if tp not in results]
        removed = {tp: group.offsets.pop(tp) for tp in deletable if tp in group.offsets}
        if removed:
            tombstones = [KeyValue(offset_key(group_id, t, p), None) for t, p in removed]
            try:
                await self.group_log.append_durably(group_id, tombstones)
            except KafkaError as error:
                # The tombstones are not on disk: the offsets stay (a later commit of the
                # same partition stood behind them in the log and was refused too).
                for tp, committed in removed.items():
                    group.offsets.setdefault(tp, committed)
                return error.code, {}
        results.update(dict.fromkeys(deletable, ErrorCode.none))
        return ErrorCode.none, results
