"""The crash points a Runner reaches, in flow order, for its configured pattern.

The names are the ones ``Runner`` passes to ``CrashPoints.reached`` (docs/patterns.md).
Steps reached once per process start (``after_lock_assignment``) are killed at their
first occurrence only.
"""

from __future__ import annotations

from onceflow.patterns.guarantees import CommitTiming, Pattern, Plan

ONCE_PER_START = frozenset({"after_lock_assignment"})


def runner_steps(plan: Plan, has_database: bool) -> list[str]:
    if plan.pattern is Pattern.DB_OFFSETS:
        return ["after_lock_assignment", "after_consume", "after_lock_batch", "after_work",
                "after_store_offset", "before_db_commit", "after_db_commit",
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
