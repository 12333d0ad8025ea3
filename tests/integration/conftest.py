"""Fixtures shared by the integration tests."""

import pytest

from onceflow.testing import PluginBroker
from tests.integration.topics_helpers import cluster
from tests.kit.engines import engine

__all__ = ["broker", "cluster", "engine"]


@pytest.fixture(scope="module")
def broker(kafka_module_broker: PluginBroker) -> PluginBroker:
    """The module's broker (``kafka_module_broker``, configured by the module's
    ``kafka_module_broker_config``). A module that prepares it (topics, records) defines a
    ``broker`` of its own."""
    return kafka_module_broker
