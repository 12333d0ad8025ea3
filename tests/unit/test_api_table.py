"""docs/compatibility.md lists exactly the APIs and versions the broker serves, and every
other API key Kafka defines; each handler module names the APIs and versions it serves."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from kio.schema.index import api_key_map

from onceflow.broker.apis import markdown_table, supported_apis
from onceflow.broker.handlers.api_versions import api_versions_response
from onceflow.broker.registry import HANDLERS
from onceflow.protocol.codec import response_class

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


HEADER = re.compile(r"(\w+) v(\d+)(?:-(\d+))? \(API (\d+)\)")


def advertised() -> dict[int, tuple[int, int]]:
    """What an ApiVersions v3 response lists: api key -> (min, max) version."""
    response = api_versions_response(response_class(18, 3))
    return {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}


def test_each_handler_module_opens_with_the_apis_and_versions_api_versions_advertises():
    """Every handler module's docstring names, for each API it serves, the API's name,
    versions and key ("Produce v3-12 (API 0)"), exactly as ApiVersions advertises them."""
    headers: dict[int, tuple[str, int, int]] = {}
    for module_name in sorted({h.handle.__module__ for h in HANDLERS.values()}):
        module = sys.modules[module_name]
        served = {key for key, h in HANDLERS.items() if h.handle.__module__ == module_name}
        named = {}
        for name, low, high, key in HEADER.findall(" ".join((module.__doc__ or "").split())):
            named[int(key)] = (name, int(low), int(high or low))
        assert set(named) == served, f"{module_name}'s docstring names APIs {sorted(named)}"
        headers.update(named)
    names = {key: name for key, name, _, _ in supported_apis()}
    assert {key: (names[key], *versions) for key, versions in advertised().items()} == headers


def test_registry_covers_what_clients_need():
    versions = {name: (low, high) for _, name, low, high in supported_apis()}
    assert versions["ApiVersions"] == (0, 4)
    assert versions["Produce"][0] <= 3 and versions["Produce"][1] >= 9
    assert versions["Fetch"][0] <= 4 and versions["Fetch"][1] >= 13
    assert versions["Metadata"][0] <= 1 and versions["Metadata"][1] >= 12
    assert versions["ListOffsets"][0] == 0
    assert versions["InitProducerId"] == (0, 5)
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
