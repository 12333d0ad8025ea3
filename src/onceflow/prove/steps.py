"""The steps a pipeline reaches, in flow order: where prove can kill it by name.

A Runner's crash points depend on its pattern (the names ``Runner`` passes to
``CrashPoints.reached``, docs/patterns.md); steps reached once per process start
(``after_lock_assignment``, ``after_seek``) are killed at their first occurrence only.
A Spark job that writes through onceflow's sinks reaches their crash points (crash_points:
``database.*`` and ``kafka.*``), armed by micro-batch.
"""

from __future__ import annotations

import re

from onceflow.patterns.guarantees import CommitTiming, Pattern, Plan

ONCE_PER_START = frozenset({"after_lock_assignment", "after_seek"})
DATABASE_SINK = re.compile(r"""format\(\s*["']onceflow-database["']""")
KAFKA_SINK = re.compile(r"""format\(\s*["']onceflow-kafka["']""")
STAGED = re.compile(r"""["']strategy["']\s*[,:=)]\s*["']staged["']|strategy\s*=\s*["']staged""")


def runner_steps(plan: Plan, has_database: bool) -> list[str]:
    if plan.pattern is Pattern.DB_OFFSETS:
        return ["after_lock_assignment", "after_seek", "after_consume", "after_lock_batch",
                "after_work", "after_store_offset", "before_db_commit", "after_db_commit",
                "after_kafka_commit"]  # fmt: skip
    if plan.pattern is Pattern.KAFKA_TRANSACTIONS:
        database = ["before_db_commit", "after_db_commit"] if has_database else []
        return ["after_consume", "after_begin", *database, "after_produce",
                "after_send_offsets", "after_kafka_commit"]  # fmt: skip
    steps = ["after_consume"]
    if plan.commit is CommitTiming.BEFORE:
        steps.append("after_kafka_commit")
    if has_database:
        steps += ["after_begin", "before_db_commit", "after_db_commit"]
    steps.append("after_produce")
    if plan.commit is not CommitTiming.BEFORE:
        steps.append("after_kafka_commit")
    return steps


def spark_sink_steps(source: str) -> list[str]:
    """The crash points of the onceflow sinks a Spark job's source text writes through."""
    steps = []
    if DATABASE_SINK.search(source):
        if STAGED.search(source):
            steps += ["database.after_stage"]
        else:
            steps += ["database.before_task_commit", "database.after_task_commit"]
        steps += ["database.before_commit", "database.after_commit"]
    if KAFKA_SINK.search(source):
        steps += ["kafka.before_task_commit", "kafka.after_task_commit", "kafka.before_commit"]
    return steps
