"""Reset a consumer group's committed offsets, with kafka-consumer-groups' rules.

The group must be inactive (Empty, or unknown to the coordinator): a member would keep
committing over the new offsets. Targets are Kafka's: earliest, latest, current, an
offset, a shift, a date-time or a duration back from now. New offsets are kept between
each partition's log start and log end.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from onceflow import clock
from onceflow.admin.connect import ClusterSession
from onceflow.admin.errors import NotFound, Refused
from onceflow.admin.groups import INACTIVE_STATES, committed, group_state, log_offsets

TARGETS = ("earliest", "latest", "current", "offset", "shift", "datetime", "duration")


@dataclass(frozen=True, slots=True)
class ResetTarget:
    kind: str  # one of TARGETS
    value: int = 0  # the offset, the shift, or the timestamp in ms

    @classmethod
    def at_datetime(cls, text: str) -> ResetTarget:
        """Kafka's YYYY-MM-DDTHH:mm:SS.sss, with an optional zone (local time when absent)."""
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"invalid date-time {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss[+HH:MM]"
            ) from None
        return cls("datetime", int(moment.timestamp() * 1000))

    @classmethod
    def by_duration(cls, text: str, now_ms: int | None = None) -> ResetTarget:
        """An ISO-8601 duration back from now, as Kafka takes it: PnDTnHnMnS."""
        match = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text)
        if match is None or text in ("P", "PT") or text.endswith("T"):
            raise ValueError(f"invalid duration {text!r}: expected PnDTnHnMnS, e.g. PT30M")
        days, hours, minutes, seconds = (float(part or 0) for part in match.groups())
        span = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
        now_ms = now_ms if now_ms is not None else clock.now_ms()
        return cls("duration", now_ms - int(span.total_seconds() * 1000))


@dataclass(frozen=True, slots=True)
class OffsetReset:
    topic: str
    partition: int
    current: int | None  # the committed offset, None if the group had none
    new: int
    note: str = ""  # why ``new`` is not the offset asked for (clamped to the log)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_topic_selection(text: str) -> tuple[str, list[int] | None]:
    """Kafka's --topic value: ``TOPIC`` or ``TOPIC:0,1,2``."""
    topic, _, partitions = text.partition(":")
    if not topic:
        raise ValueError(f"invalid --topic {text!r}: expected TOPIC or TOPIC:P[,P...]")
    if not partitions:
        return topic, None
    try:
        return topic, sorted({int(p) for p in partitions.split(",")})
    except ValueError:
        raise ValueError(f"invalid --topic {text!r}: partitions must be numbers") from None


def plan_reset(
    session: ClusterSession,
    group: str,
    topics: list[tuple[str, list[int] | None]] | None,
    target: ResetTarget,
) -> list[OffsetReset]:
    """The new offset of each partition; ``topics`` None means every committed partition.

    Refused unless the group is inactive; NotFound for an unknown topic or partition.
    """
    state = group_state(session, group)
    if state == "Dead" and topics is None:
        raise NotFound(
            f"consumer group {group!r} does not exist (--all-topics resets the partitions it "
            "committed; name them with --topic to give a new group its first offsets)"
        )
    if state not in INACTIVE_STATES:
        raise Refused(
            f"offsets can only be reset while group {group!r} is inactive "
            f"(no members), but it is {state}"
        )
    current = {tp: offset for tp, (offset, _) in committed(session, group).items()}
    partitions = sorted(current) if topics is None else _partitions(session, topics)
    return [
        OffsetReset(topic, partition, current.get((topic, partition)), new, note)
        for (topic, partition), new, note in sorted(
            _new_offsets(session, partitions, current, target)
        )
    ]


def execute_reset(session: ClusterSession, group: str, resets: list[OffsetReset]) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    if not resets:
        return
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(r.topic, r.partition, r.new) for r in resets]
    )
    futures = session.admin.alter_consumer_group_offsets([request], request_timeout=session.timeout)
    result = session.result(futures[group], f"commit offsets of group {group}")
    failed = [tp for tp in result.topic_partitions or () if tp.error is not None]
    if failed:
        raise Refused(f"commit offsets of group {group}: {failed[0].error}")


def _partitions(
    session: ClusterSession, topics: list[tuple[str, list[int] | None]]
) -> list[tuple[str, int]]:
    metadata = session.list_topics()
    partitions = []
    for topic, wanted in topics:
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            session.require_topics([topic])  # not authorized, or unknown
            raise NotFound(f"topic {topic!r} does not exist")
        existing = set(described.partitions)
        for partition in wanted if wanted is not None else sorted(existing):
            if partition not in existing:
                raise NotFound(f"partition {topic}:{partition} does not exist")
            partitions.append((topic, partition))
    return partitions


def _new_offsets(
    session: ClusterSession,
    partitions: list[tuple[str, int]],
    current: dict[tuple[str, int], int],
    target: ResetTarget,
) -> list[tuple[tuple[str, int], int, str]]:
    """(partition, new offset, note): the note says when the offset was clamped."""
    from confluent_kafka.admin import OffsetSpec

    earliest = log_offsets(session, partitions, OffsetSpec.earliest())
    latest = log_offsets(session, partitions, OffsetSpec.latest())
    by_time: dict[tuple[str, int], int] = {}
    if target.kind in ("datetime", "duration"):
        by_time = log_offsets(session, partitions, OffsetSpec.for_timestamp(target.value))
    chosen = []
    for tp in partitions:
        low, high = earliest.get(tp, 0), latest.get(tp, 0)
        committed_offset = current.get(tp)
        if target.kind == "earliest":
            new = low
        elif target.kind == "latest":
            new = high
        elif target.kind == "current":
            new = committed_offset if committed_offset is not None else high
        elif target.kind == "offset":
            new = target.value
        elif target.kind == "shift":
            new = (committed_offset if committed_offset is not None else high) + target.value
        else:  # the first offset at or after the time; none: the log end
            found = by_time.get(tp, -1)
            new = found if found >= 0 else high
        kept = min(max(new, low), high)
        note = ""
        if new > high:
            note = f"{new} is past the log end: clamped to {high}"
        elif new < low:
            note = f"{new} is before the log start: clamped to {low}"
        chosen.append((tp, kept, note))
    return chosen
