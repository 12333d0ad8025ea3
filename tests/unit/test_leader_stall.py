"""A leader fault's stall (``FaultActions._lead_alone``): it lasts until the leader's
replica holds what its followers, cut off from it, lack, or LAG_MAX_S; and a node's replica size as
its log directory shows it (``KafkaNode.log_bytes``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from onceflow.faults import actions
from onceflow.faults.actions import FaultActions, Victim
from onceflow.kafka_cluster.node import KafkaNode


@dataclass
class ScriptedNode:
    sizes: list[int]  # what each look at its replica shows; the last one from then on
    looks: int = 0

    def log_bytes(self, topic: str, partition: int) -> int:
        assert (topic, partition) == ("orders-copy", 0)
        self.looks += 1
        return self.sizes[min(self.looks, len(self.sizes)) - 1]


@dataclass
class ScriptedCluster:
    nodes: dict[int, ScriptedNode] = field(default_factory=dict)

    def node(self, node_id: int) -> ScriptedNode:
        return self.nodes[node_id]


VICTIM = Victim(1, "orders-copy partition 0", (2, 3), ("orders-copy", 0))


def test_the_stall_lasts_until_the_leader_wrote_what_its_followers_lack():
    cluster = ScriptedCluster({1: ScriptedNode([100, 100, 100, 350]), 2: ScriptedNode([100]),
                               3: ScriptedNode([90])})  # fmt: skip
    stalled, lacking = FaultActions(lag_s=0.01)._lead_alone(cluster, VICTIM)
    assert lacking == 250
    assert stalled < actions.LAG_MAX_S
    assert cluster.nodes[1].looks == 5  # three without, one with, one for the answer


def test_a_leader_that_writes_nothing_alone_is_killed_after_lag_max(monkeypatch):
    monkeypatch.setattr(actions, "LAG_MAX_S", 0.3)
    cluster = ScriptedCluster({1: ScriptedNode([100]), 2: ScriptedNode([100]),
                               3: ScriptedNode([100])})  # fmt: skip
    stalled, lacking = FaultActions(lag_s=0.01)._lead_alone(cluster, VICTIM)
    assert lacking == 0
    assert 0.3 <= stalled < 1.0


def test_a_victim_without_a_partition_stalls_lag_s():
    group = Victim(1, "a group", (2, 3))
    stalled, lacking = FaultActions(lag_s=0.05)._lead_alone(ScriptedCluster(), group)
    assert (stalled, lacking) == (0.05, 0)


def test_a_replica_size_is_its_segments_sizes(tmp_path: Path):
    node = KafkaNode.__new__(KafkaNode)
    node.properties = {"log.dirs": str(tmp_path)}
    assert node.log_bytes("orders", 0) == 0  # no replica here
    replica = tmp_path / "orders-0"
    replica.mkdir()
    (replica / "00000000000000000000.log").write_bytes(b"x" * 700)
    (replica / "00000000000000000042.log").write_bytes(b"x" * 50)
    (replica / "00000000000000000000.index").write_bytes(b"x" * 4096)  # not records
    assert node.log_bytes("orders", 0) == 750
