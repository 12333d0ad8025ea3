"""pytest plugin: a real onceflow broker in a subprocess for your tests.

Installed with onceflow and enabled automatically. Fixtures:

* ``kafka_broker`` — a broker on a free port with a temporary data directory, one per
  test; ``kafka_broker.bootstrap`` is ``"127.0.0.1:PORT"``.
* ``kafka_broker_factory`` — start brokers with your own settings, for example
  ``kafka_broker_factory(config={"num.partitions": "3"})``.

A ``BrokerProcess`` can also be used directly, and can be killed with SIGKILL and
restarted on the same data directory and port to test crash recovery.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from onceflow.broker.process import BrokerProcess, temporary_broker

__all__ = ["BrokerProcess", "kafka_broker", "kafka_broker_factory", "temporary_broker"]


@pytest.fixture
def kafka_broker_factory(tmp_path: Path) -> Iterator:
    brokers: list[BrokerProcess] = []

    def start(config: dict[str, str] | None = None, name: str = "broker") -> BrokerProcess:
        broker = BrokerProcess(tmp_path / f"{name}{len(brokers)}", config=config)
        brokers.append(broker)
        return broker.start()

    yield start
    for broker in brokers:
        broker.stop()


@pytest.fixture
def kafka_broker(kafka_broker_factory) -> BrokerProcess:
    return kafka_broker_factory()
