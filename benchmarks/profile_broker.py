"""Where the embedded broker's time goes: py-spy profiles of its produce and consume paths.

    python benchmarks/profile_broker.py [--records 100000] [--top 25] [--keep DIR]

Starts one onceflow broker (as broker_throughput.py does: ``log.flush.policy=always``),
runs broker_throughput.py's workload (1 KB records, idempotent producer acks=all, 4
partitions, then one consumer reading them back) and records the broker process with
py-spy (``py-spy record --threads``, 200 samples/s; idle threads are not sampled, so the
samples are where the broker is on a CPU or blocked in a system call that py-spy does not
count as idle, such as fsync) during each phase separately.

Printed per phase: samples per thread (the event loop's thread, the fsync pool), the
functions with the most samples of their own (self) and including their callees
(inclusive), and a split of the event-loop thread into coarse buckets: socket reads and
writes, request decoding, the produce append path, fetch reads, response encoding,
asyncio's own machinery. Needs py-spy (the ``bench`` extra) and permission to trace the
broker (root, or ptrace allowed).
"""

from __future__ import annotations

import argparse
import collections
import linecache
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from bench_topics import create_topics
from broker_throughput import PARTITIONS, consume, produce, start_onceflow

# (bucket, substrings of a frame "function (file:line)"); the first bucket found in a
# stack, from its innermost frame outwards, takes the sample.
BUCKETS = (
    ("fsync (the fsync pool)", ("fsync", "fdatasync", "durability.py", "durable_offsets.py")),
    ("socket I/O (asyncio transports)", ("selector_events.py", "sock_send", "recv_into")),
    ("log: append, read, index", ("onceflow/log/",)),
    ("protocol encode/decode", ("onceflow/protocol/",)),
    ("produce handler", ("handlers/produce.py", "producing.py")),
    ("fetch handler", ("handlers/fetch.py",)),
    ("connection, framing, dispatch", ("broker/connection.py", "broker/framing.py", "broker/")),
    ("asyncio machinery", ("asyncio/",)),
)


def record(pid: int, output: Path, action, idle: bool = False) -> None:
    """Run ``action`` while py-spy samples ``pid``; ``idle``: sample waiting threads too."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    recorder = subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--threads", "--rate", "200", "--format", "raw",
         "--output", str(output), "--nonblocking", *(["--idle"] if idle else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        action()
    finally:
        recorder.send_signal(subprocess.signal.SIGINT)
        _, error = recorder.communicate(timeout=60)
    if not output.exists():
        raise RuntimeError(f"py-spy wrote no profile: {error.strip()[-400:]}")


def read_stacks(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if frames and count.isdigit():
            stacks.append((frames.split(";"), int(count)))
    return stacks


def source_line(frame: str) -> str:
    """The source text of a frame ``function (path:line)``, found along ``sys.path``."""
    location = frame.rpartition(" (")[2].rstrip(")")
    path, _, line = location.rpartition(":")
    if not line.isdigit():
        return ""
    for root in ["", *sys.path]:
        candidate = Path(root) / path
        if candidate.is_file():
            return linecache.getline(str(candidate), int(line)).strip()[:70]
    return ""


def within(stacks: list[tuple[list[str], int]], marker: str) -> list[tuple[list[str], int]]:
    """The stacks that pass through a frame containing ``marker``, cut above its outermost
    such frame (the thread name kept first)."""
    kept = []
    for frames, count in stacks:
        for position, frame in enumerate(frames[1:], start=1):
            if marker in frame:
                kept.append(([frames[0], *frames[position:]], count))
                break
    return kept


def summarize(
    phase: str, stacks: list[tuple[list[str], int]], top: int, buckets_of=BUCKETS
) -> None:
    total = sum(count for _, count in stacks)
    if not total:
        print(f"{phase}: no samples")
        return
    threads: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    buckets: collections.Counter[str] = collections.Counter()
    for frames, count in stacks:
        thread, calls = frames[0], frames[1:]
        threads[thread] += count
        if calls:
            own[calls[-1]] += count
        for frame in set(calls):
            inclusive[frame] += count
        bucket = "other Python work"
        for frame in reversed(calls):
            found = next((b for b, keys in buckets_of if any(k in frame for k in keys)), None)
            if found:
                bucket = found
                break
        buckets[bucket] += count
    print(f"\n== {phase}: {total} samples (200/s) ==")
    print("threads:")
    for thread, count in threads.most_common(8):
        print(f"  {count / total:6.1%}  {thread}")
    print("buckets (innermost matching frame):")
    for bucket, count in buckets.most_common():
        print(f"  {count / total:6.1%}  {bucket}")
    print(f"top {top} by own samples:")
    for frame, count in own.most_common(top):
        print(f"  {count / total:6.1%}  {frame}  | {source_line(frame)}")
    print(f"top {top} inclusive:")
    for frame, count in inclusive.most_common(top):
        print(f"  {count / total:6.1%}  {frame}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", help="copy the raw profiles into this directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="profile-broker-"))
    target = start_onceflow(work, "always")
    try:
        warm = f"warm-{uuid.uuid4().hex[:8]}"
        create_topics(target.bootstrap, [warm], PARTITIONS)
        produce(target, warm, 20_000)
        consume(target, warm, 20_000)
        topic = f"profile-{uuid.uuid4().hex[:8]}"
        create_topics(target.bootstrap, [topic], PARTITIONS)
        seconds: dict[str, float] = {}
        record(
            target.pid,
            work / "produce.txt",
            lambda: seconds.__setitem__("produce", produce(target, topic, args.records)),
        )
        record(
            target.pid,
            work / "consume.txt",
            lambda: seconds.__setitem__("consume", consume(target, topic, args.records)),
        )
        for phase in ("produce", "consume"):
            rate = args.records / seconds[phase]
            summarize(f"{phase} ({rate:,.0f} records/s)", read_stacks(work / f"{phase}.txt"),
                      args.top)  # fmt: skip
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            for phase in ("produce", "consume"):
                shutil.copy(work / f"{phase}.txt", Path(args.keep) / f"broker-{phase}.txt")
    finally:
        target.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
