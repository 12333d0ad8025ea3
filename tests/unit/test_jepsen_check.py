"""The Jepsen-style checker finds each violation in constructed histories."""

from __future__ import annotations

import json

from onceflow.verify.jepsen import (
    ABORTED,
    COMMITTED,
    INDETERMINATE,
    History,
    Read,
    Txn,
    check,
)


def clean_history() -> History:
    """p0 commits a, b; aborts c; p1 commits d; consumers read committed data in order."""
    txns = [
        Txn("p0", 0, [(0, "p0:0"), (1, "p0:1")], COMMITTED),
        Txn("p0", 1, [(0, "p0:2")], ABORTED),
        Txn("p1", 0, [(0, "p1:0"), (0, "p1:1")], COMMITTED),
        Txn("p0", 2, [(0, "p0:3")], COMMITTED),
    ]
    # Partition 0 log: p0:0 @0, p0:2 @1 (aborted), marker @2, p1:0 @3, p1:1 @4, ...
    final = [
        Read("final", 0, 0, "p0:0"),
        Read("final", 0, 3, "p1:0"),
        Read("final", 0, 4, "p1:1"),
        Read("final", 0, 6, "p0:3"),
        Read("final", 1, 0, "p0:1"),
    ]
    reads = [Read("c0", r.partition, r.offset, r.value) for r in final[:3]]
    return History(txns=txns, reads=reads, final=final)


def kinds(history: History) -> dict[str, int]:
    result = check(history)
    return {kind: len(found) for kind, found in result.violations.items() if found}


def test_clean_history_passes():
    result = check(clean_history())
    assert result.ok, result.summary()
    assert result.stats["committed"] == 3 and result.stats["aborted"] == 1


def test_aborted_read_by_a_consumer():
    history = clean_history()
    history.reads.append(Read("c1", 0, 1, "p0:2"))
    assert kinds(history) == {"aborted_read": 1, "unstable_read": 1}


def test_aborted_value_in_the_final_read():
    history = clean_history()
    history.final.append(Read("final", 0, 1, "p0:2"))
    assert kinds(history) == {"aborted_read": 1}


def test_lost_write():
    history = clean_history()
    history.final = [r for r in history.final if r.value != "p0:1"]
    found = check(history).violations["lost_write"]
    assert found == [{"value": "p0:1", "partition": 1, "txn": "p0#0"}]


def test_duplicate_in_the_log_and_in_a_consumer():
    history = clean_history()
    history.final.append(Read("final", 0, 7, "p1:1"))
    assert kinds(history) == {"duplicate": 1, "order": 1}
    history = clean_history()
    history.reads.append(Read("c0", 0, 9, "p0:0"))
    assert kinds(history) == {"duplicate": 1, "unstable_read": 1}


def test_nonmonotonic_consumer_offsets():
    history = clean_history()
    history.reads.append(Read("c0", 0, 3, "p1:0"))  # re-read after p1:1 @4
    assert kinds(history)["nonmonotonic_offset"] == 1


def test_per_partition_producer_order():
    history = clean_history()
    history.final[1], history.final[2] = (
        Read("final", 0, 3, "p1:1"),
        Read("final", 0, 4, "p1:0"),
    )
    history.reads = []
    assert kinds(history) == {"order": 1}


def test_indeterminate_all_or_nothing():
    history = clean_history()
    history.txns.append(Txn("p1", 1, [(1, "p1:2"), (1, "p1:3")], INDETERMINATE))
    assert check(history).ok  # invisible: fine
    history.final += [Read("final", 1, 2, "p1:2"), Read("final", 1, 3, "p1:3")]
    assert check(history).ok  # entirely visible: fine
    assert check(history).stats["indeterminate_visible"] == 1
    history.final.pop()
    assert kinds(history) == {"partial_indeterminate": 1}


def test_unstable_read_wrong_partition_unknown_and_stuck():
    history = clean_history()
    history.reads.append(Read("c1", 1, 5, "p0:1"))  # read at an offset the log lost
    history.final.append(Read("final", 1, 9, "zz:0"))
    history.final.append(Read("final", 1, 8, "p0:3"))  # written to partition 0
    history.final_complete = False
    found = kinds(history)
    assert found["unknown_value"] == 1 and found["wrong_partition"] == 1
    assert found["stuck"] == 1 and found["duplicate"] == 1
    history.final_complete = True
    assert kinds(history)["unstable_read"] == 1


def test_history_is_saved_as_json_lines(tmp_path):
    history = clean_history()
    history.events.append({"kind": "kill", "at": 1.5})
    history.save(tmp_path / "history.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert {line["type"] for line in lines} == {"txn", "read", "final", "event", "final_complete"}
