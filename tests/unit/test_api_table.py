"""docs/compatibility.md lists exactly the APIs and versions the broker serves, and every
other API key Kafka defines; each handler module names the APIs and versions it serves."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from kio.schema.index import api_key_map

from onceflow.broker.apis import markdown_table, supported_apis
from onceflow.broker.registry import HANDLERS

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| (.+?) \|$", re.MULTILINE)


def section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def test_documented_api_table_matches_the_handler_registry():
    assert markdown_table() in section("APIs served"), (
        "docs/compatibility.md is out of date: paste the output of "
        "`onceflow broker --list-apis` into its 'APIs served' section"
    )


def test_every_other_api_key_is_listed_as_not_served():
    listed = {int(key) for key, _, _ in ROW.findall(section("APIs not served"))}
    assert listed == set(api_key_map) - set(HANDLERS)


def test_each_handler_module_opens_with_its_apis_and_versions():
    for key, name, low, high in supported_apis():
        module = sys.modules[HANDLERS[key].handle.__module__]
        versions = f"v{low}" if low == high else f"v{low}-{high}"
        assert f"{name} {versions}" in " ".join((module.__doc__ or "").split()), (
            f"{module.__name__}'s docstring should name {name} {versions}"
        )


def test_registry_covers_what_clients_need():
    versions = {name: (low, high) for _, name, low, high in supported_apis()}
    assert versions["ApiVersions"] == (0, 3)
    assert versions["Produce"][0] <= 3 and versions["Produce"][1] >= 9
    assert versions["Fetch"][0] <= 4 and versions["Fetch"][1] >= 13
    assert versions["Metadata"][0] <= 1 and versions["Metadata"][1] >= 12
    assert versions["ListOffsets"][0] == 0
    assert versions["InitProducerId"] == (0, 4)
    for name in (
        "CreateTopics",
        "DeleteTopics",
        "CreatePartitions",
        "DescribeConfigs",
        "AlterConfigs",
        "IncrementalAlterConfigs",
        "DescribeCluster",
        "DeleteRecords",
        "ElectLeaders",
        "DescribeLogDirs",
        "AlterReplicaLogDirs",
        "AlterPartitionReassignments",
        "ListPartitionReassignments",
    ):
        assert name in versions
