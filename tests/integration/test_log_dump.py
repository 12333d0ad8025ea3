"""``onceflow log dump`` on the files of a real broker that real clients wrote to.

Plain and transactional records (so there are commit and abort markers) and a consumer
group's offset commit go through confluent-kafka; the broker is stopped and its partition
log, ``__consumer_offsets`` and ``__transaction_state`` are dumped through the CLI.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from onceflow.cli import main

TOPIC = "dumped"
GROUP = "dump-group"
TRANSACTIONAL_ID = "dump-txn"


def dump(*args: str | Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["log", "dump", *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout.splitlines()


def segment_files(partition_dir: Path, suffix: str) -> list[Path]:
    return sorted(partition_dir.glob(f"*{suffix}"))


def records_of(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("| ")]


def key_and_payload(record_line: str) -> tuple[str, str | None]:
    key_part = record_line.split(" key: ", 1)[1]
    if " payload: " not in key_part:
        return key_part, None
    key, payload = key_part.split(" payload: ", 1)
    return key, payload


def write_through_clients(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(10)

    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for number in range(3):
        plain.produce(
            TOPIC, key=f"plain-{number}", value=f"hello-{number}", headers=[("trace", b"t")]
        )
    plain.flush(10)

    transactional = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID, "linger.ms": 1}
    )
    transactional.init_transactions(15)
    transactional.begin_transaction()
    transactional.produce(TOPIC, key="tx-commit", value="committed")
    transactional.commit_transaction(10)
    transactional.begin_transaction()
    transactional.produce(TOPIC, key="tx-abort", value="aborted")
    transactional.flush(10)
    transactional.abort_transaction(10)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([TOPIC])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < 4 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    assert seen == [b"hello-0", b"hello-1", b"hello-2", b"committed"]
    consumer.commit(asynchronous=False)
    consumer.close()


def test_dump_a_real_brokers_log_offsets_and_transactions(kafka_broker_process):
    write_through_clients(kafka_broker_process.bootstrap)
    assert kafka_broker_process.stop() == 0
    data_dir = kafka_broker_process.data_dir

    (segment,) = segment_files(data_dir / f"{TOPIC}-0", ".log")
    status, lines = dump(segment, "--print-data-log")
    assert status == 0, lines
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert all("isvalid: true" in line for line in batches)
    data = [key_and_payload(line) for line in records_of(lines) if " key: " in line]
    assert data == [
        ("plain-0", "hello-0"),
        ("plain-1", "hello-1"),
        ("plain-2", "hello-2"),
        ("tx-commit", "committed"),
        ("tx-abort", "aborted"),
    ]
    assert all("headerKeys: [trace]" in line for line in records_of(lines) if "plain-" in line)
    markers = [line.split("endTxnMarker: ")[1] for line in lines if "endTxnMarker" in line]
    assert [marker.split()[0] for marker in markers] == ["COMMIT", "ABORT"]
    transactional = [line for line in batches if "isTransactional: true" in line]
    assert len(transactional) == 4 and sum("isControl: true" in b for b in transactional) == 2

    (txn_index,) = segment_files(data_dir / f"{TOPIC}-0", ".txnindex")
    status, lines = dump(txn_index)
    assert status == 0
    aborted = [line for line in lines if line.startswith("version: 0 producerId:")]
    assert len(aborted) == 1 and "firstOffset: 5 lastOffset: 6" in aborted[0]  # tx-abort, ABORT

    offsets_logs = [
        path for path in data_dir.glob("__consumer_offsets-*/*.log") if path.stat().st_size
    ]
    status, lines = dump(*offsets_logs, "--offsets-decoder")
    assert status == 0, lines
    decoded = [key_and_payload(line) for line in records_of(lines)]
    commits = [
        (json.loads(key), json.loads(payload))
        for key, payload in decoded
        if json.loads(key)["type"] in ("0", "1") and payload != "<DELETE>"
    ]
    assert commits, lines
    key, value = commits[-1]
    assert key["data"] == {"group": GROUP, "topic": TOPIC, "partition": 0}
    assert value["data"]["offset"] >= 4  # past "committed" (offset 3)
    groups = [
        json.loads(payload)["data"]
        for key, payload in decoded
        if json.loads(key) == {"type": "2", "data": {"group": GROUP}} and payload != "<DELETE>"
    ]
    assert groups and groups[0]["protocolType"] == "consumer"
    assert any(
        member["subscription"] == {"topics": [TOPIC]}
        for group in groups
        for member in group["members"]
    )

    (state_log,) = segment_files(data_dir / "__transaction_state-0", ".log")
    status, lines = dump(state_log, "--transaction-log-decoder")
    assert status == 0, lines
    states = []
    for line in records_of(lines):
        key, payload = key_and_payload(line)
        assert json.loads(key) == {"transactionalId": TRANSACTIONAL_ID}
        value = json.loads(payload)
        states.append(value["transactionStatus"])
        if value["transactionStatus"] in ("PrepareCommit", "PrepareAbort"):
            assert value["transactionPartitions"] == [{"topic": TOPIC, "partitionIds": [0]}]
    for expected in ("PrepareCommit", "CompleteCommit", "PrepareAbort", "CompleteAbort"):
        assert expected in states, states
