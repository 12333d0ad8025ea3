"""The CPU each test costs, child processes included: what to make cheaper when the suite is
CPU-bound (on two cores it is: six xdist workers leave the CPU idle about 10% of a run).

    python scripts/test_cpu.py sample /tmp/cpu.txt &
    ONCEFLOW_TEST_TIMELINE=/tmp/timeline.txt make test
    kill %1
    python scripts/test_cpu.py report /tmp/timeline.txt /tmp/cpu.txt [--top 30]

``sample`` reads every process's CPU ticks once a second and adds each process's share to
the xdist worker it descends from (brokers, Spark drivers, Kafka nodes a test starts), until
SIGTERM or SIGINT; then it writes one line per second and worker: ``SECOND WORKER CPU_S``.
A worker is known by its command line; its name (``gw0``...) by ``PYTEST_XDIST_WORKER`` in
the environment of any process it started. ``report`` joins that with the timeline
``tests/conftest.py`` writes: each second's CPU goes to the test its worker was running
then. A process that outlives its parent (reparented to init) counts as ``none``
(``(none, no test)`` in the report). It samples the whole machine: run one pytest session
at a time (two sessions' ``gw0`` add up).
"""

from __future__ import annotations

import argparse
import bisect
import os
import signal
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
WORKER_COMMAND = b"import sys;exec"  # execnet's bootstrap line, in every xdist worker
WORKER_VARIABLE = b"PYTEST_XDIST_WORKER="


class Sampler:
    def __init__(self) -> None:
        self.ticks: dict[tuple[int, str], int] = {}  # (pid, start time) -> CPU ticks
        self.owner: dict[tuple[int, str], str | None] = {}  # -> "pid<worker pid>"
        self.names: dict[str, str] = {}  # "pid<worker pid>" -> "gw0"
        self.seconds: Counter[tuple[int, str]] = Counter()
        self.first = True

    def sample(self) -> None:
        now = int(time.time())
        parents: dict[int, int] = {}
        keys: dict[int, tuple[int, str]] = {}
        current: dict[tuple[int, str], int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            pid = int(entry)
            parents[pid] = int(fields[1])
            keys[pid] = (pid, fields[19])
            current[keys[pid]] = int(fields[11]) + int(fields[12])
        for key, ticks in current.items():
            before = self.ticks.get(key, ticks if self.first else 0)
            self.ticks[key] = ticks
            if ticks > before:
                worker = self._worker_of(key[0], parents, keys) or "none"
                self.seconds[(now, worker)] += (ticks - before) / TICKS
        self.first = False

    def _worker_of(
        self, pid: int, parents: dict[int, int], keys: dict[int, tuple[int, str]]
    ) -> str | None:
        chain: list[tuple[int, str]] = []
        worker, name = None, None
        while pid > 1 and pid in keys:
            key = keys[pid]
            if key in self.owner:
                worker = self.owner[key]
                break
            chain.append(key)
            try:
                environment = Path(f"/proc/{pid}/environ").read_bytes()
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                environment, command = b"", b""
            at = environment.find(WORKER_VARIABLE)
            if at >= 0 and name is None:
                name = environment[at + len(WORKER_VARIABLE) :].split(b"\0", 1)[0].decode()
            if WORKER_COMMAND in command:
                worker = f"pid{pid}"
                break
            pid = parents.get(pid, 0)
        if worker is not None and name is not None:
            self.names[worker] = name
        for key in chain:
            self.owner[key] = worker
        return worker

    def write(self, path: Path) -> None:
        with path.open("w") as out:
            for (second, worker), seconds in sorted(self.seconds.items()):
                out.write(f"{second} {self.names.get(worker, worker)} {seconds:.2f}\n")


def sample(path: Path) -> None:
    sampler = Sampler()

    def stop(*_: object) -> None:
        sampler.write(path)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        sampler.sample()
        time.sleep(1)


def report(timeline: Path, samples: Path, top: int) -> None:
    runs: dict[str, list[tuple[float, str]]] = defaultdict(list)  # worker -> (start, test)
    durations: Counter[str] = Counter()
    for line in timeline.read_text().splitlines():
        worker, _phase, start, end, node = line.split(" ", 4)
        test = node.split("@")[0]
        runs[worker].append((float(start), test))
        durations[test.split("::")[0]] += float(end) - float(start)
    for entries in runs.values():
        entries.sort()
    starts = {worker: [start for start, _ in entries] for worker, entries in runs.items()}
    by_test: Counter[str] = Counter()
    by_module: Counter[str] = Counter()
    for line in samples.read_text().splitlines():
        second, worker, seconds = line.split()
        at = bisect.bisect_right(starts.get(worker, []), int(second) + 0.5) - 1
        test = runs[worker][at][1] if at >= 0 else f"({worker}, no test)"
        by_test[test] += float(seconds)
        by_module[test.split("::")[0]] += float(seconds)
    print(f"CPU-s in all: {sum(by_test.values()):,.0f}")
    print(f"{'CPU-s':>8} {'worker-s':>9}  module")
    for module, seconds in by_module.most_common(top):
        print(f"{seconds:8.1f} {durations.get(module, 0):9.1f}  {module}")
    print(f"\n{'CPU-s':>8}  test")
    for test, seconds in by_test.most_common(top):
        print(f"{seconds:8.1f}  {test}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    sampling = commands.add_parser("sample", help="sample until SIGTERM, then write OUT")
    sampling.add_argument("out", type=Path)
    reporting = commands.add_parser("report", help="CPU per module and per test")
    reporting.add_argument("timeline", type=Path)
    reporting.add_argument("samples", type=Path)
    reporting.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    if args.command == "sample":
        sample(args.out)
    else:
        report(args.timeline, args.samples, args.top)


if __name__ == "__main__":
    main()
