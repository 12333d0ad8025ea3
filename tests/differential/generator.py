"""Generated request sequences: a seeded generator of valid and invalid requests across
APIs and versions, from two producers (p1 idempotent, p2 transactional), two consumers (c1,
c2, each in its own group) and an admin, interleaved at random; and a shrinker that cuts a
diverging sequence down to the smallest one that still diverges.

A sequence is a list of actions; an action is a short list of steps (a request, and the
uncompared wait some requests need, e.g. for transaction markers). Every run of a
sequence uses names of its own, so sequences and their shrunk versions never meet."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from tests.differential import group_steps as gs
from tests.differential import record_steps as rs
from tests.differential import step_values as sv
from tests.differential import topic_steps as ts
from tests.differential import txn_steps as xs
from tests.differential.driver import Difference, Pair, Step
from tests.differential.known import KNOWN
from tests.differential.records import BASE_TIME_MS
from tests.differential.scenario import prefix_for, unexplained

Action = list[Step]
TOPICS = {"~t": 2, "~u": 1}
TX = "~tx"
GROUPS = {"c1": "~g1", "c2": "~g2"}


@dataclass
class Outcome:
    seed: int
    actions: list[Action]
    differences: list[Difference]

    def render(self) -> str:
        lines = [f"seed {self.seed}: {len(self.actions)} actions"]
        for index, action in enumerate(self.actions):
            lines.append(f"  {index}: " + "; ".join(_describe(step) for step in action))
        lines += [d.render() + f"\n(differing: {', '.join(d.paths)})" for d in self.differences]
        return "\n".join(lines)


def _describe(step: Step) -> str:
    from onceflow.protocol.codec import api_name

    version = "" if step.version is None else f" v{step.version}"
    raw = "" if step.raw_version is None else f" (header v{step.raw_version})"
    return f"{step.client} {api_name(step.api)}{version}{raw} {step.label}".strip()


class Generator:
    """Random actions; ``common`` bounds the versions it picks."""

    def __init__(self, seed: int, common: dict[int, tuple[int, int]]) -> None:
        self.random = random.Random(seed)
        self.common = common
        # Per producer: (topic, partition) -> next sequence number; None before InitProducerId.
        self.sequence: dict[str, dict[tuple[str, int], int] | None] = {"p1": None, "p2": None}
        # A member joins again with its member id: with a new one, the group would wait
        # for the old member for the whole rebalance timeout.
        self.joined = {"c1": False, "c2": False}
        self.menu: list[tuple[int, Callable[[], Action]]] = [
            (6, self.produce_plain),
            (6, self.produce_idempotent),
            (5, self.transaction_step),
            (5, self.fetch),
            (4, self.list_offsets),
            (3, self.group_step),
            (3, self.admin_step),
            (2, self.invalid),
        ]

    def setup(self) -> list[Action]:
        return [ts.topic(name, count) for name, count in TOPICS.items()]

    def sequence_of(self, length: int) -> list[Action]:
        weights = [w for w, _ in self.menu]
        makers = [m for _, m in self.menu]
        return [self.random.choices(makers, weights)[0]() for _ in range(length)]

    # -- helpers -----------------------------------------------------------------------

    def version(self, api: int) -> int:
        low, high = self.common[api]
        return self.random.randint(low, high) if self.random.random() < 0.4 else high

    def topic_partition(self) -> tuple[str, int]:
        roll = self.random.random()
        if roll < 0.05:
            return "~absent", 0
        if roll < 0.1:
            return "~t", self.random.choice([2, 9, -1])
        topic = self.random.choice(list(TOPICS))
        return topic, self.random.randrange(TOPICS[topic])

    def values(self) -> tuple[bytes, ...]:
        return tuple(b"v%d" % self.random.randrange(1000) for _ in range(self.random.randint(1, 3)))

    # -- actions -----------------------------------------------------------------------

    def produce_plain(self) -> Action:
        topic, partition = self.topic_partition()
        acks = self.random.choice([-1, -1, 1, 1, 0, 2])
        stamp = BASE_TIME_MS + self.random.randrange(50)
        batch = rs.batch(*self.values(), timestamp_ms=stamp)
        step = rs.produce("c2", topic, batch, partition, acks, version=self.version(0))
        if acks != 0:
            return [step]
        # acks=0 has no answer: an acks=1 produce after it on the same connection is
        # served after it, and answered once both are durable (onceflow's high
        # watermark is the durable offset), so later reads see both on both brokers.
        after = rs.batch(b"after", timestamp_ms=stamp)
        return [step, rs.produce("c2", topic, after, partition, 1, version=self.version(0))]

    def produce_idempotent(self) -> Action:
        sequences = self.sequence["p1"]
        if sequences is None or self.random.random() < 0.08:
            self.sequence["p1"] = {}
            return [xs.init_producer_id("p1")]
        topic, partition = self.topic_partition()
        values = self.values()
        expected = sequences.get((topic, partition), 0)
        roll = self.random.random()
        sequence = expected
        if roll < 0.1:
            sequence = max(0, expected - len(values))  # a duplicate or an overlap
        elif roll < 0.18:
            sequence = expected + self.random.randint(1, 3)  # a gap
        epoch_offset = 1 if self.random.random() < 0.05 else 0
        if sequence == expected and epoch_offset == 0:
            sequences[(topic, partition)] = expected + len(values)
        batch = rs.batch(*values, producer="p1", sequence=sequence, epoch_offset=epoch_offset)
        return [rs.produce("p1", topic, batch, partition, version=self.version(0))]

    def transaction_step(self) -> Action:
        roll = self.random.random()
        v2 = self.random.random() < 0.3
        sequences = self.sequence["p2"]
        if sequences is None or roll < 0.08:
            self.sequence["p2"] = {}
            return [xs.init_producer_id("p2", TX)]
        if roll < 0.3:
            topic, partition = self.topic_partition()
            return [xs.add_partitions("p2", TX, {topic: [partition]})]
        if roll < 0.6:
            topic, partition = self.topic_partition()
            values = self.values()
            sequence = sequences.get((topic, partition), 0)
            sequences[(topic, partition)] = sequence + len(values)
            batch = rs.batch(*values, producer="p2", sequence=sequence, transactional=True)
            return [
                rs.produce(
                    "p2", topic, batch, partition, transactional_id=TX, version=12 if v2 else 11
                )
            ]
        if roll < 0.7:
            return [xs.add_offsets("p2", TX, GROUPS["c1"])]
        if roll < 0.78:
            topic, partition = self.topic_partition()
            return [
                xs.txn_offset_commit(
                    "p2", TX, GROUPS["c1"], {topic: [(partition, self.random.randrange(5))]}
                )
            ]
        if roll < 0.82:
            return [xs.describe_transactions([TX])]
        commit = self.random.random() < 0.5
        epoch_offset = self.random.choice([0, 0, 0, 0, 1, -1])
        return [
            xs.end_txn("p2", TX, commit, epoch_offset, version=5 if v2 else 4),
            xs.txn_settled(TX),
        ]

    def fetch(self) -> Action:
        topic, partition = self.topic_partition()
        offset = self.random.choice([0, 0, 1, 2, 3, 5, 8, -1])
        isolation = self.random.choice([0, 1])
        max_bytes = self.random.choice([1 << 20, 1 << 20, 100, 1])
        return [
            rs.fetch("c1", topic, offset, partition, isolation, max_bytes, version=self.version(1))
        ]

    def list_offsets(self) -> Action:
        topic, partition = self.topic_partition()
        stamp = self.random.choice(
            [-1, -2, -3, -1, BASE_TIME_MS, BASE_TIME_MS + self.random.randrange(60)]
        )
        isolation = self.random.choice([0, 1])
        version = self.version(2)
        if version < 2:
            isolation = 0
        if version == 0 or (stamp == -3 and version < 7):
            version = self.common[2][1]
        return [rs.list_offsets("c1", topic, stamp, partition, isolation, version)]

    def group_step(self) -> Action:
        client = self.random.choice(["c1", "c2"])
        group = GROUPS[client]
        roll = self.random.random()
        if roll < 0.25:
            if not self.joined[client]:
                self.joined[client] = True
                return gs.join_alone(client, group)
            return [gs.join(client, group), gs.sync(client, group, {client: (("~t", (0,)),)})]
        if roll < 0.4:
            return [
                gs.heartbeat(
                    client,
                    group,
                    generation_id=sv.generation(client, self.random.choice([0, 0, 1])),
                )
            ]
        if roll < 0.6:
            topic, partition = self.topic_partition()
            offset = self.random.randrange(6)
            generation = self.random.choice([None, None, -1, sv.generation(client, 1)])
            member = "" if generation == -1 else None
            return [
                gs.offset_commit(
                    client,
                    group,
                    {topic: [(partition, offset)]},
                    generation_id=generation,
                    member_id=member,
                )
            ]
        if roll < 0.75:
            return [
                gs.offset_fetch(
                    client,
                    group,
                    {"~t": [0, 1], "~u": [0]},
                    require_stable=self.random.random() < 0.5,
                )
            ]
        if roll < 0.85:
            self.joined[client] = False
            return [gs.leave(client, group)]
        if roll < 0.93:
            return [gs.describe_groups([group])]
        return [gs.list_groups()]

    def admin_step(self) -> Action:
        roll = self.random.random()
        if roll < 0.2:
            topic, partition = self.topic_partition()
            offset = self.random.choice([-1, 0, 1, 2, 50])
            return [
                Step(
                    "admin",
                    21,
                    {
                        "topics": [
                            {
                                "name": topic,
                                "partitions": [{"partition_index": partition, "offset": offset}],
                            }
                        ],
                        "timeout": 5000,
                    },
                )
            ]
        if roll < 0.35:
            key, value = self.random.choice(
                [
                    ("retention.ms", "86400000"),
                    ("retention.ms", "abc"),
                    ("cleanup.policy", "shred"),
                    ("max.message.bytes", "2000"),
                    ("segment.bytes", "5"),
                ]
            )
            return [
                Step(
                    "admin",
                    44,
                    {
                        "resources": [
                            {
                                "resource_type": 2,
                                "resource_name": "~u",
                                "configs": [{"name": key, "config_operation": 0, "value": value}],
                            }
                        ],
                        "validate_only": self.random.random() < 0.5,
                    },
                ),
                *ts.metadata_barrier(),
            ]
        if roll < 0.5:
            return [
                Step(
                    "admin",
                    32,
                    {
                        "resources": [
                            {
                                "resource_type": 2,
                                "resource_name": self.random.choice(["~t", "~u", "~absent"]),
                                "configuration_keys": [
                                    "retention.ms",
                                    "cleanup.policy",
                                    "max.message.bytes",
                                ],
                            }
                        ]
                    },
                )
            ]
        if roll < 0.65:
            return [xs.describe_producers(self.random.choice(["~t", "~u"]), [0])]
        if roll < 0.75:
            return [xs.list_transactions()]
        if roll < 0.9:
            return [
                ts.metadata([self.random.choice(["~t", "~u", "~absent"])], version=self.version(3))
            ]
        return [
            Step(
                "admin",
                37,
                {
                    "topics": [
                        {"name": "~t", "count": self.random.choice([1, 2, 0]), "assignments": None}
                    ],
                    "timeout": 5000,
                    "validate_only": True,
                },
            )
        ]

    def invalid(self) -> Action:
        roll = self.random.random()
        if roll < 0.25:  # a version beyond what either broker serves, on a valid body
            api = self.random.choice([0, 1, 2, 3, 8, 9, 10, 19])
            step = ts.metadata(["~t"]) if api == 3 else rs.list_offsets("c1", "~t")
            step.raw_version = 99
            return [step]
        if roll < 0.45:  # an oversized name
            return [rs.produce("c2", "~" + "x" * 300, rs.batch(b"v"))]
        if roll < 0.6:  # negative partitions and offsets
            return [
                self.random.choice(
                    [
                        rs.fetch("c1", "~t", -5, partition=-1),
                        rs.list_offsets("c1", "~t", -1, partition=-1),
                        rs.fetch("c1", "~t", -7),
                    ]
                )
            ]
        if roll < 0.75:
            return [
                *ts.create_topics(
                    [(f"~n{self.random.randrange(100)}", self.random.choice([-5, 0]), 1)],
                    wait=False,
                )
            ]
        if roll < 0.9:  # unknown ids
            return [
                Step(
                    "p1",
                    26,
                    {
                        "transactional_id": "~unknown",
                        "producer_id": 123456,
                        "producer_epoch": 0,
                        "committed": True,
                    },
                    4,
                )
            ]
        return [gs.heartbeat("c1", "~nogroup", generation_id=5, member_id="nobody")]


def run_sequence(
    pair: Pair, seed: int, actions: list[Action], setup: list[Action]
) -> list[Difference]:
    steps = [step for action in [*setup, *actions] for step in action]
    differences = pair.run(prefix_for(f"gen-{seed}"), steps)
    left, _ = unexplained(differences, KNOWN.values())
    return left


def generate(pair: Pair, seed: int, length: int) -> Outcome:
    generator = Generator(seed, pair.common)
    setup = generator.setup()
    actions = generator.sequence_of(length)
    differences = run_sequence(pair, seed, actions, setup)
    if differences:
        actions, differences = shrink(pair, seed, actions, setup, differences)
    return Outcome(seed, actions, differences)


def signature(difference: Difference) -> tuple[int, str]:
    """What a difference is about: its API and first differing field, indexes left out."""
    return difference.api, re.sub(r"\[[^\]]*\]", "[]", difference.paths[0])


def shrink(
    pair: Pair,
    seed: int,
    actions: list[Action],
    setup: list[Action],
    differences: list[Difference],
    budget: int = 40,
) -> tuple[list[Action], list[Difference]]:
    """Delta debugging over actions: drop chunks (halves, quarters... single actions)
    while the rest still diverges the same way (the first difference's API and field);
    at most ``budget`` reruns."""
    wanted = signature(differences[0])
    chunk = max(1, len(actions) // 2)
    while chunk >= 1 and budget > 0:
        start = 0
        while start < len(actions) and budget > 0:
            # InitProducerId stays: without it a producer's batches carry producer id -1,
            # which Kafka and onceflow treat differently (a documented difference).
            kept = [a for a in actions[start : start + chunk] if a and a[0].api == 22]
            candidate = actions[:start] + kept + actions[start + chunk :]
            if len(candidate) == len(actions):
                start += chunk
                continue
            budget -= 1
            left = run_sequence(pair, seed, candidate, setup) if candidate else []
            if any(signature(d) == wanted for d in left):
                actions, differences = candidate, left
            else:
                start += chunk
        chunk //= 2
    return actions, differences
