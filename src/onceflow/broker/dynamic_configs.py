"""Broker configs changed at runtime, kept in ``<data-dir>/broker-configs.json``.

Kafka keeps them in its metadata log; here they are one fsynced file, written before the
change is answered, and loaded at start-up on top of the ``--config`` settings.
"""

from __future__ import annotations

import json
from pathlib import Path

from onceflow.config import BrokerConfig, render_value, validate_dynamic_broker_configs
from onceflow.log.durability import write_atomically

FILE_NAME = "broker-configs.json"
CLUSTER_DEFAULT = ""  # the resource name of the cluster-wide defaults


def load(data_dir: Path, config: BrokerConfig) -> None:
    path = data_dir / FILE_NAME
    if not path.exists():
        return
    stored = json.loads(path.read_text())
    config.dynamic_broker = validate_dynamic_broker_configs(stored.get("broker", {}))
    config.dynamic_default = validate_dynamic_broker_configs(stored.get("default", {}))


def save(data_dir: Path, config: BrokerConfig) -> None:
    stored = {
        "broker": {name: render_value(v) for name, v in config.dynamic_broker.items()},
        "default": {name: render_value(v) for name, v in config.dynamic_default.items()},
    }
    write_atomically(data_dir / FILE_NAME, json.dumps(stored, indent=2).encode())
