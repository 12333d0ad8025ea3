"""How long a broker takes from its start to a client's first answered request: onceflow's
embedded broker (a subprocess, as ``onceflow broker`` runs) and Apache Kafka (one node).

    python benchmarks/broker_start.py [--rounds 5] [--engines onceflow,kafka]

Each round starts each engine on an empty data directory, asks it for its metadata with
confluent-kafka's AdminClient and stops it; the time is from before the process starts to
the answer. Prints the median per engine and the ratio onceflow / Kafka (Kafka runs with
its start script's JVM settings and the class archive ``kafka-cluster --fetch`` makes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench_engines import parse_engines, start_engine


def time_to_first_answer(name: str) -> float:
    from confluent_kafka.admin import AdminClient

    with tempfile.TemporaryDirectory() as work:
        began = time.monotonic()
        engine = start_engine(name, Path(work))
        try:
            AdminClient({"bootstrap.servers": engine.bootstrap}).list_topics(timeout=60)
            return time.monotonic() - began
        finally:
            engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engines", default="onceflow,kafka")
    args = parser.parse_args()
    engines = parse_engines(args.engines)
    times: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.rounds):
        for name in engines:
            times[name].append(time_to_first_answer(name))
    print(f"start to first answered request, {args.rounds} rounds, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for name in engines:
        found = times[name]
        print(f"  {name:12} median {statistics.median(found):6.2f} s   "
              f"min {min(found):6.2f} s   max {max(found):6.2f} s")  # fmt: skip
    if "onceflow" in times and "kafka" in times:
        ratio = statistics.median(times["onceflow"]) / statistics.median(times["kafka"])
        print(f"  ratio onceflow / kafka: {ratio:.2f}")


if __name__ == "__main__":
    main()
