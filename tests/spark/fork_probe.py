"""Run through the fork server by tests/spark/test_fork_server.py: does what its first
argument says, so that a test can see what the forked child got."""

from __future__ import annotations

import atexit
import gc
import json
import os
import signal
import sys
import time


def report() -> None:
    print(
        json.dumps(
            {
                "pid": os.getpid(),
                "ppid": os.getppid(),
                "cwd": os.getcwd(),
                "argv": sys.argv,
                "probe": os.environ.get("PROBE"),
                "path0": sys.path[0],
                "name": __name__,
                "frozen": gc.get_freeze_count(),
                "tracked": len(gc.get_objects()),
            }
        ),
        flush=True,
    )


def wait() -> None:
    def terminated(*_: object) -> None:
        print("terminated", flush=True)
        sys.exit(7)

    signal.signal(signal.SIGTERM, terminated)
    print(f"waiting {os.getpid()}", flush=True)
    while True:
        time.sleep(1)


def main(command: str, *args: str) -> None:
    if command == "report":
        report()
    elif command == "echo":
        sys.stdout.write(sys.stdin.readline())
    elif command == "exit":
        sys.exit(int(args[0]))
    elif command == "raise":
        raise RuntimeError("the probe failed")
    elif command == "wait":
        wait()
    elif command == "atexit":
        atexit.register(lambda: print("atexit ran", flush=True))


if __name__ == "__main__":
    main(*sys.argv[1:])
