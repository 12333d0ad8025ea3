"""Cluster administration for the CLI and for programs: groups, transactions, topics.

Every operation takes a ``ClusterSession`` (an AdminClient on a librdkafka-style config
dict) and raises ``Unreachable`` (no broker answered), ``NotFound`` (unknown group, topic
or transactional id), ``Refused`` (the operation does not apply now) or ``AdminError``.
"""

from __future__ import annotations

import importlib
from typing import Any

# imported when first used, so that the errors alone (every CLI command's) load no client
_HOMES = {
    "ClusterSession": "onceflow.admin.connect",
    "client_config": "onceflow.admin.connect",
    "wire_client": "onceflow.admin.connect",
    "AdminError": "onceflow.admin.errors",
    "NotFound": "onceflow.admin.errors",
    "Refused": "onceflow.admin.errors",
    "Unreachable": "onceflow.admin.errors",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


__all__ = [
    "AdminError",
    "ClusterSession",
    "NotFound",
    "Refused",
    "Unreachable",
    "client_config",
    "wire_client",
]
