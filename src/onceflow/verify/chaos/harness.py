"""Run a list of chaos cells on one shared broker, side by side, and collect the matrix."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from onceflow.broker.process import BrokerProcess
from onceflow.verify.chaos.cells import CellResult, ChaosEnvironment
from onceflow.verify.chaos.databases import CellDatabases
from onceflow.verify.chaos.matrix import ChaosMatrix, ordered
from onceflow.verify.chaos.scenarios import Cell, Scenario


def run_matrix(
    cells: Sequence[tuple[Scenario, Cell]],
    work: Path,
    *,
    database_url: str | None = None,
    jobs: int = 2,
    on_result: Callable[[CellResult], None] | None = None,
) -> ChaosMatrix:
    """Run every cell (``jobs`` at a time) and return the results in catalogue order."""
    work.mkdir(parents=True, exist_ok=True)
    databases = CellDatabases(work, database_url)
    broker = BrokerProcess(work / "broker", log_path=work / "broker.log").start()
    results: list[CellResult] = []
    try:
        environment = ChaosEnvironment(work, broker.bootstrap, databases)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(environment.run, scenario, cell) for scenario, cell in cells]
            for future in as_completed(futures):
                result = future.result()
                results.append(result)
                if on_result is not None:
                    on_result(result)
    finally:
        broker.stop()
        databases.drop_all()
    return ChaosMatrix(ordered(results), database=databases.dialect)
