"""Where the suite's time goes: at the end of a run, the seconds each xdist worker and each
xdist group (one worker each) was busy and the modules that took longest (setup, call and
teardown summed), so that a CI log shows what to move or speed up next."""

from __future__ import annotations

from collections import defaultdict

import pytest

MODULES_SHOWN = 25
_module_seconds: dict[str, float] = defaultdict(float)
_worker_seconds: dict[str, float] = defaultdict(float)
_group_seconds: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    _module_seconds[module] += report.duration
    node = getattr(report, "node", None)  # the xdist worker, on the controller
    worker = getattr(getattr(node, "gateway", None), "id", "main")
    _worker_seconds[worker] += report.duration
    if "@" in report.nodeid:  # an xdist group: all its tests run on one worker
        _group_seconds[report.nodeid.rsplit("@", 1)[1]] += report.duration


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
