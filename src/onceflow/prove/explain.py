"""Common causes of a broken exactly-once pipeline that can be spotted cheaply: in the
Runner's settings, in the pipeline's source text, and in what the audit found.

Each cause names the evidence and the fix. These are hints next to the verdict, never
the verdict: the audit decides what happened.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onceflow.db import quote_identifier
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


def explain(target: Target, trials: Sequence[TrialResult]) -> list[Cause]:
    found = {kind for trial in trials for kind, n in trial.report.counts.items() if n}
    lost, duplicated = "missing" in found, "duplicated" in found
    causes: list[Cause] = []
    if target.plan is not None:
        causes += _runner_causes(target, lost, duplicated)
    for name, text in target.sources.items():
        causes += _source_causes(name, text, target, lost, duplicated)
    if duplicated:
        causes += _missing_unique_keys(trials, target)
    return list(dict.fromkeys(causes))


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
    commits = [m.start() for m in CONSUMER_COMMIT.finditer(text)]
    db_commits = [m.start() for m in DB_COMMIT.finditer(text)]
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


def _missing_unique_keys(trials: Sequence[TrialResult], target: Target) -> list[Cause]:
    """Duplicated rows in a table without a unique key on the id column."""
    causes = []
    for trial in trials:
        if target.database_name is None:
            continue
        database = trial.directory / target.database_name
        if not database.exists():
            continue
        for output in target.outputs:
            column = target.mapping.id_field.split(".")[0]
            if output.kind != "table" or not trial.report.of_kind("duplicated", f"table:"
                                                                  f"{output.name}"):  # fmt: skip
                continue
            if not _unique_on(database, output.name, column):
                causes.append(Cause(
                    "missing unique key",
                    f"table {output.name} has no PRIMARY KEY or UNIQUE index on {column}: "
                    "a redelivered event is inserted again",
                    f"add UNIQUE ({column}) and INSERT ... ON CONFLICT DO NOTHING (or keep "
                    "the offsets in the same transaction)",
                ))  # fmt: skip
    return causes


def _unique_on(database: object, table: str, column: str) -> bool:
    try:
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
            quoted = quote_identifier(table)
            for row in db.execute(f"PRAGMA table_info({quoted})"):
                if row[1] == column and row[5]:
                    return True
            for index in db.execute(f"PRAGMA index_list({quoted})"):
                if index[2]:
                    cols = [r[2] for r in db.execute(f'PRAGMA index_info("{index[1]}")')]
                    if cols == [column]:
                        return True
    except sqlite3.Error:
        return True  # cannot tell: say nothing
    return False
