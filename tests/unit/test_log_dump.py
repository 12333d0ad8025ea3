"""``onceflow log dump`` on files written by the real log code, without a broker."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import crc32c
import pytest
from click.testing import CliRunner

from onceflow.cli import main
from onceflow.config import BrokerConfig, TopicConfig
from onceflow.coordinator.group_records import (
    GroupValue,
    MemberRecord,
    OffsetValue,
    group_key,
    group_value,
    offset_key,
    offset_value,
)
from onceflow.coordinator.internal_record_decoders import (
    decode_consumer_offsets,
    decode_transaction_log,
)
from onceflow.coordinator.transaction_metadata import TransactionMetadata, TxnState
from onceflow.log.batch import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    KeyValue,
    parse_header,
)
from onceflow.log.dump import DumpError, DumpOptions, dump_file
from onceflow.log.dump_segment import read_batches
from onceflow.log.partition_log import PartitionLog
from tests.kit.batches import record_batch

BASE_TS = 1_700_000_000_123
SEGMENT = f"{0:020d}"


def client_batch(
    records: list[tuple[bytes | None, bytes | None, tuple[str, ...]]],
    timestamp_ms: int = BASE_TS,
    *,
    producer_id: int = -1,
    epoch: int = -1,
    sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """A batch as a producer sends it: millisecond timestamps, headers, sequences."""
    return record_batch(
        [value for _, value, _ in records],
        producer_id,
        epoch,
        sequence,
        timestamp_ms=timestamp_ms,
        keys=[key for key, _, _ in records],
        transactional=transactional,
        timestamp_step_ms=1,
        record_headers=[tuple((h.encode(), b"1") for h in names) for _, _, names in records],
    )


def open_log(directory: Path, topic: str = "t") -> PartitionLog:
    config = TopicConfig(
        BrokerConfig.from_strings({"log.flush.policy": "os"}), {"index.interval.bytes": 1}
    )
    log = PartitionLog(directory, topic, 0, config)
    log.load()
    return log


def append(log: PartitionLog, data: bytes) -> int:
    return log.append_client_batch(data, parse_header(data)).base_offset


def three_batches(directory: Path) -> Path:
    """A closed log of three plain batches (offsets 0-1, 2, 3); returns its segment."""
    log = open_log(directory)
    append(log, client_batch([(b"k0", b"v0", ("h1", "h2")), (None, b"v1", ())]))
    append(log, client_batch([(b"k2", b"v2", ())], BASE_TS + 10))
    append(log, client_batch([(b"k3", None, ())], BASE_TS + 20))
    log.close()
    return directory / f"{SEGMENT}.log"


def texts(path: Path, **options) -> list[str]:
    return [line.text for line in dump_file(path, DumpOptions(**options))]


def batch_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("baseOffset:")]


def fields(line: str) -> dict[str, str]:
    """``a: 1 b: x`` -> {"a": "1", "b": "x"} (for lines without spaces in values)."""
    words = line.removeprefix("| ").split(" ")
    return {words[i].rstrip(":"): words[i + 1] for i in range(0, len(words) - 1, 2)}


def run_cli(*args: str | Path):
    return CliRunner().invoke(main, ["log", "dump", *map(str, args)])


# -- batches and records -----------------------------------------------------------------


def test_batch_lines_use_kafka_fields(tmp_path):
    lines = texts(three_batches(tmp_path))
    assert lines[0] == "Log starting offset: 0"
    batches = [fields(line) for line in batch_lines(lines)]
    assert [b["baseOffset"] for b in batches] == ["0", "2", "3"]
    assert [b["lastOffset"] for b in batches] == ["1", "2", "3"]
    assert [b["count"] for b in batches] == ["2", "1", "1"]
    assert [b["position"] for b in batches] == [
        "0",
        batches[0]["size"],
        str(int(batches[0]["size"]) + int(batches[1]["size"])),
    ]
    assert {b["isvalid"] for b in batches} == {"true"}
    assert {b["compresscodec"] for b in batches} == {"none"}
    assert {b["magic"] for b in batches} == {"2"}
    assert batches[1]["CreateTime"] == str(BASE_TS + 10)
    assert not any(line.startswith("|") for line in lines), "records only with print_data_log"


def test_print_data_log_shows_records_with_keys_headers_and_millisecond_times(tmp_path):
    lines = texts(three_batches(tmp_path), print_data_log=True)
    records = [line for line in lines if line.startswith("| ")]
    assert records[0] == (
        f"| offset: 0 CreateTime: {BASE_TS} keySize: 2 valueSize: 2 sequence: -1 "
        "headerKeys: [h1,h2] key: k0 payload: v0"
    )
    assert records[1] == (
        f"| offset: 1 CreateTime: {BASE_TS + 1} keySize: -1 valueSize: 2 sequence: -1 "
        "headerKeys: [] payload: v1"
    )
    assert records[3].endswith("keySize: 2 valueSize: -1 sequence: -1 headerKeys: [] key: k3")


def test_idempotent_sequences_and_transaction_markers(tmp_path):
    log = open_log(tmp_path)
    now = int(time.time() * 1000)  # markers are stamped now: older batches would roll the segment
    producer = {"producer_id": 7, "epoch": 0, "timestamp_ms": now}
    append(log, client_batch([(None, b"a", ()), (None, b"b", ())], **producer, sequence=0))
    append(log, client_batch([(None, b"c", ())], **producer, sequence=2, transactional=True))
    log.append_marker(7, 0, CONTROL_COMMIT, coordinator_epoch=3)
    append(log, client_batch([(None, b"d", ())], **producer, sequence=3, transactional=True))
    log.append_marker(7, 0, CONTROL_ABORT, coordinator_epoch=3)
    log.close()

    lines = texts(tmp_path / f"{SEGMENT}.log", print_data_log=True)
    batches = [fields(line) for line in batch_lines(lines)]
    assert [(b["baseSequence"], b["lastSequence"]) for b in batches[:2]] == [("0", "1"), ("2", "2")]
    assert [b["isTransactional"] for b in batches] == ["false", "true", "true", "true", "true"]
    assert [b["isControl"] for b in batches] == ["false", "false", "true", "false", "true"]
    assert {b["producerId"] for b in batches} == {"7"}
    markers = [line for line in lines if "endTxnMarker" in line]
    assert markers[0].endswith("endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert markers[1].endswith("endTxnMarker: ABORT coordinatorEpoch: 3")
    assert lines[3].startswith("| offset: 1 ") and "sequence: 1 " in lines[3]

    (txn_line,) = texts(tmp_path / f"{SEGMENT}.txnindex")
    assert txn_line == "version: 0 producerId: 7 firstOffset: 4 lastOffset: 5 lastStableOffset: 6"

    (snapshot,) = sorted(tmp_path.glob("*.snapshot"))
    snapshot_lines = texts(snapshot)
    assert snapshot_lines[0] == "Producer state snapshot at offset 6"
    producer_line = fields(snapshot_lines[1])
    assert producer_line["producerId"] == "7" and producer_line["currentTxnFirstOffset"] == "-1"
    assert producer_line["lastSequence"] == "3" and producer_line["lastOffset"] == "4"
    assert sum(line.startswith("| firstSequence:") for line in snapshot_lines) == 3


def test_indexes_list_absolute_offsets(tmp_path):
    three_batches(tmp_path)
    positions = [
        fields(line)["position"] for line in batch_lines(texts(tmp_path / f"{SEGMENT}.log"))
    ]
    index = [fields(line) for line in texts(tmp_path / f"{SEGMENT}.index")]
    assert [entry["offset"] for entry in index] == ["0", "2", "3"]
    assert [entry["position"] for entry in index] == positions
    times = [fields(line) for line in texts(tmp_path / f"{SEGMENT}.timeindex")]
    assert [(t["timestamp"], t["offset"]) for t in times] == [
        (str(BASE_TS + 1), "0"),
        (str(BASE_TS + 10), "2"),
        (str(BASE_TS + 20), "3"),
    ]


def test_partial_index_entry_is_reported(tmp_path):
    three_batches(tmp_path)
    index = tmp_path / f"{SEGMENT}.index"
    index.write_bytes(index.read_bytes() + b"\x00\x00\x01")
    lines = list(dump_file(index, DumpOptions()))
    assert lines[-1].problem and "Found 3 invalid bytes" in lines[-1].text
    assert len(lines) == 4


def test_partition_checkpoint(tmp_path):
    (tmp_path / "partition.json").write_text(json.dumps({"log_start_offset": 42}))
    assert texts(tmp_path / "partition.json") == ["logStartOffset: 42"]
    skipped = {"log_start_offset": 0, "skipped_offsets": [[5, 10]]}
    (tmp_path / "partition.json").write_text(json.dumps(skipped))
    assert texts(tmp_path / "partition.json") == [
        "logStartOffset: 0",
        "skippedOffsets: 5-9 (cut by a repair, never reused)",
    ]


# -- damage ------------------------------------------------------------------------------


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def test_flipped_byte_marks_the_batch_invalid_and_the_dump_goes_on(tmp_path):
    segment = three_batches(tmp_path)
    second = [item.header for item in read_batches(segment)][1]
    flip_byte(segment, second.position + second.size - 3)  # inside the record's value

    lines = list(dump_file(segment, DumpOptions(print_data_log=True)))
    batches = [line for line in lines if line.text.startswith("baseOffset:")]
    assert [fields(b.text)["isvalid"] for b in batches] == ["true", "false", "true"]
    assert [b.problem for b in batches] == [False, True, False]
    assert any("key: k3" in line.text for line in lines), "the batch after the bad one"

    result = run_cli(segment)
    assert result.exit_code == 1
    assert "isvalid: false" in result.stdout


@pytest.mark.parametrize(
    ("field_at", "problem"),
    [
        (0, "with offset -72057594037927934 where offset 2 was expected"),  # baseOffset
        (12, "with partition leader epoch -16777216"),  # partitionLeaderEpoch
    ],
)
def test_damage_outside_the_crc_is_reported(tmp_path, field_at, problem):
    segment = three_batches(tmp_path)
    second = [item.header for item in read_batches(segment)][1]
    flip_byte(segment, second.position + field_at)

    lines = list(dump_file(segment, DumpOptions()))
    errors = [line for line in lines if line.problem]
    assert errors and errors[0].text.startswith(
        f"Error: the batch at position {second.position} is damaged: batch"
    )
    assert problem in errors[0].text
    assert run_cli(segment).exit_code == 1


def test_cut_tail_ends_the_dump_with_position_and_unread_bytes(tmp_path):
    segment = three_batches(tmp_path)
    last = [item.header for item in read_batches(segment)][-1]
    os.truncate(segment, segment.stat().st_size - 5)

    lines = texts(segment)
    assert len(batch_lines(lines)) == 2
    assert lines[-1] == (
        f"Found {last.size - 5} invalid bytes at the end of {segment.name}: at position "
        f"{last.position}, a batch of {last.size} bytes with only {last.size - 5} bytes left "
        "in the file; the dump stops here"
    )
    result = run_cli(segment)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == lines[-1]


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [
        (b"\x00" * 100, "magic byte 0 where a v2 batch has 2"),
        (b"\x00" * 20, "too short for a batch header"),
    ],
)
def test_garbage_after_the_last_batch(tmp_path, garbage, reason):
    segment = three_batches(tmp_path)
    end = segment.stat().st_size
    with open(segment, "ab") as handle:
        handle.write(garbage)
    last = list(dump_file(segment, DumpOptions()))[-1]
    assert last.problem
    assert last.text == (
        f"Found {len(garbage)} invalid bytes at the end of {segment.name}: at position {end}, "
        f"{reason}; the dump stops here"
    )


def test_max_bytes_stops_before_the_first_batch_that_does_not_fit(tmp_path):
    segment = three_batches(tmp_path)
    first = next(read_batches(segment)).header
    result = run_cli(segment, "--max-bytes", first.size + 1)
    assert result.exit_code == 0
    output = result.stdout.splitlines()
    assert len(batch_lines(output)) == 1
    remaining = segment.stat().st_size - first.size
    assert output[-1] == (
        f"Stopped at position {first.size} (max bytes {first.size + 1}): {remaining} bytes not read"
    )


def test_compressed_batch_records_are_not_shown(tmp_path):
    data = bytearray(client_batch([(b"k", b"v", ())]))
    struct.pack_into(">h", data, 21, 1)  # claim gzip; the CRC is recomputed below
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    segment = tmp_path / f"{SEGMENT}.log"
    segment.write_bytes(bytes(data))
    lines = texts(segment, print_data_log=True)
    assert "compresscodec: gzip (records not shown) crc:" in lines[1]
    assert len(lines) == 2


def test_missing_and_unknown_files_exit_2_with_one_line(tmp_path):
    result = run_cli(tmp_path / "nope.log")
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0
    assert "nope.log" in result.stderr and "Traceback" not in result.output

    odd = tmp_path / "notes.txt"
    odd.write_text("hello")
    result = run_cli(odd)
    assert result.exit_code == 2 and "unknown kind of file" in result.stderr
    with pytest.raises(DumpError):
        list(dump_file(odd, DumpOptions()))

    directory = tmp_path / "not-a-segment.log"
    directory.mkdir()
    result = run_cli(directory)
    assert result.exit_code == 2 and "Is a directory" in result.stderr


def test_exit_status_is_the_worst_of_all_files(tmp_path):
    segment = three_batches(tmp_path)
    flip_byte(segment, 70)
    result = run_cli(segment, tmp_path / "missing.index", tmp_path / f"{SEGMENT}.index")
    assert result.exit_code == 2
    assert result.stdout.count("Dumping ") == 3


def test_decoders_cannot_be_combined(tmp_path):
    result = run_cli(three_batches(tmp_path), "--offsets-decoder", "--transaction-log-decoder")
    assert result.exit_code == 2 and "choose one" in result.output


# -- internal topics ---------------------------------------------------------------------


def test_offsets_decoder(tmp_path):
    member = MemberRecord("m-1", None, "client", "/127.0.0.1", 30000, 10000, b"", b"")
    log = open_log(tmp_path, "__consumer_offsets")
    log.append_records(
        [
            KeyValue(offset_key("g", "orders", 2), offset_value(OffsetValue(17, -1, "md", 99))),
            KeyValue(
                group_key("g"), group_value(GroupValue("consumer", 4, "range", "m-1", 5, [member]))
            ),
            KeyValue(offset_key("g", "orders", 2), None),
        ]
    )
    log.close()
    lines = texts(tmp_path / f"{SEGMENT}.log", decoder=decode_consumer_offsets, print_data_log=True)
    records = [line for line in lines if line.startswith("| ")]
    commit_key, commit_value = key_and_payload(records[0])
    assert json.loads(commit_key) == {
        "type": "1",
        "data": {"group": "g", "topic": "orders", "partition": 2},
    }
    assert json.loads(commit_value) == {
        "version": "3",
        "data": {"offset": 17, "leaderEpoch": -1, "metadata": "md", "commitTimestamp": 99},
    }
    group_key_text, group_value_text = key_and_payload(records[1])
    assert json.loads(group_key_text) == {"type": "2", "data": {"group": "g"}}
    group = json.loads(group_value_text)["data"]
    assert (group["protocolType"], group["generation"], group["leader"]) == ("consumer", 4, "m-1")
    assert group["members"][0]["memberId"] == "m-1"
    assert key_and_payload(records[2])[1] == "<DELETE>"


def test_transaction_log_decoder(tmp_path):
    metadata = TransactionMetadata("tx-1", 1000, 2, 60000, TxnState.ONGOING, -1, {("t", 0)}, 5, 6)
    log = open_log(tmp_path, "__transaction_state")
    log.append_records([KeyValue(b"tx-1", metadata.to_json()), KeyValue(b"tx-1", None)])
    log.close()
    lines = texts(tmp_path / f"{SEGMENT}.log", decoder=decode_transaction_log, print_data_log=True)
    records = [line for line in lines if line.startswith("| ")]
    key, payload = key_and_payload(records[0])
    assert json.loads(key) == {"transactionalId": "tx-1"}
    value = json.loads(payload)
    assert value["producerId"] == 1000 and value["producerEpoch"] == 2
    assert value["transactionStatus"] == "Ongoing"
    assert value["transactionPartitions"] == [{"topic": "t", "partitionIds": [0]}]
    assert key_and_payload(records[1])[1] == "<DELETE>"


def key_and_payload(record_line: str) -> tuple[str, str]:
    after_key = record_line.split(" key: ", 1)[1]
    key, payload = after_key.split(" payload: ", 1)
    return key, payload
