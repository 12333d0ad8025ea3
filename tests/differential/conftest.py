"""One fresh single-node Apache Kafka and one fresh onceflow broker with the same settings,
started once per session (the tests here carry the xdist group "differential", so one
worker runs them all and starts them once)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

from onceflow.protocol.client import WireClient
from onceflow.testing import InProcessBroker, start_broker
from tests.differential.driver import Pair
from tests.kit.wire import request_producer_id

# The settings both brokers get, by Kafka's names: one partition per internal topic (so
# every group and transactional id has the same coordinator partition), no initial
# rebalance delay, timed-out transactions aborted within a second.
SHARED = {
    "broker.id": "1",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "unclean.leader.election.enable": "false",
    "min.insync.replicas": "1",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}


@pytest.fixture(scope="session")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    from onceflow.kafka_cluster import KafkaCluster, KafkaClusterError

    config = {k: v for k, v in SHARED.items() if k != "broker.id"}
    cluster = KafkaCluster(1, directory=tmp_path_factory.mktemp("diff-kafka"), config=config)
    broker = InProcessBroker(tmp_path_factory.mktemp("diff-onceflow") / "data", config=SHARED)
    try:
        try:
            cluster.start()
        except KafkaClusterError as error:
            pytest.fail(f"Apache Kafka: {error}", pytrace=False)
        start_broker(broker)
        versions = [_warm_up(cluster.bootstrap), _warm_up(broker.bootstrap)]
        common = {
            key: (
                max(versions[0][key][0], versions[1][key][0]),
                min(versions[0][key][1], versions[1][key][1]),
            )
            for key in versions[0].keys() & versions[1].keys()
        }
        yield Pair(cluster.bootstrap, broker.bootstrap, common)
    finally:
        broker.stop()
        cluster.stop(graceful=False)


def _warm_up(bootstrap: str) -> dict[int, tuple[int, int]]:
    """The broker's API versions, after its group and transaction coordinators (their
    internal topics) and its producer id allocation are ready, so the first scenario does
    not see them being created."""
    with WireClient(bootstrap) as client:
        answer = client.request(
            ApiVersionsRequest, client_software_name="diff", client_software_version="1"
        )
        deadline = time.monotonic() + 60
        for key_type in (0, 1):
            while True:
                response = client.request(
                    FindCoordinatorRequest, key_type=key_type, coordinator_keys=("warm-up",)
                )
                if response.coordinators[0].error_code == 0:
                    break
                assert time.monotonic() < deadline, response
                time.sleep(0.1)
        while True:
            response = request_producer_id(client)
            if response.error_code == 0:
                break
            assert time.monotonic() < deadline, response
            time.sleep(0.1)
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
