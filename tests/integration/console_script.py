"""The installed ``onceflow`` console script as a user runs it: a process, stdout a pipe.

CLI tests run the script pip installed next to the interpreter (``.venv/bin/onceflow``),
not the command's functions, so the entry point, the imports and the exit codes are what
a user gets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("onceflow")
# The command must not pick up a bootstrap, environment or width from the shell running
# the tests.
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("ONCEFLOW_")},
    "COLUMNS": "80",
    "PYTHONUNBUFFERED": "1",
}


def onceflow(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None, stdin: str | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:  # fmt: skip
    """Run ``onceflow ARGS...`` (in ``cwd``); its stdout and stderr as text."""
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**ENV, **(env or {})},
        input=stdin,
        cwd=cwd,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, code: int) -> str:
    """The exit code is ``code``, stdout is empty and stderr is one ``error: ...`` line;
    return that line."""
    what = f"exit {result.returncode}, stdout {result.stdout!r}, stderr {result.stderr!r}"
    assert result.returncode == code, what
    assert result.stdout == "", what
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, what
    assert "Traceback" not in result.stderr, what
    return result.stderr.rstrip("\n")
