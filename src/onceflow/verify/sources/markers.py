"""Which offsets of a partition belong to aborted (or still open) transactions.

Decided from the log itself, independently of the broker's read_committed filtering: a
raw read_uncommitted Fetch to each partition's leader walks the record batch headers and
pairs each producer's transactional batches with its commit or abort control marker.
"""

from __future__ import annotations

import datetime
import time
from collections import defaultdict
from dataclasses import dataclass, field

from onceflow.admin.topics import PARTITION_ERRORS
from onceflow.verify.sources.errors import SourceError
from onceflow.verify.sources.topics import Cluster, PartitionRange, client_conf


@dataclass(slots=True)
class TransactionOutcomes:
    """Offsets of one partition that belong to aborted (or still open) transactions."""

    aborted: list[tuple[int, int]] = field(default_factory=list)  # inclusive ranges
    open: list[tuple[int, int]] = field(default_factory=list)

    def is_aborted(self, offset: int) -> bool:
        return any(first <= offset <= last for first, last in self.aborted)


def fetch_error_in_words(code: int) -> str:
    """A Fetch error code as Kafka names it, with what it means for the audit."""
    from onceflow.protocol.errors import ErrorCode

    try:
        name = ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"
    return PARTITION_ERRORS.get(name, name)


def transaction_outcomes(
    bootstrap: Cluster,
    topic: str,
    ranges: dict[int, PartitionRange],
    timeout: float = 30.0,
) -> dict[int, TransactionOutcomes]:
    """Walk each partition's batches (read_uncommitted) and pair data with markers."""
    from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
    from kio.static.primitive import i8, i32, i64

    from onceflow.admin.errors import AdminError, Unreachable
    from onceflow.log.batch import CONTROL_ABORT, control_type_of, iter_headers
    from onceflow.verify.leaders import LEADER_MOVED, NoLeader, PartitionLeaders

    outcomes: dict[int, TransactionOutcomes] = {}
    with PartitionLeaders(client_conf(bootstrap), topic, timeout) as leaders:
        for partition, extent in sorted(ranges.items()):
            result = outcomes[partition] = TransactionOutcomes()
            open_batches: dict[int, list[tuple[int, int]]] = defaultdict(list)
            offset = extent.start
            deadline = time.monotonic() + timeout
            while offset < extent.high:
                try:
                    wire = leaders.client(partition)
                except (NoLeader, Unreachable, AdminError) as error:
                    raise SourceError(f"topic {topic!r}: {error}") from None
                response = wire.request(
                    FetchRequest,
                    max_wait=datetime.timedelta(milliseconds=100),
                    min_bytes=i32(1),
                    max_bytes=i32(16 << 20),
                    isolation_level=i8(0),
                    topics=(
                        FetchTopic(
                            topic=topic,
                            partitions=(
                                FetchPartition(
                                    partition=i32(partition),
                                    fetch_offset=i64(offset),
                                    partition_max_bytes=i32(8 << 20),
                                ),
                            ),
                        ),
                    ),
                )
                (data,) = response.responses[0].partitions
                if data.error_code in LEADER_MOVED and time.monotonic() < deadline:
                    leaders.moved()
                    time.sleep(0.2)
                    continue
                if data.error_code != 0:
                    raise SourceError(
                        f"topic {topic!r}: partition {topic}-{partition} at offset {offset}: "
                        f"{fetch_error_in_words(data.error_code)}"
                    )
                records = bytes(data.records or b"")
                progressed = False
                for header in iter_headers(records):
                    if header.next_offset <= offset:
                        continue
                    progressed = True
                    offset = header.next_offset
                    if not header.is_transactional or not header.has_producer_id:
                        continue
                    if header.is_control:
                        batches = open_batches.pop(header.producer_id, [])
                        if control_type_of(records, header) == CONTROL_ABORT:
                            result.aborted.extend(batches)
                    else:
                        open_batches[header.producer_id].append(
                            (header.base_offset, header.last_offset)
                        )
                if not progressed:
                    break
            result.open = sorted(r for batches in open_batches.values() for r in batches)
    return outcomes
