"""Run the orders demo many times from a clean state and count how many runs pass.

    python scripts/demo_runs.py --runs 20 [demo options...]

Each run is ``rm -rf .demo && python examples/orders/demo.py``; its output is kept in
``.demo-runs/run-NN.log``. Exit code 0 only if every run passed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--logs", type=Path, default=ROOT / ".demo-runs")
    args, demo_args = parser.parse_known_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    failed: list[int] = []
    for run in range(1, args.runs + 1):
        shutil.rmtree(ROOT / ".demo", ignore_errors=True)
        log = args.logs / f"run-{run:02d}.log"
        started = time.monotonic()
        with log.open("w") as out:
            code = subprocess.call(
                [sys.executable, str(ROOT / "examples/orders/demo.py"), *demo_args],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        seconds = time.monotonic() - started
        if code != 0:
            failed.append(run)
            shutil.copytree(ROOT / ".demo", args.logs / f"run-{run:02d}-state", dirs_exist_ok=True)
        print(
            f"run {run:2d}: {'ok' if code == 0 else f'FAILED (exit {code})'} "
            f"in {seconds:.0f} s, log {log}",
            flush=True,
        )
    print(f"{args.runs - len(failed)} of {args.runs} demo runs passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
