"""A transactional producer that leaves a hanging transaction behind (run as a process).

``python -m tests.integration.hanging_producer BOOTSTRAP TOPIC PARTITION TRANSACTIONAL_ID``
(from the repository's root) gets a producer id
for the transactional id from its coordinator (InitProducerId), then writes one
transactional batch to the partition's leader WITHOUT AddPartitionsToTxn first, prints
``open <error code> <offset>`` and waits to be SIGKILLed. The coordinator never learns
that the partition is in a transaction, so it never writes a marker there: the open
transaction holds the partition's last stable offset back for good, the hanging
transaction of KIP-664 (there a late Produce arriving after the transaction ended). A
broker verifying transactional writes (``transaction.partition.verification.enable``,
KIP-890) refuses the batch: the error code is then not 0.
"""

from __future__ import annotations

import datetime
import sys
import time

from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i8, i16, i32

from onceflow.protocol.client import WireClient
from tests.kit.batches import record_batch
from tests.kit.wire import metadata

TRANSACTION_COORDINATOR = 1  # FindCoordinator key type


def coordinator(bootstrap: str, transactional_id: str) -> str | None:
    """The coordinator's address; None while it is not available yet."""
    with WireClient(bootstrap) as client:
        response = client.request(
            FindCoordinatorRequest,
            key_type=i8(TRANSACTION_COORDINATOR),
            coordinator_keys=(transactional_id,),
        )
    (found,) = response.coordinators
    return f"{found.host}:{found.port}" if found.error_code == 0 else None


def init_producer_id(bootstrap: str, transactional_id: str) -> tuple[int, int]:
    """Producer id and epoch, asking again while the coordinator is being elected (the
    first transactional producer of a cluster creates its transaction log)."""
    deadline = time.monotonic() + 30
    while True:
        address = coordinator(bootstrap, transactional_id)
        if address is not None:
            with WireClient(address) as client:
                init = client.request(
                    InitProducerIdRequest,
                    transactional_id=transactional_id,
                    transaction_timeout=datetime.timedelta(seconds=60),
                    producer_id=-1,
                    producer_epoch=-1,
                )
            if init.error_code == 0:
                return init.producer_id, init.producer_epoch
        if time.monotonic() > deadline:
            raise SystemExit(f"no producer id for {transactional_id} within 30 s")
        time.sleep(0.2)


def leader(bootstrap: str, topic: str, partition: int) -> str:
    with WireClient(bootstrap) as client:
        response = metadata(client, [topic])
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
    (described,) = response.topics
    (found,) = [p for p in described.partitions if p.partition_index == partition]
    return brokers[found.leader_id]


def main() -> None:
    bootstrap, topic, partition, transactional_id = sys.argv[1:5]
    producer_id, producer_epoch = init_producer_id(bootstrap, transactional_id)
    batch = record_batch(
        [b"in the hanging transaction"],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=0,
        transactional=True,
    )
    data = PartitionProduceData(index=i32(int(partition)), records=batch)
    with WireClient(leader(bootstrap, topic, int(partition))) as client:
        response = client.request(
            ProduceRequest,
            transactional_id=transactional_id,
            acks=i16(-1),
            timeout=datetime.timedelta(seconds=10),
            topic_data=(TopicProduceData(name=topic, partition_data=(data,)),),
        )
    (answer,) = response.responses[0].partition_responses
    print(f"open {int(answer.error_code)} {answer.base_offset}", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
