"""The process a Runner-mode proof starts (and kills): the user's handler in a Runner.

    python -m onceflow.prove.runner_host MODULE:HANDLER --config runner.toml

The broker comes from ``ONCEFLOW_BOOTSTRAP``, the Runner's database in this trial from
``ONCEFLOW_PROVE_RUNNER_DATABASE_URL``, the crash or pause point from ``ONCEFLOW_CRASH_AT`` /
``ONCEFLOW_PAUSE_AT`` (the Runner reads them). Exits 0 once idle with its input drained.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from onceflow.patterns import Runner
from onceflow.prove.errors import ProveError
from onceflow.prove.handler import load_handler
from onceflow.prove.runner_file import RunnerFile

RUNNER_DATABASE_VAR = "ONCEFLOW_PROVE_RUNNER_DATABASE_URL"


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] != "--config":
        print("usage: python -m onceflow.prove.runner_host MODULE:HANDLER --config FILE",
              file=sys.stderr)  # fmt: skip
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    try:
        file = RunnerFile.load(Path(argv[2]))
        handler = load_handler(argv[0], [file.path.parent, Path.cwd()])
    except ProveError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    database_url = os.environ.get(RUNNER_DATABASE_VAR)
    config = file.config(os.environ["ONCEFLOW_BOOTSTRAP"], database_url)
    stats = Runner(config, handler).run()
    print(f"onceflow prove: runner done, {stats.processed} records processed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
