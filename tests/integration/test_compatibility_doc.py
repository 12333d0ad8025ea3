"""The 'APIs served' table of docs/compatibility.md is what a running broker answers to
ApiVersions, version for version."""

from __future__ import annotations

import re
from pathlib import Path

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from onceflow.protocol.client import WireClient

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
ROW = re.compile(r"^\| (\d+) \| \w+ \| (\d+)(?:-(\d+))? \|$", re.MULTILINE)


def documented() -> dict[int, tuple[int, int]]:
    text = DOC.read_text()
    served = text[text.index("## APIs served") : text.index("## APIs not served")]
    return {int(key): (int(low), int(high or low)) for key, low, high in ROW.findall(served)}


def test_api_versions_answer_is_the_documented_table(kafka_broker) -> None:
    with WireClient(kafka_broker.bootstrap) as client:
        response = client.request(
            ApiVersionsRequest, client_software_name="onceflow-test", client_software_version="1"
        )
    assert response.error_code == 0
    answered = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert answered == documented()
