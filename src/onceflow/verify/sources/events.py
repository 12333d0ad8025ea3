"""The audit's inputs and sinks read from topics: input events, dead letters, outputs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from onceflow.verify.audit import InputEvent, OutputRecord, Sink, Unreadable, audit
from onceflow.verify.extract import ExtractError, Extractor, FieldMissing, FieldSpec
from onceflow.verify.report import AuditReport
from onceflow.verify.sources.errors import SourceError
from onceflow.verify.sources.markers import transaction_outcomes
from onceflow.verify.sources.topics import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Cluster,
    PartitionRange,
    read_topic,
    topic_ranges,
)


@dataclass(slots=True)
class InputRead:
    events: list[InputEvent]
    aborted_ids: set[str]
    unreadable: list[Unreadable]
    aborted_visible: list[InputEvent]  # read_committed returned aborted data (broker bug)
    ranges: dict[int, PartitionRange]  # of the only input topic ({} for several)
    ranges_by_topic: dict[str, dict[int, PartitionRange]] = field(default_factory=dict)

    def audit(
        self,
        sinks: Iterable[Sink],
        context: Mapping[str, object] | None = None,
        dead_lettered_ids: Iterable[str] = (),
        dead_letter_unreadable: Iterable[Unreadable] = (),
    ) -> AuditReport:
        """Audit ``sinks`` against the events read from the input topics."""
        return audit(
            self.events,
            sinks,
            aborted_input_ids=self.aborted_ids,
            input_unreadable=[*self.unreadable, *dead_letter_unreadable],
            input_aborted_visible=self.aborted_visible,
            dead_lettered_ids=dead_lettered_ids,
            context=context,
        )


def read_input(
    bootstrap: Cluster, topics: str | Sequence[str], extractor: Extractor, timeout: float = 60.0
) -> InputRead:
    """The events of one or several input topics (each event knows its topic)."""
    names = [topics] if isinstance(topics, str) else list(topics)
    if not names:
        raise SourceError("no input topic")
    reads = [_read_one_input(bootstrap, name, extractor, timeout) for name in names]
    if len(reads) == 1:
        return reads[0]
    return InputRead(
        events=[event for read in reads for event in read.events],
        aborted_ids=set().union(*(read.aborted_ids for read in reads)),
        unreadable=[u for read in reads for u in read.unreadable],
        aborted_visible=[event for read in reads for event in read.aborted_visible],
        ranges={},
        ranges_by_topic={name: read.ranges for name, read in zip(names, reads, strict=True)},
    )


def _read_one_input(
    bootstrap: Cluster, topic: str, extractor: Extractor, timeout: float
) -> InputRead:
    ranges = topic_ranges(bootstrap, topic)
    outcomes = transaction_outcomes(bootstrap, topic, ranges)
    events, unreadable, visible_aborted = [], [], []
    missing_field = 0
    for record in read_topic(bootstrap, topic, ranges, READ_COMMITTED, timeout):
        try:
            event_id, key = extractor.message(record.key, record.value)
        except ExtractError as error:
            missing_field += isinstance(error, FieldMissing)
            unreadable.append(Unreadable("input", str(error), record.partition, record.offset))
            continue
        event = InputEvent(event_id, key, record.partition, record.offset, topic)
        if outcomes[record.partition].is_aborted(record.offset):
            visible_aborted.append(event)
        else:
            events.append(event)
    if unreadable and missing_field == len(unreadable) and not events and not visible_aborted:
        raise SourceError(
            f"topic {topic!r}: {unreadable[0].reason} in any of its {len(unreadable)} records: "
            "is --id-field (or --key-field) spelled right?"
        )
    aborted_ids = {event.id for event in visible_aborted}
    if any(o.aborted for o in outcomes.values()):
        for record in read_topic(bootstrap, topic, ranges, READ_UNCOMMITTED, timeout):
            if outcomes[record.partition].is_aborted(record.offset):
                try:
                    aborted_ids.add(extractor.message(record.key, record.value)[0])
                except ExtractError:
                    continue
    return InputRead(events, aborted_ids, unreadable, visible_aborted, ranges, {topic: ranges})


def read_dead_letters(
    bootstrap: Cluster, topic: str, extractor: Extractor, timeout: float = 60.0
) -> tuple[set[str], list[Unreadable]]:
    """Event ids in a dead-letter topic (records carry the input's key and value)."""
    ranges = topic_ranges(bootstrap, topic)
    ids, unreadable = set(), []
    for record in read_topic(bootstrap, topic, ranges, READ_COMMITTED, timeout):
        try:
            ids.add(extractor.message(record.key, record.value)[0])
        except ExtractError as error:
            unreadable.append(
                Unreadable(f"dlq:{topic}", str(error), record.partition, record.offset)
            )
    return ids, unreadable


def read_output_topic(
    bootstrap: Cluster,
    topic: str,
    extractor: Extractor,
    *,
    abort_marker: str | None = None,
    check_order: bool = True,
    timeout: float = 60.0,
) -> Sink:
    """The read_committed view of an output topic; aborted records are flagged."""
    ranges = topic_ranges(bootstrap, topic)
    outcomes = transaction_outcomes(bootstrap, topic, ranges)
    marker = FieldSpec.parse(abort_marker) if abort_marker else None
    sink = Sink(f"topic:{topic}", check_order=check_order)
    for record in read_topic(bootstrap, topic, ranges, READ_COMMITTED, timeout):
        try:
            event_id, key = extractor.message(record.key, record.value)
        except ExtractError as error:
            sink.unreadable.append(
                Unreadable(sink.name, str(error), record.partition, record.offset)
            )
            continue
        aborted = outcomes[record.partition].is_aborted(record.offset) or (
            marker is not None and extractor.flag(marker, record.key, record.value)
        )
        sink.records.append(OutputRecord(event_id, key, record.offset, record.partition, aborted))
    return sink
