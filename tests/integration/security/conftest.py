"""Fixtures: test certificates (made per session) and a broker with all four listeners."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from onceflow.broker.process import BrokerProcess
from tests.integration.security.secured import TlsFiles, make_tls_files, start_secured_broker


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory, tls_files) -> Iterator[BrokerProcess]:
    """PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners; no authorizer."""
    broker = start_secured_broker(tmp_path_factory.mktemp("secured"), tls_files)
    yield broker
    broker.stop()


@pytest.fixture(autouse=True)
def destroy_dropped_clients() -> Iterator[None]:
    """Clients a test dropped while a fatal error's traceback still held them are destroyed
    now, while the module's broker runs, not later in another test's output."""
    yield
    gc.collect()
