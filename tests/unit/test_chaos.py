"""The chaos matrix's pure parts: the catalogue, verdicts, rendering (no broker)."""

from __future__ import annotations

import json
import sys

import pytest

from onceflow.chaos.cells import CellResult, verdict
from onceflow.chaos.flows import FLOWS, STEP_LABELS, WORK_STEPS
from onceflow.chaos.harness import Engine, runnable
from onceflow.chaos.heatmap import COLOURS, cell_colour, draw
from onceflow.chaos.matrix import (
    ChaosMatrix,
    load,
    ordered,
    section_of,
    skipped_on_kafka,
    summarize,
)
from onceflow.chaos.scenarios import (
    APACHE_KAFKA,
    ARTICLE,
    DUPLICATED,
    LOST,
    OK,
    ONCEFLOW,
    OUTCOMES,
    SCENARIOS,
    select,
)
from onceflow.patterns import relay
from onceflow.verify.audit import OutputRecord, Sink, first_copies


def test_every_article_flow_is_a_row_with_one_cell_per_numbered_step():
    assert {scenario.pattern for scenario in ARTICLE} == set(FLOWS)
    for scenario in ARTICLE:
        steps = FLOWS[scenario.pattern]
        assert [cell.step for cell in scenario.cells] == list(steps)
        assert [cell.number for cell in scenario.cells] == list(range(1, len(steps) + 1))
        assert all(step in STEP_LABELS for step in steps)


def test_every_cell_predicts_every_output_of_its_row():
    for scenario in SCENARIOS:
        for cell in scenario.cells:
            assert set(cell.expected) <= set(scenario.outputs), (scenario.name, cell.step)
            assert set(cell.expected.values()) <= set(OUTCOMES)


def test_the_articles_predictions_as_transcribed():
    rows = {scenario.pattern: scenario for scenario in ARTICLE}

    def expected(pattern: str, step: str) -> dict[str, str]:
        return next(c.expected for c in rows[pattern].cells if c.step == step)

    assert expected("no_dedup", "produce") == {"rest": DUPLICATED, "db": DUPLICATED,
                                                "topic": DUPLICATED}  # fmt: skip
    assert expected("no_dedup", "update_offsets") == {"rest": OK, "db": OK, "topic": OK}
    assert expected("idempotent_consumer", "produce")["topic"] == DUPLICATED
    assert expected("idempotent_consumer", "commit_db") == {"rest": OK, "db": OK, "topic": OK}
    assert expected("outbox", "commit_db")["topic"] == DUPLICATED
    sent = expected("kafka_transactions", "send_offsets")
    assert sent == {"rest": DUPLICATED, "db": DUPLICATED, "topic": OK}
    # the appendix: the two ways inbox + Kafka transactions lose data
    db_first = "idempotent_consumer_kafka_transactions_db_first"
    kafka_first = "idempotent_consumer_kafka_transactions_kafka_first"
    assert expected(db_first, "commit_db")["topic"] == LOST
    assert expected(kafka_first, "commit_kafka")["db"] == LOST


def test_exactly_once_rows_predict_no_anomaly_and_baselines_predict_some():
    for scenario in SCENARIOS:
        outcomes = {o for cell in scenario.cells for o in cell.expected.values()}
        if scenario.exactly_once:
            assert outcomes == {OK}, scenario.name
        elif scenario.family == "article" or "baseline" in scenario.title:
            assert outcomes - {OK}, f"{scenario.name} predicts no anomaly anywhere"


def test_relay_cells_are_the_relays_crash_points():
    relay_row = next(s for s in SCENARIOS if s.family == "relay")
    assert {cell.step for cell in relay_row.cells} <= set(relay.STEPS)


def test_work_steps_are_steps():
    assert set(STEP_LABELS) >= WORK_STEPS


def test_quick_selects_a_subset_covering_every_family():
    quick = select(quick=True)
    everything = select()
    assert 0 < len(quick) < len(everything)
    assert {scenario.family for scenario, _ in quick} == {s.family for s in SCENARIOS}
    assert select(patterns=("no_dedup",)) == [(ARTICLE[0], cell) for cell in ARTICLE[0].cells]


@pytest.mark.parametrize(
    "counts,word",
    [
        ({}, OK),
        ({"missing": 0, "duplicated": 0}, OK),
        ({"duplicated": 2}, DUPLICATED),
        ({"missing": 1}, LOST),
        ({"missing": 1, "duplicated": 1}, "lost+duplicated"),
        ({"reordered": 1}, "reordered"),
        ({"aborted_visible": 3}, "aborted_visible"),
    ],
)
def test_verdict(counts, word):
    assert verdict(counts) == word


def test_summary_groups_outputs_by_verdict():
    assert summarize({"rest": OK, "db": OK}) == OK
    assert summarize({"rest": DUPLICATED, "db": DUPLICATED, "topic": LOST}) == (
        "duplicated: rest db; lost: topic"
    )


def test_first_copies_is_what_an_inbox_keeps():
    records = [OutputRecord(i, "k", n, 0) for n, i in enumerate(["a", "b", "a", "c", "b"])]
    kept, removed = first_copies(Sink("topic", records))
    assert [r.id for r in kept.records] == ["a", "b", "c"] and removed == 2


def _result(step: str, expected: dict, observed: dict, error: str | None = None) -> CellResult:
    return CellResult("article/no_dedup", step, step, "sigkill", expected, observed,
                      number=1, error=error)  # fmt: skip


def test_a_cell_matches_only_when_observed_equals_predicted():
    assert _result("produce", {"db": OK}, {"db": OK}).matches
    assert not _result("produce", {"db": OK}, {"db": DUPLICATED}).matches
    assert not _result("produce", {"db": OK}, {"db": OK}, error="boom").matches


def test_matrix_round_trips_through_json_and_renders(tmp_path):
    results = [
        _result("commit_db", {"db": DUPLICATED}, {"db": DUPLICATED}),
        _result("consume", {"db": OK}, {"db": LOST}),
    ]
    matrix = ChaosMatrix(ordered(results), seconds=3.0)
    assert [r.step for r in matrix.results] == ["consume", "commit_db"]  # catalogue order
    assert not matrix.ok and len(matrix.mismatches) == 1
    path = tmp_path / "m.json"
    path.write_text(matrix.to_json())
    again = load(str(path))
    assert again.to_dict()["results"] == matrix.to_dict()["results"]
    markdown = matrix.to_markdown(image="m.png")
    assert "![chaos matrix heat map](m.png)" in markdown
    assert "| **NO** |" in markdown and "1 cell(s) differ" in markdown
    assert json.loads(matrix.to_json())["mismatches"] == 1
    png = draw(matrix, tmp_path / "m.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_matplotlib_the_heat_map_is_skipped_with_a_notice(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from onceflow.cli.chaos import chaos_command

    matrix = ChaosMatrix(ordered([_result("consume", {"db": OK}, {"db": OK})]), seconds=1.0)
    saved = tmp_path / "saved.json"
    saved.write_text(matrix.to_json())
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError

    assert draw(matrix, tmp_path / "m.png") is None
    prefix = tmp_path / "redrawn"
    result = CliRunner().invoke(chaos_command, ["--redraw", str(saved), "--out", str(prefix)])
    assert result.exit_code == 0, result.output
    notice = [line for line in result.output.splitlines() if "heat map skipped" in line]
    assert notice == [
        "heat map skipped: matplotlib is not installed (pip install 'onceflow[chaos]')"
    ]
    assert not prefix.with_suffix(".png").exists()
    assert "heat map" not in prefix.with_suffix(".md").read_text()
    assert load(str(prefix.with_suffix(".json"))).to_dict() == matrix.to_dict()


def test_colours_follow_the_worst_outcome():
    def colour(observed: dict, error: str | None = None) -> str:
        return cell_colour(_result("produce", {}, observed, error))

    assert colour({"db": OK}) == COLOURS["ok"]
    assert colour({"db": OK, "rest": DUPLICATED}) == COLOURS["duplicated"]
    assert colour({"db": LOST, "rest": OK}) == COLOURS["lost"]
    assert colour({"rest": DUPLICATED, "topic": LOST}) == COLOURS["lost+duplicated"]
    assert colour({"db": "lost+duplicated"}) == COLOURS["lost+duplicated"]
    assert colour({"db": "reordered"}) == COLOURS["other"]
    assert colour({"db": OK}, error="boom") == COLOURS["error"]


def test_the_published_matrix_covers_the_whole_catalogue_as_predicted():
    """docs/guarantees.* is the full run (make guarantees): it must not fall behind the
    catalogue, and every cell in it must be as predicted."""
    from pathlib import Path

    published = load(str(Path(__file__).resolve().parents[2] / "docs" / "guarantees.json"))
    assert not published.quick
    ran = {(r.scenario, r.step) for r in published.results}
    assert ran == {(s.name, c.step) for s, c in select()}, "run `make guarantees` again"
    assert published.ok, [(r.scenario, r.step) for r in published.mismatches]


def test_each_engine_runs_its_own_fault_rows():
    on_onceflow = {scenario.name for scenario, _ in select(engine=ONCEFLOW)}
    on_kafka = {scenario.name for scenario, _ in select(engine=APACHE_KAFKA)}
    own_broker = {"fault/broker_kill", "fault/network_cut", "fault/disk_full", "fault/power_loss"}
    failovers = {"fault/leader_kill", "fault/txn_coordinator_kill",
                 "fault/group_coordinator_kill", "fault/two_nodes_down"}  # fmt: skip
    assert own_broker <= on_onceflow and not own_broker & on_kafka
    assert failovers <= on_kafka and not failovers & on_onceflow
    assert on_onceflow - own_broker == on_kafka - failovers
    assert {name for name, _ in skipped_on_kafka()} == own_broker
    assert all(why for _, why in skipped_on_kafka())
    quick_failovers = [c for s, c in select(quick=True, engine=APACHE_KAFKA) if s.name in failovers]
    assert len(quick_failovers) == sum(len(s.cells) for s in SCENARIOS if s.name in failovers)


def test_a_cluster_not_ours_runs_no_failover_cell():
    cells = select(quick=True, engine=APACHE_KAFKA)
    elsewhere = runnable(Engine(APACHE_KAFKA, bootstrap="kafka:9092"), cells)
    left_out = {c.fault for _, c in cells} - {c.fault for _, c in elsewhere}
    assert left_out == {"leader_kill", "txn_coordinator_kill", "group_coordinator_kill",
                        "two_nodes_down"}  # fmt: skip
    with pytest.raises(ValueError):
        Engine(ONCEFLOW, bootstrap="kafka:9092")


def test_the_cluster_section_replaces_its_old_self_and_survives_an_embedded_run(tmp_path):
    from click.testing import CliRunner

    from onceflow.cli.chaos import chaos_command

    embedded = ChaosMatrix(ordered([_result("consume", {"db": OK}, {"db": OK})]), seconds=1.0)
    on_kafka = ChaosMatrix(
        ordered([_result("commit_db", {"db": DUPLICATED}, {"db": DUPLICATED})]),
        seconds=2.0, engine=APACHE_KAFKA,
    )  # fmt: skip
    for name, matrix in (("embedded", embedded), ("kafka", on_kafka)):
        (tmp_path / f"{name}.json").write_text(matrix.to_json())
    prefix = tmp_path / "guarantees"

    def redraw(name: str) -> str:
        args = ["--redraw", str(tmp_path / f"{name}.json"), "--out", str(prefix)]
        result = CliRunner().invoke(chaos_command, args)
        assert result.exit_code == 0, result.output
        return prefix.with_suffix(".md").read_text()

    redraw("embedded")
    once = redraw("kafka")
    assert once.count("## On a 3-node Apache Kafka cluster") == 1
    assert "### No deduplication" in once and "apache-kafka, sqlite, 1 cells" in once
    assert "`fault/power_loss`: cuts onceflow's broker files" in once
    assert redraw("kafka") == once  # replaced, not appended again
    assert section_of(redraw("embedded")) == section_of(once)
    assert load(str(tmp_path / "guarantees-apache-kafka.json")).engine == APACHE_KAFKA
    assert (tmp_path / "guarantees-apache-kafka.md").read_text().startswith("# Guarantees")


def test_the_published_cluster_matrix_covers_the_quick_cluster_cells_as_predicted():
    """docs/guarantees-apache-kafka.* is ``make guarantees-kafka``: every quick cell the
    cluster runs, failovers included, as predicted; guarantees.md shows it."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    published = load(str(docs / "guarantees-apache-kafka.json"))
    assert published.engine == APACHE_KAFKA and published.quick
    ran = {(r.scenario, r.step) for r in published.results}
    wanted = {(s.name, c.step) for s, c in select(quick=True, engine=APACHE_KAFKA)}
    assert ran == wanted, "run `make guarantees-kafka` again"
    assert published.ok, [(r.scenario, r.step) for r in published.mismatches]
    assert section_of((docs / "guarantees.md").read_text()) is not None
