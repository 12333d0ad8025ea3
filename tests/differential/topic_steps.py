"""Step builders for topics: Metadata (and waiting until a topic is ready, led or gone),
CreateTopics, DeleteTopics, CreatePartitions, and the set-up ``topic`` most scenarios start
with. Scenarios import this module as ``ts``."""

from __future__ import annotations

import itertools
from typing import Any

from tests.differential.driver import Step
from tests.differential.record_steps import EARLIEST
from tests.differential.step_values import ADMIN


def metadata(
    topics: list[str] | None, client: str = ADMIN, auto_create: bool = False, **kw
) -> Step:
    return Step(
        client,
        3,
        {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": auto_create,
        },
        **kw,
    )


def topic_ready(topics: list[str], partitions: int | None = None) -> Step:
    """Wait until the broker's metadata has each topic with a leader for every partition."""

    def ready(response: Any) -> bool:
        for topic in response.topics:
            if topic.error_code != 0 or not topic.partitions:
                return False
            if partitions is not None and len(topic.partitions) != partitions:
                return False
            if any(p.leader_id < 0 or p.error_code != 0 for p in topic.partitions):
                return False
        return True

    step = metadata(topics, compare=False, label="topic ready")
    step.wait_until = ready
    return step


def partitions_led(topic_name: str, partitions: int) -> Step:
    """Wait until the broker leads every partition of the topic (Kafka's replica manager
    takes leadership a moment after the metadata names the leader)."""
    step = Step(
        ADMIN,
        2,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": topic_name,
                    "partitions": [
                        {"partition_index": p, "timestamp": EARLIEST} for p in range(partitions)
                    ],
                }
            ],
        },
        compare=False,
        label="partitions led",
    )
    step.wait_until = lambda r: all(p.error_code == 0 for t in r.topics for p in t.partitions)
    return step


_barriers = itertools.count()


def metadata_barrier() -> list[Step]:
    """Create a topic and wait until the broker knows it: Kafka's broker applies the
    controller's metadata records in order, so a config change made before is applied by
    then (AlterConfigs answers once the controller has it, the broker learns it later)."""
    steps = create_topics([f"~sync{next(_barriers)}"])
    for step in steps:
        step.compare = False
    return steps


def topic_gone(topics: list[str]) -> Step:
    step = metadata(topics, compare=False, label="topic deleted")
    step.wait_until = lambda r: all(t.error_code == 3 for t in r.topics)
    return step


def create_topics(
    topics: list[tuple[str, int, int]] | list[str],
    configs: dict[str, str | None] | None = None,
    validate_only: bool = False,
    version: int | None = None,
    assignments: list[dict] | None = None,
    wait: bool = True,
) -> list[Step]:
    entries = []
    names = []
    for topic in topics:
        name, partitions, replication = (topic, 1, 1) if isinstance(topic, str) else topic
        names.append(name)
        entries.append(
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication,
                "assignments": assignments or [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        )
    steps = [
        Step(
            ADMIN,
            19,
            {"topics": entries, "validate_only": validate_only, "timeout": 10000},
            version,
        )
    ]
    if wait and not validate_only:
        steps.append(topic_ready(names))
        steps += [
            partitions_led(e["name"], max(e["num_partitions"], len(e["assignments"]), 1))
            for e in entries
        ]
    return steps


def topic(
    name: str = "~t", partitions: int = 1, configs: dict[str, str | None] | None = None
) -> list[Step]:
    """Set-up: create a topic and wait for it. Its CreateTopics answer is not compared
    (the admin scenarios compare those); what later steps see of it is."""
    steps = create_topics([(name, partitions, 1)], configs)
    steps[0].compare = False
    steps[0].label = "set-up: create topic"
    return steps


def delete_topics(names: list[str], version: int | None = None, wait: bool = True) -> list[Step]:
    steps = [
        Step(
            ADMIN,
            20,
            {
                "topic_names": names,
                "topics": [{"name": n, "topic_id": None} for n in names],
                "timeout": 10000,
            },
            version,
        )
    ]
    if wait:
        steps.append(topic_gone(names))
    return steps


def create_partitions(name: str, count: int, validate_only: bool = False) -> list[Step]:
    steps = [
        Step(
            ADMIN,
            37,
            {
                "topics": [{"name": name, "count": count, "assignments": None}],
                "timeout": 10000,
                "validate_only": validate_only,
            },
        )
    ]
    return steps
