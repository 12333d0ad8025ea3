"""The chaos matrix: every pattern, every crash point, and what should come out of it.

Rows are patterns; cells are crash points (a SIGKILL right after that step, or another
fault at that point); each cell names, per output, what the seed articles predict:

* ``ok`` — every event exactly once;
* ``duplicated`` — some event more than once;
* ``lost`` — some event missing.

Outputs: ``rest`` (calls to the REST service), ``db`` (the ``entities`` table), ``topic``
(the output topic read with read_committed).

The ``article`` rows transcribe "Kafka Deduplication Patterns" (part 2, its numbered flows
and its appendix on data loss) and the Karafka article on offsets in the database
transaction. The ``runner`` rows are onceflow's own ``Runner`` at each of its crash points
(at-most-once and at-least-once are the baselines), ``relay`` is ``onceflow relay``,
``spark`` the exactly-once Spark sinks, ``fault`` the faults that are not a worker crash:
a broker SIGKILL during a commit, the database unavailable for a while, a network cut, the
broker's disk full for a while, and a power loss of the broker (its files cut back to what
it had fsynced). On a 3-node Apache Kafka cluster, ``fault`` also has the failovers a
single broker cannot show: the partition leader's node, the transaction coordinator's node
or the group coordinator's node SIGKILLed mid-transaction, and two of three nodes down.

Every row names the engines it runs on (``ENGINES``): the faults aimed at onceflow's own
broker process or files run on onceflow's broker only, the failovers on a cluster only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onceflow.chaos.flows import FLOWS, STEP_LABELS

OK, DUPLICATED, LOST = "ok", "duplicated", "lost"
OUTCOMES = (OK, DUPLICATED, LOST)

ONCEFLOW, APACHE_KAFKA = "onceflow", "apache-kafka"
ENGINES = (ONCEFLOW, APACHE_KAFKA)
BOTH = frozenset(ENGINES)


@dataclass(frozen=True)
class Cell:
    """One crash point of one pattern and the outcome expected per output."""

    step: str
    label: str
    expected: dict[str, str]
    number: int | None = None  # the article's step number
    occurrence: int = 3  # SIGKILL the N-th time the step is reached
    quick: bool = False
    # sigkill | broker_kill | database_unavailable | network_cut | disk_full | power_loss |
    # leader_kill | txn_coordinator_kill | group_coordinator_kill | two_nodes_down
    fault: str = "sigkill"


@dataclass(frozen=True)
class Scenario:
    name: str  # "family/pattern"
    title: str
    outputs: tuple[str, ...]
    cells: tuple[Cell, ...]
    exactly_once: bool  # onceflow's claim: no anomaly in any cell
    source: str = ""  # where the prediction comes from
    options: dict[str, str] = field(default_factory=dict)
    engines: frozenset[str] = BOTH  # where the row can run
    not_on_kafka: str = ""  # why it cannot run on an Apache Kafka cluster

    @property
    def family(self) -> str:
        return self.name.split("/", 1)[0]

    @property
    def pattern(self) -> str:
        return self.name.split("/", 1)[1]


def _expect(outputs: tuple[str, ...], dup: str = "", lost: str = "") -> dict[str, str]:
    duplicated, missing = set(dup.split()), set(lost.split())
    unknown = (duplicated | missing) - set(outputs)
    if unknown:
        raise ValueError(f"outputs {sorted(unknown)} not in {outputs}")
    return {o: LOST if o in missing else DUPLICATED if o in duplicated else OK for o in outputs}


def _article(
    flow: str,
    title: str,
    outputs: tuple[str, ...],
    predictions: dict[str, tuple[str, str]],
    quick: set[str],
    source: str,
) -> Scenario:
    """``predictions``: step -> (outputs duplicated, outputs lost), default nothing."""
    steps = FLOWS[flow]
    cells = tuple(
        Cell(
            step=step,
            label=STEP_LABELS[step],
            expected=_expect(outputs, *predictions.get(step, ("", ""))),
            number=number,
            quick=step in quick,
        )
        for number, step in enumerate(steps, start=1)
    )
    return Scenario(f"article/{flow}", title, outputs, cells, exactly_once=False, source=source)


ALL = ("rest", "db", "topic")
DEDUP = "Kafka Deduplication Patterns, part 2"

ARTICLE = (
    _article(
        "no_dedup", "No deduplication", ALL,
        {
            "rest_post": ("rest", ""), "begin_db": ("rest", ""), "insert_entity": ("rest", ""),
            "commit_db": ("rest db", ""), "produce": ("rest db topic", ""),
        },
        {"commit_db", "produce"}, DEDUP,
    ),
    _article(
        "idempotent_consumer", "Idempotent consumer", ALL,
        {
            "rest_post": ("rest", ""), "insert_entity": ("rest", ""),
            "produce": ("rest topic", ""),
        },
        {"produce", "commit_db"}, DEDUP,
    ),
    _article(
        "outbox", "Transactional outbox", ALL,
        {
            "rest_post": ("rest", ""), "begin_db": ("rest", ""), "insert_entity": ("rest", ""),
            "insert_outbox": ("rest", ""), "commit_db": ("rest db topic", ""),
        },
        {"commit_db"}, DEDUP,
    ),
    _article(
        "idempotent_consumer_outbox", "Idempotent consumer + transactional outbox", ALL,
        {
            "rest_post": ("rest", ""), "insert_entity": ("rest", ""),
            "insert_outbox": ("rest", ""),
        },
        {"insert_outbox", "commit_db"}, DEDUP,
    ),
    _article(
        "kafka_transactions", "Kafka transactions", ALL,
        {
            "rest_post": ("rest", ""), "begin_db": ("rest", ""), "insert_entity": ("rest", ""),
            "commit_db": ("rest db", ""), "begin_kafka": ("rest db", ""),
            "produce": ("rest db", ""), "send_offsets": ("rest db", ""),
        },
        {"produce", "commit_kafka"}, DEDUP,
    ),
    _article(
        "idempotent_consumer_kafka_transactions_db_first",
        "Idempotent consumer + Kafka transactions (DB commit first)", ALL,
        {
            "rest_post": ("rest", ""), "insert_entity": ("rest", ""),
            "commit_db": ("", "topic"), "begin_kafka": ("", "topic"),
            "produce": ("", "topic"), "send_offsets": ("", "topic"),
        },
        {"commit_db"}, f"{DEDUP}, appendix",
    ),
    _article(
        "idempotent_consumer_kafka_transactions_kafka_first",
        "Idempotent consumer + Kafka transactions (Kafka commit first)", ALL,
        {
            "rest_post": ("rest", ""), "insert_entity": ("rest", ""),
            "begin_kafka": ("rest", ""), "produce": ("rest", ""), "send_offsets": ("rest", ""),
            "commit_kafka": ("", "db"),
        },
        {"commit_kafka"}, f"{DEDUP}, appendix",
    ),
    _article(
        "db_offsets", "Offsets in the database transaction", ("rest", "db"),
        {
            "rest_post": ("rest", ""), "insert_entity": ("rest", ""),
            "store_offset": ("rest", ""),
        },
        {"store_offset", "commit_db"}, "Transactional offsets with Karafka",
    ),
)  # fmt: skip


def _runner(
    mode: str,
    title: str,
    outputs: tuple[str, ...],
    steps: dict[str, tuple[str, str]],
    quick: set[str],
    exactly_once: bool,
    occurrences: dict[str, int] | None = None,
) -> Scenario:
    cells = tuple(
        Cell(
            step=step,
            label=step.replace("_", " "),
            expected=_expect(outputs, *outcome),
            occurrence=(occurrences or {}).get(step, 3),
            quick=step in quick,
        )
        for step, outcome in steps.items()
    )
    source = "docs/patterns.md" if exactly_once else "processing.guarantee semantics"
    return Scenario(f"runner/{mode}", title, outputs, cells, exactly_once, source)


NOTHING = ("", "")
RUNNER = (
    _runner(
        "at_most_once", "Runner at_most_once (baseline)", ("db", "topic"),
        {
            "after_consume": NOTHING, "after_kafka_commit": ("", "db topic"),
            "after_begin": ("", "db topic"), "before_db_commit": ("", "db"),
            "after_db_commit": NOTHING, "after_produce": NOTHING,
        },
        {"after_kafka_commit"}, exactly_once=False,
    ),
    _runner(
        "at_least_once", "Runner at_least_once (baseline)", ("db", "topic"),
        {
            "after_consume": NOTHING, "after_begin": NOTHING, "before_db_commit": ("topic", ""),
            "after_db_commit": ("db topic", ""), "after_produce": ("db topic", ""),
            "after_kafka_commit": NOTHING,
        },
        {"after_db_commit"}, exactly_once=False,
    ),
    _runner(
        "db_offsets", "Runner exactly_once: offsets in the database", ("db",),
        dict.fromkeys(
            ("after_lock_assignment", "after_seek", "after_consume", "after_lock_batch",
             "after_work", "after_store_offset", "before_db_commit", "after_db_commit",
             "after_kafka_commit"),
            NOTHING,
        ),
        {"after_store_offset", "after_db_commit"}, exactly_once=True,
        occurrences={"after_lock_assignment": 1, "after_seek": 1},
    ),
    _runner(
        "inbox", "Runner exactly_once: idempotent consumer", ("db",),
        dict.fromkeys(
            ("after_consume", "after_begin", "before_db_commit", "after_db_commit",
             "after_produce", "after_kafka_commit"),
            NOTHING,
        ),
        {"after_db_commit"}, exactly_once=True,
    ),
    _runner(
        "inbox_outbox", "Runner exactly_once: idempotent consumer + outbox", ("db", "topic"),
        dict.fromkeys(
            ("after_consume", "after_begin", "before_db_commit", "after_db_commit",
             "after_produce", "after_kafka_commit"),
            NOTHING,
        ),
        {"before_db_commit"}, exactly_once=True,
    ),
    _runner(
        "kafka_transactions", "Runner exactly_once: Kafka transactions", ("topic",),
        dict.fromkeys(
            ("after_consume", "after_begin", "after_produce", "after_send_offsets",
             "after_kafka_commit"),
            NOTHING,
        ),
        {"after_send_offsets"}, exactly_once=True,
    ),
)  # fmt: skip

RELAY = Scenario(
    "relay/outbox_relay",
    "onceflow relay (topic after the consumer's inbox)",
    ("topic",),
    tuple(
        Cell(step, step.replace("_", " "), {"topic": OK}, quick=step == "after_flush")
        for step in (
            "after_claim",
            "after_select",
            "after_produce",
            "after_flush",
            "after_mark",
            "after_db_commit",
        )
    ),
    exactly_once=True,
    source="docs/patterns.md",
)

SPARK = (
    # occurrence: the batch id; with strategy direct the tasks of batch 1 write straight
    # into the table.
    Scenario(
        "spark/database_sink",
        "Spark exactly-once database sink, strategy direct (tasks commit their rows)",
        ("db",),
        tuple(
            Cell(step, step, {"db": OK}, occurrence=1, quick=step == "database.after_task_commit")
            for step in (
                "database.before_task_commit",
                "database.after_task_commit",
                "database.before_commit",
                "database.after_commit",
            )
        ),
        exactly_once=True,
        source="docs/spark.md",
    ),
    Scenario(
        "spark/database_sink_staged",
        "Spark exactly-once database sink, strategy staged (the driver promotes each batch)",
        ("db",),
        tuple(
            # Not in the quick matrix: its SIGKILL points run in tests/spark/test_sink_chaos.py.
            Cell(step, step, {"db": OK}, occurrence=1)
            for step in ("database.after_stage", "database.before_commit", "database.after_commit")
        ),
        exactly_once=True,
        source="docs/spark.md",
    ),
    Scenario(
        "spark/kafka_sink",
        "Spark exactly-once Kafka sink",
        ("topic",),
        tuple(
            Cell(step, step, {"topic": OK}, occurrence=1)
            for step in ("kafka.after_task_commit", "kafka.before_commit")
        ),
        exactly_once=True,
        source="docs/spark.md",
    ),
)


def fault_scenario(
    fault: str,
    title: str,
    *cells: tuple[str, str, str],
    engines: frozenset[str] = BOTH,
    not_on_kafka: str = "",
    all_quick: bool = False,
) -> Scenario:
    """A fault that is not a worker crash, injected at each (step, label, output) given; the
    output must come out exactly once. The first cell (``all_quick``: every cell) is in the
    quick subset."""
    return Scenario(
        f"fault/{fault}",
        title,
        ("db", "topic"),
        tuple(
            Cell(step, label, {output: OK}, fault=fault, quick=all_quick or number == 0)
            for number, (step, label, output) in enumerate(cells)
        ),
        exactly_once=True,
        engines=engines,
        not_on_kafka=not_on_kafka,
    )


EMBEDDED = frozenset({ONCEFLOW})
CLUSTER = frozenset({APACHE_KAFKA})


FAULTS = (
    fault_scenario(
        "broker_kill",
        "Broker SIGKILL during a commit",
        ("kafka_transactions:after_send_offsets", "EndTxn in flight", "topic"),
        ("db_offsets:after_db_commit", "offset commit in flight", "db"),
        engines=EMBEDDED,
        not_on_kafka="SIGKILLs and restarts the cell's own onceflow broker "
        "(on a cluster: fault/leader_kill and the coordinator kills)",
    ),
    fault_scenario(
        "database_unavailable",
        "Database unavailable for 3 s",
        ("db_offsets:after_consume", "while a batch is processed", "db"),
        ("inbox:after_consume", "while a batch is processed", "db"),
    ),
    fault_scenario(
        "network_cut",
        "Network cut worker-broker for 3 s",
        ("kafka_transactions:after_produce", "inside a Kafka transaction", "topic"),
        ("db_offsets:after_work", "inside a database transaction", "db"),
        engines=EMBEDDED,
        not_on_kafka="its TCP proxy needs a broker it starts advertising 127.0.0.2",
    ),
)

STORAGE_FAULTS = (
    fault_scenario(
        "disk_full",
        "Broker disk full for 3 s",
        ("kafka_transactions:after_consume", "during produce and EndTxn", "topic"),
        ("kafka_transactions:after_send_offsets", "EndTxn in flight", "topic"),
        ("inbox:after_db_commit", "offset commit in flight", "db"),
        engines=EMBEDDED,
        not_on_kafka="limits the file size of onceflow's broker process (RLIMIT_FSIZE)",
    ),
    fault_scenario(
        "power_loss",
        "Broker power loss (files cut to their last fsync)",
        ("kafka_transactions:after_send_offsets", "during a transaction's commit", "topic"),
        ("kafka_transactions:after_produce", "inside a Kafka transaction", "topic"),
        ("inbox:after_db_commit", "during an offset commit (group commit)", "db"),
        engines=EMBEDDED,
        not_on_kafka="cuts onceflow's broker files back to its fsync journal",
    ),
)

# RF=3, min.insync.replicas=2, acks=all; the worker pauses at the step, the node is SIGKILLed,
# the worker goes on and the node is restarted a few seconds later (failover.py).
FAILOVERS = (
    fault_scenario(
        "leader_kill",
        "Partition leader's node SIGKILLed (Apache Kafka, 3 nodes)",
        ("kafka_transactions:after_produce", "output leader, inside a Kafka transaction",
         "topic"),
        ("inbox:after_consume", "input leader, before the offsets are committed", "db"),
        engines=CLUSTER,
        all_quick=True,
    ),
    fault_scenario(
        "txn_coordinator_kill",
        "Transaction coordinator's node SIGKILLed (Apache Kafka, 3 nodes)",
        ("kafka_transactions:after_send_offsets", "before EndTxn", "topic"),
        engines=CLUSTER,
        all_quick=True,
    ),
    fault_scenario(
        "group_coordinator_kill",
        "Group coordinator's node SIGKILLed (Apache Kafka, 3 nodes)",
        ("kafka_transactions:after_produce", "before TxnOffsetCommit", "topic"),
        ("db_offsets:after_db_commit", "before the Kafka offset commit", "db"),
        engines=CLUSTER,
        all_quick=True,
    ),
    fault_scenario(
        "two_nodes_down",
        "Two of three nodes down, then one back (Apache Kafka, 3 nodes)",
        ("kafka_transactions:after_produce", "inside a Kafka transaction", "topic"),
        engines=CLUSTER,
        all_quick=True,
    ),
)  # fmt: skip

SCENARIOS: tuple[Scenario, ...] = (
    *ARTICLE, *RUNNER, RELAY, *SPARK, *FAULTS, *STORAGE_FAULTS, *FAILOVERS,
)  # fmt: skip


def select(
    quick: bool = False,
    patterns: tuple[str, ...] = (),
    families: tuple[str, ...] = (),
    engine: str = ONCEFLOW,
) -> list[tuple[Scenario, Cell]]:
    """The cells to run on ``engine``: all, or the quick subset; optionally only some
    patterns/families."""
    chosen = []
    for scenario in SCENARIOS:
        if engine not in scenario.engines:
            continue
        if families and scenario.family not in families:
            continue
        if patterns and not any(p in (scenario.name, scenario.pattern) for p in patterns):
            continue
        for cell in scenario.cells:
            if not quick or cell.quick:
                chosen.append((scenario, cell))
    return chosen
