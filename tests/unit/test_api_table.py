"""docs/broker.md lists exactly the APIs and versions the broker serves."""

from __future__ import annotations

from pathlib import Path

from onceflow.broker.apis import markdown_table, supported_apis

DOC = Path(__file__).resolve().parents[2] / "docs" / "broker.md"


def test_documented_api_table_matches_the_handler_registry():
    assert markdown_table() in DOC.read_text(), (
        "docs/broker.md is out of date: paste the output of "
        "`onceflow broker --list-apis` into its 'Supported APIs and versions' section"
    )


def test_registry_covers_what_clients_need():
    versions = {name: (low, high) for _, name, low, high in supported_apis()}
    assert versions["ApiVersions"] == (0, 3)
    assert versions["Produce"][0] <= 3 and versions["Produce"][1] >= 9
    assert versions["Fetch"][0] <= 4 and versions["Fetch"][1] >= 12
    assert versions["Metadata"][0] <= 1 and versions["Metadata"][1] >= 12
    assert versions["InitProducerId"] == (0, 4)
    for name in (
        "ListOffsets",
        "CreateTopics",
        "DeleteTopics",
        "CreatePartitions",
        "DescribeConfigs",
        "AlterConfigs",
        "IncrementalAlterConfigs",
        "DescribeCluster",
        "DeleteRecords",
    ):
        assert name in versions
