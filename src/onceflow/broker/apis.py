"""The table of APIs and versions this broker serves, derived from the handler registry."""

from __future__ import annotations

import onceflow.broker.handlers  # noqa: F401  (registers every API handler)
from onceflow.broker.registry import HANDLERS
from onceflow.protocol.codec import api_name


def _title(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def supported_apis() -> list[tuple[int, str, int, int]]:
    """(api key, Kafka's API name, min version, max version), by api key."""
    return [
        (h.api_key, _title(api_name(h.api_key)), h.min_version, h.max_version)
        for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
    ]


def markdown_table() -> str:
    lines = ["| Key | API | Versions |", "|---:|---|---|"]
    for key, name, low, high in supported_apis():
        versions = str(low) if low == high else f"{low}-{high}"
        lines.append(f"| {key} | {name} | {versions} |")
    return "\n".join(lines)
