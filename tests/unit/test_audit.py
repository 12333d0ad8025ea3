"""The audit detects every kind of anomaly it claims to, and only those."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from onceflow.verify.audit import InputEvent, OutputRecord, Sink, Unreadable, audit
from onceflow.verify.extract import ExtractError, Extractor
from onceflow.verify.report import KINDS


def make_inputs(count: int = 12, keys: int = 3, partitions: int = 2) -> list[InputEvent]:
    """Events e0..e{count-1}; key k{n % keys}; a key always lands in the same partition."""
    offsets = [0] * partitions
    events = []
    for n in range(count):
        key = n % keys
        partition = key % partitions
        events.append(InputEvent(f"e{n}", f"k{key}", partition, offsets[partition]))
        offsets[partition] += 1
    return events


def table_of(ids: list[str], name: str = "table:out") -> Sink:
    return Sink(name, [OutputRecord(i, None, n) for n, i in enumerate(ids)])


def ids(events: list[InputEvent]) -> list[str]:
    return [event.id for event in events]


def test_exact_copy_is_ok():
    inputs = make_inputs()
    report = audit(inputs, [table_of(ids(inputs))])
    assert report.ok
    assert report.counts == dict.fromkeys(KINDS, 0)
    assert report.input.events == 12 and report.sinks[0].events == 12


def test_missing_event_is_reported_with_its_input_position():
    inputs = make_inputs()
    out = ids(inputs)
    out.remove("e5")
    report = audit(inputs, [table_of(out)])
    assert not report.ok
    (missing,) = report.of_kind("missing")
    assert missing.id == "e5" and missing.key == "k2"
    assert missing.detail == {"input_partition": 0, "input_offset": 3}
    assert report.counts["missing"] == 1 and sum(report.counts.values()) == 1


def test_duplicate_is_reported_once_with_every_copy():
    inputs = make_inputs()
    out = [*ids(inputs), "e3", "e3"]
    report = audit(inputs, [table_of(out)])
    (duplicate,) = report.of_kind("duplicated")
    assert duplicate.id == "e3"
    assert duplicate.detail["copies"] == 3
    assert duplicate.detail["positions"] == [[None, 3], [None, 12], [None, 13]]
    assert sum(report.counts.values()) == 1  # a late duplicate is not also a reorder


def test_swap_within_a_key_is_a_reorder():
    inputs = make_inputs()
    out = ids(inputs)
    # e0 and e3 share key k0 (input partition 0, offsets 0 and 2): put e3 first.
    a, b = out.index("e0"), out.index("e3")
    out[a], out[b] = out[b], out[a]
    report = audit(inputs, [table_of(out)])
    (reordered,) = report.of_kind("reordered")
    assert reordered.id == "e0" and reordered.key == "k0"
    assert reordered.detail["after_id"] == "e3"
    assert sum(report.counts.values()) == 1


def test_interleaving_different_keys_is_not_a_reorder():
    inputs = make_inputs()
    by_key = sorted(inputs, key=lambda e: (e.key, e.offset))  # all k0, then k1, then k2
    report = audit(inputs, [table_of(ids(by_key))])
    assert report.ok


def test_order_is_compared_per_output_partition_only():
    inputs = make_inputs(count=4, keys=1, partitions=1)  # e0..e3 all key k0
    # Two output partitions: order across them is undefined, within each it is checked.
    records = [
        OutputRecord("e1", None, 0, partition=0),
        OutputRecord("e3", None, 1, partition=0),
        OutputRecord("e0", None, 0, partition=1),
        OutputRecord("e2", None, 1, partition=1),
    ]
    assert audit(inputs, [Sink("topic:out", records)]).ok
    records[0], records[1] = (
        OutputRecord("e3", None, 0, partition=0),
        OutputRecord("e1", None, 1, partition=0),
    )
    report = audit(inputs, [Sink("topic:out", records)])
    assert [a.id for a in report.of_kind("reordered")] == ["e1"]


def test_order_check_can_be_disabled_for_unordered_sinks():
    inputs = make_inputs()
    sink = table_of(list(reversed(ids(inputs))))
    assert not audit(inputs, [sink]).ok
    sink.check_order = False
    assert audit(inputs, [sink]).ok


def test_output_record_of_an_aborted_transaction_is_aborted_visible():
    inputs = make_inputs()
    records = [OutputRecord(i, None, n, partition=0) for n, i in enumerate(ids(inputs))]
    records.append(OutputRecord("e4", None, len(records), partition=0, aborted=True))
    report = audit(inputs, [Sink("topic:out", records)])
    (visible,) = report.of_kind("aborted_visible")
    assert visible.id == "e4" and visible.offset == 12
    assert visible.detail == {"source": "output transaction aborted"}
    assert sum(report.counts.values()) == 1  # the aborted copy is not counted as a duplicate


def test_output_of_an_aborted_input_event_is_aborted_visible_not_unexpected():
    inputs = make_inputs()
    report = audit(
        inputs, [table_of([*ids(inputs), "ghost", "stray"])], aborted_input_ids={"ghost"}
    )
    assert [a.id for a in report.of_kind("aborted_visible")] == ["ghost"]
    assert [a.id for a in report.of_kind("unexpected")] == ["stray"]
    assert report.input.aborted_events == 1


def test_aborted_input_seen_by_read_committed_is_reported_on_the_input():
    inputs = make_inputs()
    leaked = InputEvent("leak", "k0", 0, 99)
    report = audit(inputs, [table_of([*ids(inputs), "leak"])], input_aborted_visible=[leaked])
    kinds = sorted((a.sink, a.kind) for a in report.anomalies)
    assert kinds == [("input", "aborted_visible"), ("table:out", "aborted_visible")]


def test_unreadable_records_fail_the_audit():
    inputs = make_inputs()
    sink = table_of(ids(inputs))
    sink.unreadable.append(Unreadable(sink.name, "column 'id' is null", None, 12))
    report = audit(inputs, [sink], input_unreadable=[Unreadable("input", "not JSON", 1, 7)])
    assert [(a.sink, a.kind) for a in report.anomalies] == [
        ("input", "unreadable"),
        ("table:out", "unreadable"),
    ]


def test_duplicate_input_records_are_not_output_anomalies():
    inputs = make_inputs()
    again = InputEvent("e1", "k1", 1, 100)  # producer retry without idempotence
    report = audit([*inputs, again], [table_of(ids(inputs))])
    assert report.ok
    assert report.input.records == 13 and report.input.duplicate_records == 1


def test_each_sink_is_audited_separately():
    inputs = make_inputs()
    good = table_of(ids(inputs), "table:out")
    bad = table_of(ids(inputs)[1:], "topic:out")
    report = audit(inputs, [good, bad])
    assert [(a.sink, a.kind, a.id) for a in report.anomalies] == [("topic:out", "missing", "e0")]
    assert report.sinks[0].counts == {} and report.sinks[1].counts == {"missing": 1}


def test_all_anomalies_together_and_json_round_trip():
    inputs = make_inputs()
    out = ids(inputs)
    out.remove("e7")  # missing
    out.append("e2")  # duplicated
    a, b = out.index("e1"), out.index("e4")  # e1, e4 share key k1
    out[a], out[b] = out[b], out[a]  # reordered
    out.append("zzz")  # unexpected
    sink = table_of(out)
    sink.records.append(OutputRecord("e9", None, 99, aborted=True))  # aborted visible
    report = audit(inputs, [sink], context={"run": "unit"})
    assert {kind for kind, count in report.counts.items() if count} == {
        "missing",
        "duplicated",
        "reordered",
        "unexpected",
        "aborted_visible",
    }
    document = json.loads(report.to_json())
    assert document["version"] == 1 and document["ok"] is False
    assert document["context"] == {"run": "unit"}
    assert document["input"] == {
        "records": 12,
        "events": 12,
        "duplicate_records": 0,
        "aborted_events": 0,
        "dead_lettered_events": 0,
    }
    assert document["sinks"][0]["counts"]["missing"] == 1
    assert set(document["counts"]) == set(KINDS)
    # every kind the audit finds (wrong values come from prove's expectations only)
    found = set(report.counts) - {"unreadable", "wrong_value"}
    assert {a["kind"] for a in document["anomalies"]} == found
    for anomaly in document["anomalies"]:
        assert set(anomaly) == {"kind", "sink", "id", "key", "partition", "offset", "detail"}


def test_render_shows_the_summary_and_the_anomalies():
    inputs = make_inputs()
    out = ids(inputs)[1:]
    buffer = io.StringIO()
    audit(inputs, [table_of(out)]).render(Console(file=buffer, width=200))
    text = buffer.getvalue()
    assert "table:out" in text and "FAIL" in text and "e0" in text and "missing" in text
    buffer = io.StringIO()
    audit(inputs, [table_of(ids(inputs))]).render(Console(file=buffer, width=200))
    assert "no anomalies" in buffer.getvalue()


@pytest.mark.parametrize(
    ("id_spec", "key_spec", "key", "value", "expected"),
    [
        ("order_id", "store", None, b'{"order_id": 7, "store": "s1"}', ("7", "s1")),
        ("o.id", None, None, b'{"o": {"id": "x"}}', ("x", None)),
        ("order_id", "key:", b"store-3", b'{"order_id": 1.0}', ("1", "store-3")),
        ("key:id", "value:", b'{"id": 5}', b"plain", ("5", "plain")),
    ],
)
def test_extractor_reads_keys_and_json_fields(id_spec, key_spec, key, value, expected):
    assert Extractor(id_spec, key_spec).message(key, value) == expected


def test_extractor_errors_and_rows():
    extractor = Extractor("order_id", "store")
    with pytest.raises(ExtractError):
        extractor.message(None, b"not json")
    with pytest.raises(ExtractError):
        extractor.message(None, b'{"store": "s"}')
    with pytest.raises(ExtractError):
        extractor.message(None, None)
    assert extractor.row({"order_id": 3, "store": "s"}) == ("3", "s")
    assert Extractor("payload.order_id").row({"payload": '{"order_id": "a"}'}) == ("a", None)
    with pytest.raises(ExtractError):
        extractor.row({"id": 3})


def test_dead_lettered_events_are_accounted_for_not_missing():
    inputs = make_inputs()
    report = audit(inputs, [table_of(ids(inputs)[2:])], dead_lettered_ids={"e0", "e1", "zz"})
    assert report.ok, report.anomalies
    assert report.input.dead_lettered_events == 2  # "zz" is no input event
    assert report.sinks[0].dead_lettered == 2
    without = audit(inputs, [table_of(ids(inputs)[2:])])
    assert sorted(a.id for a in without.of_kind("missing")) == ["e0", "e1"]


def test_order_is_compared_within_one_input_topic():
    """Two input topics each have a partition 0: their offsets are not comparable."""
    first = InputEvent("a", "k", 0, 5, "orders-eu")
    second = InputEvent("b", "k", 0, 1, "orders-us")
    assert audit([first, second], [table_of(["a", "b"])]).ok
    same_topic = InputEvent("b", "k", 0, 1, "orders-eu")
    assert audit([first, same_topic], [table_of(["a", "b"])]).counts["reordered"] == 1
