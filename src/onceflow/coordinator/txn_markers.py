"""Ending a transaction on one partition: append its marker, wait until the marker is
durable, then settle what the transaction left pending there.

onceflow's transaction coordinator ends its transactions this way, and so does
WriteTxnMarkers (Kafka's coordinators, ``kafka-transactions abort`` and ``onceflow
transactions abort``). Settling means, on a partition of ``__consumer_offsets``, making
the transaction's offset commits the group's (or dropping them): only a durable marker
does that, as in Kafka. The settling does not depend on anyone awaiting it: a request
whose client went away still settles its markers.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass

from onceflow.coordinator.group_log import CONSUMER_OFFSETS_TOPIC
from onceflow.coordinator.group_offsets import OffsetStore
from onceflow.log.batch import CONTROL_ABORT, CONTROL_COMMIT
from onceflow.log.manager import LogManager


@dataclass(frozen=True, slots=True)
class Marker:
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int


class MarkerWriter:
    def __init__(self, logs: LogManager, offsets: OffsetStore) -> None:
        self._logs = logs
        self._offsets = offsets

    def append(self, marker: Marker, topic: str, partition: int) -> asyncio.Future[None]:
        """Append ``marker`` to the partition now; the future resolves once it is durable
        and settled, or fails with KafkaError if the log cut it (a failed fsync). Raises
        KafkaError if the partition refuses the marker (unknown, offline, a full disk, an
        older producer or coordinator epoch)."""
        log = self._logs.partition(topic, partition)
        log.append_marker(
            marker.producer_id,
            marker.producer_epoch,
            CONTROL_COMMIT if marker.committed else CONTROL_ABORT,
            marker.coordinator_epoch,
        )
        settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        durable = log.wait_durable(log.log_end_offset)
        durable.add_done_callback(
            functools.partial(self._settle, marker, topic, partition, settled)
        )
        return settled

    def _settle(
        self,
        marker: Marker,
        topic: str,
        partition: int,
        settled: asyncio.Future[None],
        durable: asyncio.Future[None],
    ) -> None:
        error = durable.exception()
        if error is None and topic == CONSUMER_OFFSETS_TOPIC:
            self._offsets.complete_transaction(marker.producer_id, marker.committed, partition)
        if settled.done():
            return
        if error is None:
            settled.set_result(None)
        else:
            settled.set_exception(error)
