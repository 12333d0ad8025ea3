"""The source's micro-batch reader: offsets on the driver (admission control,
``Trigger.AvailableNow``, the optional commits to a group for lag tools), ranges read on
the executors."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from confluent_kafka import TopicPartition
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from onceflow.spark.kafka_source.offset_reader import OffsetReader
from onceflow.spark.kafka_source.offsets import (
    LATEST,
    LATEST_OFFSET,
    OffsetMap,
    from_spark,
    limit_offsets,
    to_spark,
)
from onceflow.spark.kafka_source.options import OnceflowOptionError, SourceOptions, one_line_errors
from onceflow.spark.kafka_source.reader import report_data_loss
from onceflow.spark.kafka_source.tasks import range_partitions, read_partition, read_settings

log = logging.getLogger(__name__)


class OnceflowStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with admission control and ``Trigger.AvailableNow``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.settings = read_settings(options)
        self.offsets = OffsetReader(options)
        self._target: OffsetMap | None = None  # Trigger.AvailableNow's end
        self._latest: OffsetMap | None = None  # for reportLatestOffset()
        self._committer: Any = None  # consumer for commitOffsetsToGroup
        self._published: OffsetMap = {}  # offsets last sent to the group
        self._pending_commits = 0

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_committer"] = None
        state["_pending_commits"] = 0
        return state

    # -- driver ----------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Where a query without a checkpointed batch starts. Spark asks again when it runs
        the first batch, and again for that batch after a restart, and never stores the
        answer: it must not change. A partition starting at the latest offset therefore
        answers -1 (latest), and the first batch starts it where that batch ends."""
        with one_line_errors():
            partitions = self.offsets.partitions()
            spec = self.options.starting_offsets
            if spec == LATEST:
                start = dict.fromkeys(partitions, LATEST_OFFSET)
            else:
                start = self.offsets.resolve(spec, partitions, "startingOffsets")
                if isinstance(spec, dict):
                    start.update({tp: o for tp, o in spec.items() if o == LATEST_OFFSET})
        log.info("onceflow source starts at %s (-1: where the first micro-batch ends)", start)
        return to_spark(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with one_line_errors():
            self._target = self.offsets.latest(self.offsets.partitions())
        log.info("onceflow source: Trigger.AvailableNow reads up to %s", self._target)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        with one_line_errors():
            return self._latest_offset(start, limit)

    def _latest_offset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_spark(start)
        at_end = [tp for tp, offset in begin.items() if offset == LATEST_OFFSET]
        # Spark asks only once the batch ending at ``start`` is done (or none ran yet):
        # the group gets it now, not one batch late when ``commit`` would say so.
        self._publish({tp: offset for tp, offset in begin.items() if offset >= 0})
        partitions = self.offsets.partitions()
        if self._target is not None:
            partitions = [tp for tp in partitions if tp in self._target or tp in begin]
        latest = self.offsets.latest(partitions)
        self._latest = latest

        end: OffsetMap = {}
        for tp, offset in begin.items():
            if tp in latest:
                continue
            report_data_loss(
                self.options.fail_on_data_loss,
                f"Partition {tp[0]}-{tp[1]} is gone (topic deleted?); last read offset {offset}",
            )
            # failOnDataLoss=false: forget the partition
        new = [tp for tp in latest if tp not in begin]
        first = dict(begin)
        first.update(self.offsets.earliest(new))
        first.update({tp: latest[tp] for tp in at_end if tp in latest})
        for tp, offset in latest.items():
            if tp not in first:
                continue  # vanished between the two requests
            if self._target is not None:  # AvailableNow: never past the recorded target
                offset = min(offset, self._target.get(tp, first[tp]))
            end[tp] = offset
        first.update({tp: end[tp] for tp in at_end if tp in end})  # an empty first batch

        if isinstance(limit, ReadMaxRows):
            growing = {tp: o for tp, o in end.items() if o >= first[tp]}
            end.update(limit_offsets(first, growing, limit.max_rows))

        if end == begin:
            return start
        return to_spark(end)

    def reportLatestOffset(self) -> dict | None:
        return to_spark(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        with one_line_errors():
            return self._partitions(start, end)

    def _partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        stop = from_spark(end)
        begin = {
            tp: stop.get(tp, offset) if offset == LATEST_OFFSET else offset
            for tp, offset in from_spark(start).items()
        }
        new = [tp for tp in stop if tp not in begin]
        if new:
            earliest = self.offsets.earliest(new)
            for tp in new:
                if tp not in earliest:
                    report_data_loss(
                        self.options.fail_on_data_loss,
                        f"Added partition {tp[0]}-{tp[1]} was deleted before it was read",
                    )
                    continue
                if earliest[tp] != 0:
                    report_data_loss(
                        self.options.fail_on_data_loss,
                        f"Added partition {tp[0]}-{tp[1]} starts from {earliest[tp]} instead of 0",
                    )
                begin[tp] = earliest[tp]
        return range_partitions(
            begin, stop, self.options.fail_on_data_loss, self.options.min_partitions
        )

    def commit(self, end: dict) -> None:
        """Spark finished the batch ending at ``end`` (it says so one batch late)."""
        self._publish(from_spark(end))

    def _publish(self, offsets: OffsetMap) -> None:
        """With ``commitOffsetsToGroup``, commit ``offsets`` (all processed) to the group.

        Asynchronous, so a slow or unavailable group coordinator never delays the query;
        the result is logged when a later commit (or ``stop``) polls the client.
        """
        if not self.options.commit_offsets_to_group or not offsets:
            return
        if offsets == self._published:
            return
        try:
            if self._committer is None:
                self._committer = self._group_client()
            self._committer.poll(0)
            self._committer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
                asynchronous=True,
            )
            self._pending_commits += 1
            self._published = dict(offsets)
        except Exception as error:  # lag reporting must never stop the query
            log.warning(
                "onceflow source: could not commit offsets to group %r: %s",
                self.options.group_id,
                error,
            )

    def _group_client(self) -> Any:
        from confluent_kafka import Consumer

        config: dict[str, Any] = dict(self.options.kafka_config)
        config.update(
            {
                "enable.auto.commit": False,
                "group.id": self.options.group_id,
                "on_commit": self._on_commit,
            }
        )
        return Consumer(config)

    def _on_commit(self, error: Any, partitions: Any) -> None:
        self._pending_commits -= 1
        if error is not None:
            log.warning(
                "onceflow source: commit to group %r failed: %s", self.options.group_id, error
            )

    def stop(self) -> None:
        if self._committer is not None:
            try:
                self._finish_commits()
                self._committer.close()
            except Exception as error:
                log.warning("onceflow source: closing the group committer: %s", error)
            finally:
                self._committer = None
        self.offsets.close()

    def _finish_commits(self, timeout_s: float = 10.0) -> None:
        """Wait (bounded) for the last commits, so a finished query's group shows no lag."""
        deadline = time.monotonic() + timeout_s
        while self._pending_commits > 0 and time.monotonic() < deadline:
            self._committer.poll(0.05)
        if self._pending_commits > 0:
            log.warning(
                "onceflow source: group %r: %d offset commit(s) unconfirmed after %.0f s",
                self.options.group_id,
                self._pending_commits,
                timeout_s,
            )

    # -- executors -------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition, self.settings)


class RefusedStreamReader(DataSourceStreamReader):
    """The stream reader of a query whose options are wrong for streaming: fails at once."""

    def __init__(self, error: OnceflowOptionError) -> None:
        self.error = error

    def _fail(self) -> Any:
        with one_line_errors():
            raise self.error

    def initialOffset(self) -> dict:
        return self._fail()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # type: ignore[override]
        return self._fail()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return self._fail()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self._fail()

    def stop(self) -> None:
        pass
