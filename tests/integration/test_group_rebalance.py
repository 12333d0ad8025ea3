"""Three confluent-kafka members share a 6-partition topic through leave and crash.

Each member is a subprocess (tests/integration/group_member.py) that commits after
processing. One member leaves cleanly, one is SIGKILLed and dropped after its session
timeout; the survivors take over their partitions. Checked: ownership is exclusive at
every moment (member journals and the broker's view), every record is processed at least
once (nothing lost), and the final committed offsets are the log end offsets.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.group_helpers import assignments, describe_group, numbered
from tests.kit.clients import create_topic, produce
from tests.kit.wait import wait_until

TOPIC = "work"
PARTITIONS = 6
ROOT = Path(__file__).resolve().parents[2]


class Member:
    def __init__(self, bootstrap: str, group: str, strategy: str, journal: Path, name: str):
        self.name = name
        self.journal = journal
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.group_member",
                bootstrap,
                group,
                TOPIC,
                strategy,
                str(journal),
                name,
            ],
            cwd=ROOT,
        )
        self.killed_at: float | None = None

    def events(self) -> list[dict]:
        if not self.journal.exists():
            return []
        lines = self.journal.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def leave(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(30) == 0

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.killed_at = time.time()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def processed(members: list[Member]) -> set[tuple[int, int]]:
    return {
        (event["partition"], event["offset"])
        for member in members
        for event in member.events()
        if event["kind"] == "record"
    }


def ownership(members: list[Member]) -> dict[int, list[tuple[float, float, str]]]:
    """partition -> [(start, end, member)] from the members' rebalance callbacks."""
    intervals: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for member in members:
        owned: dict[int, float] = {}
        for event in member.events():
            if event["kind"] == "assign":
                for partition in event["partitions"]:
                    owned.setdefault(partition, event["t"])
            elif event["kind"] in ("revoke", "lost"):
                for partition in event["partitions"]:
                    if partition in owned:
                        intervals[partition].append((owned.pop(partition), event["t"], member.name))
        end = member.killed_at if member.killed_at is not None else float("inf")
        for partition, start in owned.items():
            intervals[partition].append((start, end, member.name))
    return intervals


def check_exclusive(members: list[Member]) -> None:
    intervals = ownership(members)
    for partition, spans in intervals.items():
        spans.sort()
        for (_, end, owner), (start, _, next_owner) in itertools.pairwise(spans):
            assert end <= start, (
                f"partition {partition} owned by {owner} until {end} and by {next_owner} "
                f"from {start}"
            )
    for member in members:  # a member only processes partitions it owns
        for event in member.events():
            if event["kind"] != "record":
                continue
            assert any(
                start <= event["t"] <= end and owner == member.name
                for start, end, owner in intervals[event["partition"]]
            ), f"{member.name} processed {event} without owning the partition"


def stable_view(admin: AdminClient, group: str, names: set[str], complete: bool = True):
    """The group's assignment once it is Stable with exactly ``names`` as members."""
    description = describe_group(admin, group)
    if description.state.name != "STABLE":
        return None
    view = assignments(description)
    if set(view) != names:
        return None
    owned = [tp for tps in view.values() for tp in tps]
    assert len(owned) == len(set(owned)), f"a partition is assigned twice: {view}"
    if complete and set(owned) != {(TOPIC, p) for p in range(PARTITIONS)}:
        return None
    return view


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_members_leave_and_crash_without_losing_records(
    kafka_broker_factory, tmp_path: Path, strategy: str
) -> None:
    broker = kafka_broker_factory(config={"group.min.session.timeout.ms": "1000"})
    bootstrap = broker.bootstrap
    group = f"workers-{strategy}"
    create_topic(bootstrap, TOPIC, PARTITIONS)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    produced = set(produce(bootstrap, TOPIC, numbered(120), partitions=PARTITIONS))
    members = [
        Member(bootstrap, group, strategy, tmp_path / f"{name}.jsonl", name)
        for name in ("a", "b", "c")
    ]
    a, b, c = members
    try:
        view = wait_until(lambda: stable_view(admin, group, {"a", "b", "c"}), timeout=60)
        assert all(len(tps) == 2 for tps in view.values()), view
        produced |= set(produce(bootstrap, TOPIC, numbered(120, 120), partitions=PARTITIONS))
        wait_until(lambda: produced <= processed(members), timeout=60)

        # a leaves cleanly: b and c take over its partitions
        produced |= set(produce(bootstrap, TOPIC, numbered(120, 240), partitions=PARTITIONS))
        a.leave()
        view = wait_until(lambda: stable_view(admin, group, {"b", "c"}), timeout=60)
        assert all(len(tps) == 3 for tps in view.values()), view
        produced |= set(produce(bootstrap, TOPIC, numbered(120, 360), partitions=PARTITIONS))
        wait_until(lambda: produced <= processed(members), timeout=60)

        # b crashes: only its session timeout tells the coordinator
        produced |= set(produce(bootstrap, TOPIC, numbered(120, 480), partitions=PARTITIONS))
        b.kill()
        view = wait_until(lambda: stable_view(admin, group, {"c"}), timeout=60)
        produced |= set(produce(bootstrap, TOPIC, numbered(120, 600), partitions=PARTITIONS))
        wait_until(lambda: produced <= processed(members), timeout=60)
        assert len(view["c"]) == PARTITIONS

        # every record was processed (at least once) and the group committed to the end
        def committed_to_end() -> bool:
            probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
            try:
                offsets = probe.committed(
                    [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10
                )
            finally:
                probe.close()
            return all(tp.offset == 120 for tp in offsets)

        wait_until(committed_to_end, timeout=30)
        c.leave()
    finally:
        for member in members:
            member.stop()
    check_exclusive(members)
    assert produced <= processed(members)
    for member in (a, c):
        assert member.events()[-1]["kind"] == "closed"
    description = describe_group(admin, group)
    assert description.state.name == "EMPTY" and not description.members
