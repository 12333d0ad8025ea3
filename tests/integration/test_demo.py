"""``onceflow demo`` runs end to end and reports a clean check."""

from __future__ import annotations

import subprocess
import sys


def test_onceflow_demo_runs_and_checks_order(tmp_path):
    command = [sys.executable, "-m", "onceflow", "demo", "--data-dir", str(tmp_path / "b")]
    for run in range(2):  # the second run finds the first run's records still there
        result = subprocess.run(
            [*command, "--records", "300"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "produced 300" in result.stdout and "consumed 300" in result.stdout
        assert f"{300 * run} records from" in result.stdout.replace("\n", " ")
        assert ": ok" in result.stdout
