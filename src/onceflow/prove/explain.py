"""Common causes of a broken exactly-once pipeline that can be spotted cheaply: in the
Runner's settings, in the pipeline's source text, and in what the audit found.

Each cause names the evidence and the fix. These are hints next to a broken verdict,
never the verdict: the audit decides what happened, and a pipeline that held gets none.
The source text they read is the code the pipeline runs (``reachable.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onceflow.faults.schedule import COORDINATOR_CUT, PAUSE
from onceflow.patterns.guarantees import CommitTiming, Pattern

if TYPE_CHECKING:
    from onceflow.prove.target import Target
    from onceflow.prove.trial import TrialResult


@dataclass(frozen=True, slots=True)
class Cause:
    name: str
    evidence: str
    fix: str


AUTO_COMMIT = re.compile(r"""enable\.auto\.commit["']?\s*[:=,]\s*(True|["']true["'])""")
READ_UNCOMMITTED = re.compile(r"read_uncommitted")
PRODUCER = re.compile(r"\bProducer\s*\(")
TRANSACTIONAL = re.compile(r"transactional\.id|begin_transaction")
OWN_DATABASE = re.compile(r"\b(sqlite3|psycopg)\.connect\s*\(|\bconnect\s*\(\s*os\.environ")
CONSUMER_COMMIT = re.compile(r"\b\w*consumer\w*\.(commit|store_offsets)\s*\(", re.IGNORECASE)
DB_COMMIT = re.compile(r"\b(?!consumer)\w*(db|conn|connection|tx)\w*\.commit\s*\(|^\s*with\s+"
                       r"\w*(db|conn|connection)\w*\s*:", re.IGNORECASE | re.MULTILINE)  # fmt: skip
AUTO_COMMIT_NAMED = re.compile(r"enable\.auto\.commit|ENABLE_AUTO_COMMIT|autoCommit")
JAVA_CONSUMER = re.compile(r"\bnew\s+KafkaConsumer\b")
KAFKAJS_RUN = re.compile(r"\.run\(\s*\{")
CONSUMER_NAME = re.compile(r"\b(\w+)\s*=\s*(?:[\w.]+\.)?(?:Deserializing)?Consumer\s*\(")
DATABASE_NAME = re.compile(r"\b(\w+)\s*=\s*(?:sqlite3|psycopg|psycopg2)\.connect\s*\(")
SPARK_STREAM = re.compile(r"\breadStream\b")
STARTS_AT_EARLIEST = re.compile(
    r"""(startingOffsets|auto\.offset\.reset|AUTO_OFFSET_RESET_CONFIG)["']?\s*[,:=)]\s*"""
    r"""(["'](earliest|smallest|beginning|\{)|\S*EARLIEST)|fromBeginning\s*:\s*true""",
)
ZOMBIE_FAULTS = (COORDINATOR_CUT, PAUSE)  # a worker goes on after its partitions moved


def _calls(pattern: re.Pattern[str], text: str) -> list[int]:
    return [m.start() for m in pattern.finditer(text)]


def auto_commits_by_default(text: str) -> bool:
    """A consumer created without a word about auto-commit, in Python, Java or kafkajs."""
    if AUTO_COMMIT_NAMED.search(text):
        return False
    return bool(CONSUMER_NAME.search(text) or JAVA_CONSUMER.search(text)
                or KAFKAJS_RUN.search(text))  # fmt: skip


def consumer_commits(text: str) -> list[int]:
    """Where the source commits a consumer's offsets: ``consumer.commit(``, or ``c.commit(``
    where ``c = Consumer(...)``."""
    names = [re.escape(m[1]) for m in CONSUMER_NAME.finditer(text)]
    found = _calls(CONSUMER_COMMIT, text)
    if names:
        named = re.compile(rf"\b({'|'.join(names)})\.(commit|store_offsets)\s*\(")
        found += _calls(named, text)
    return sorted(set(found))


def database_commits(text: str) -> list[int]:
    """Where the source commits a database transaction: ``db.commit(``, ``with conn:``,
    or the same on a name bound to ``sqlite3.connect(...)`` / ``psycopg.connect(...)``."""
    names = [re.escape(m[1]) for m in DATABASE_NAME.finditer(text)]
    found = _calls(DB_COMMIT, text)
    if names:
        alternatives = "|".join(names)
        named = re.compile(rf"\b({alternatives})\.commit\s*\(|^\s*with\s+({alternatives})\s*:",
                           re.MULTILINE)  # fmt: skip
        found += _calls(named, text)
    consumers = set(consumer_commits(text))
    return sorted(set(found) - consumers)


def explain(target: Target, trials: Sequence[TrialResult]) -> list[Cause]:
    found = {kind for trial in trials for kind, n in trial.report.counts.items() if n}
    if not found:
        return []
    lost, duplicated = "missing" in found, "duplicated" in found
    causes: list[Cause] = []
    if target.plan is not None:
        causes += _runner_causes(target, lost, duplicated)
    for name, text in target.sources.items():
        causes += _source_causes(name, text, target, lost, duplicated)
    if lost:
        causes += _started_at_latest(trials, target)
    if duplicated:
        zombie = _zombie(trials)
        causes += zombie
        causes += _missing_unique_keys(trials, target, offsets_advice=not zombie)
    return list(dict.fromkeys(causes))


def _started_at_latest(trials: Sequence[TrialResult], target: Target) -> list[Cause]:
    """Missing events that are the first records of their input partitions, and nothing
    else: written before the pipeline first read, by a pipeline that starts at the latest
    offsets (Kafka's auto.offset.reset and Spark's streaming startingOffsets default)."""
    texts = list(target.sources.values())
    if any(STARTS_AT_EARLIEST.search(text) for text in texts):
        return []
    for trial in trials:
        missing: dict[str, set[int]] = {}
        for anomaly in trial.report.of_kind("missing"):
            topic = anomaly.detail.get("input_topic")
            partition = anomaly.detail.get("input_partition")
            offset = anomaly.detail.get("input_offset")
            if partition is None or offset is None:
                return []
            name = f"{topic}-{partition}" if topic else f"partition {partition}"
            missing.setdefault(name, set()).add(offset)
        if not missing or any(m != set(range(max(m) + 1)) for m in missing.values()):
            continue
        spans = ", ".join(f"{name}: offsets 0-{max(m)}" for name, m in sorted(missing.items()))
        if any(SPARK_STREAM.search(text) for text in texts):
            setting = "startingOffsets, and a streaming query's default is latest"
            fix = (
                'read from the start: .option("startingOffsets", "earliest") (a query '
                "that restarts from its checkpoint ignores it)"
            )
        else:
            setting = "auto.offset.reset to earliest, and Kafka's default is latest"
            fix = "set auto.offset.reset=earliest (a group with committed offsets ignores it)"
        return [Cause(
            "starts at the latest offsets",
            f"trial {trial.number}: the missing events are the first records of their "
            f"partitions ({spans}), written before the pipeline first read; it does not "
            f"set {setting}: it never reads what came before it started",
            fix,
        )]  # fmt: skip
    return []


def _zombie(trials: Sequence[TrialResult]) -> list[Cause]:
    """Duplicates in a trial whose only faults left a worker running after its partitions
    had moved to another: nobody died, two wrote."""
    for trial in trials:
        landed = trial.landed
        if not trial.report.counts.get("duplicated") or not landed:
            continue
        if all(fault.action in ZOMBIE_FAULTS for fault in landed):
            faults = ", ".join(sorted({fault.action for fault in landed}))
            return [Cause(
                "a zombie's writes not fenced",
                f"trial {trial.number} duplicated with no worker killed, only {faults}: a "
                "worker whose partitions another worker had taken over went on writing the "
                "records it had fetched",
                "fence each write: commit it only if the stored offset is still where the "
                "batch began (a compare-and-set in the same transaction), or give the output "
                "a unique key; Kafka transactions fence a zombie by its producer epoch",
            )]  # fmt: skip
    return []


def _runner_causes(target: Target, lost: bool, duplicated: bool) -> list[Cause]:
    plan = target.plan
    assert plan is not None
    causes = []
    if plan.commit is CommitTiming.BEFORE:
        causes.append(Cause(
            "offsets committed before the work",
            "processing_guarantee = at_most_once: the offset is committed before the handler "
            "runs, so a kill in between skips the batch" + (" (records were lost)" * lost),
            "use exactly_once with pattern db_offsets (or inbox / kafka_transactions)",
        ))  # fmt: skip
    elif plan.pattern is Pattern.NONE:
        causes.append(Cause(
            "process-then-commit without deduplication",
            "processing_guarantee = at_least_once: a kill after the work and before the "
            "offset commit processes the batch again" + (" (duplicates found)" * duplicated),
            "use exactly_once: db_offsets stores the offsets in the same database "
            "transaction; inbox removes redeliveries",
        ))  # fmt: skip
    return causes


def _source_causes(
    name: str, text: str, target: Target, lost: bool, duplicated: bool
) -> list[Cause]:
    causes = []
    if AUTO_COMMIT.search(text):
        causes.append(Cause(
            "enable.auto.commit=true", f"{name} turns auto-commit on: offsets are committed "
            "in the background, before or after the work, whatever happened to it",
            "set enable.auto.commit=false and commit (or store) offsets with the output",
        ))  # fmt: skip
    elif auto_commits_by_default(text):
        causes.append(Cause(
            "enable.auto.commit left at its default (true)", f"{name} creates a consumer "
            "without setting enable.auto.commit (autoCommit in kafkajs): offsets are "
            "committed in the background, before or after the work, whatever happened to it",
            "set enable.auto.commit=false and commit (or store) offsets with the output",
        ))  # fmt: skip
    if READ_UNCOMMITTED.search(text):
        causes.append(Cause(
            "read_uncommitted consumer", f"{name} reads with isolation.level="
            "read_uncommitted: it sees records of aborted transactions",
            "read with isolation.level=read_committed",
        ))  # fmt: skip
    producers = len(PRODUCER.findall(text))
    in_transaction = target.plan is not None and target.plan.uses_kafka_transactions
    if producers and (in_transaction or (TRANSACTIONAL.search(text) and producers > 1)):
        causes.append(Cause(
            "non-transactional producer in a transactional loop",
            f"{name} creates a Producer of its own; what it sends is not part of the "
            "Kafka transaction, so a kill before the commit sends it again"
            + (" (duplicates visible to read_committed)" * duplicated),
            "produce through the transaction (ctx.produce in a Runner handler, or the "
            "transactional producer that sends the offsets)",
        ))  # fmt: skip
    if target.plan is not None and OWN_DATABASE.search(text):
        causes.append(Cause(
            "DB write and offset commit in separate transactions",
            f"{name} opens a database connection of its own; its commits are not the "
            "Runner's transaction that stores the offsets",
            "write through ctx.tx, the batch's transaction",
        ))  # fmt: skip
    commits = consumer_commits(text)
    db_commits = database_commits(text)
    if target.plan is None and commits and db_commits:
        if lost and min(commits) < min(db_commits):
            causes.append(Cause(
                "offsets committed before the DB transaction",
                f"{name} commits the consumer's offsets before its database commit",
                "commit the offsets after the work, or better store them in the same "
                "database transaction as the output",
            ))  # fmt: skip
        elif duplicated and max(commits) > min(db_commits):
            causes.append(Cause(
                "offsets committed after the DB transaction, separately",
                f"{name} commits the offsets to Kafka after its database commit: a kill "
                "in between redoes the batch",
                "store the offsets in the same database transaction as the output and "
                "start from them (seek) after a restart",
            ))  # fmt: skip
    return causes


def _missing_unique_keys(
    trials: Sequence[TrialResult], target: Target, offsets_advice: bool = True
) -> list[Cause]:
    """Duplicated rows in a table without a unique key on the id column."""
    causes = []
    also = " (or keep the offsets in the same transaction)" if offsets_advice else ""
    column = target.mapping.id_field.split(".")[0]
    for trial in trials:
        if trial.database is None:
            continue
        for output in target.outputs:
            if output.kind != "table" or not trial.report.of_kind("duplicated", str(output)):
                continue
            if not trial.database.unique_on(output.name, column):
                causes.append(Cause(
                    "missing unique key",
                    f"table {output.name} has no PRIMARY KEY or UNIQUE index on {column}: "
                    "a redelivered event is inserted again",
                    f"add UNIQUE ({column}) and INSERT ... ON CONFLICT DO NOTHING{also}",
                ))  # fmt: skip
    return causes
