"""The order the suite runs in, and where its time goes.

Order: the Spark tests (a JVM and Python workers per query: both cores busy) and the
proofs (``onceflow prove`` runs: mostly waiting on their trials, the CPU 60% idle with four
of them side by side) are each spread evenly among the other integration tests, so that
under ``-n`` the CPU-bound and the waiting tests run side by side instead of each kind
together (the Spark tests saturating the machine, the proofs at the end leaving it idle
for five minutes); the unit tests (quick) come last and fill the workers' ends.

Spark's driver JVMs (the session's and every job a test starts, which inherit the
environment) run with ``tests.kit.jvm.SHORT_LIVED_JVM_OPTIONS`` (C1 only, the serial
collector: tests/spark/test_batch.py and test_streaming.py 26 -> 16 CPU seconds, 18.7 ->
15.5 s). A ``PYSPARK_SUBMIT_ARGS`` of the caller's own is kept.

Time: at the end of a run, the seconds each xdist worker and each xdist group (one worker
each) was busy and the modules that took longest (setup, call and teardown summed), so
that a CI log shows what to move or speed up next. ``ONCEFLOW_TEST_TIMELINE=FILE`` also
writes each test's worker, start and end (seconds since the epoch) to FILE.
"""

from __future__ import annotations

import os
from collections import defaultdict

import pytest

from tests.kit.jvm import SHORT_LIVED_JVM_OPTIONS

os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    f'--conf "spark.driver.defaultJavaOptions={SHORT_LIVED_JVM_OPTIONS}" pyspark-shell',
)

CPU_BOUND = "tests/spark/"
WAITING = "tests/integration/test_prove"
LAST = "tests/unit/"
SPREAD_UNTIL = 0.8

MODULES_SHOWN = 25
_module_seconds: dict[str, float] = defaultdict(float)
_worker_seconds: dict[str, float] = defaultdict(float)
_group_seconds: dict[str, float] = defaultdict(float)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    spark = [item for item in items if item.nodeid.startswith(CPU_BOUND)]
    proofs = [item for item in items if item.nodeid.startswith(WAITING)]
    last = [item for item in items if item.nodeid.startswith(LAST)]
    rest = [item for item in items if not item.nodeid.startswith((CPU_BOUND, WAITING, LAST))]
    items[:] = [*spread(spark, spread(proofs, rest)), *last]


def spread(few: list[pytest.Item], many: list[pytest.Item]) -> list[pytest.Item]:
    """``many`` in order with ``few`` in order among them at even intervals, the last of
    ``few`` at ``SPREAD_UNTIL`` of ``many``: each xdist worker holds up to three tests
    queued, and a long one among the last kept one worker busy for a minute after the
    others had run out of tests."""
    merged: list[pytest.Item] = []
    span = len(many) * SPREAD_UNTIL
    taken = 0
    for index, item in enumerate(many):
        merged.append(item)
        while taken < len(few) and taken * span <= index * len(few):
            merged.append(few[taken])
            taken += 1
    return [*merged, *few[taken:]]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    _module_seconds[module] += report.duration
    node = getattr(report, "node", None)  # the xdist worker, on the controller
    worker = getattr(getattr(node, "gateway", None), "id", "main")
    _worker_seconds[worker] += report.duration
    if "@" in report.nodeid:  # an xdist group: all its tests run on one worker
        _group_seconds[report.nodeid.rsplit("@", 1)[1]] += report.duration
    timeline = os.environ.get("ONCEFLOW_TEST_TIMELINE")
    if timeline and node is not None:
        with open(timeline, "a") as out:
            times = f"{report.start:.1f} {report.stop:.1f}"
            out.write(f"{worker} {report.when} {times} {report.nodeid}\n")


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if not _module_seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per worker and module (s)")
    write("  ".join(f"{w} {s:.0f}" for w, s in sorted(_worker_seconds.items())))
    write("  ".join(f"group {g} {s:.0f}" for g, s in sorted(_group_seconds.items())))
    ranked = sorted(_module_seconds.items(), key=lambda item: -item[1])
    for module, seconds in ranked[:MODULES_SHOWN]:
        write(f"{seconds:8.1f}  {module}")
    write(f"{sum(_module_seconds.values()):8.1f}  all {len(_module_seconds)} modules")
