"""InProcessBroker: the broker on a loop thread of the test process, reached by real
clients; it restarts cleanly on its data and ports, refuses to be killed, says why it
cannot start, and leaves no thread, signal handler or event loop behind."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import pytest

from onceflow.broker.in_process import InProcessBroker, InProcessBrokerError
from tests.kit.clients import consume, create_topic, produce, values


def test_real_clients_produce_and_consume_and_a_clean_restart_keeps_data_and_port(
    tmp_path: Path,
) -> None:
    with InProcessBroker(tmp_path / "data") as broker:
        port = broker.port
        assert port != 0 and broker.bootstrap == f"127.0.0.1:{port}"
        assert broker.listeners == {"PLAINTEXT": broker.bootstrap}
        create_topic(broker.bootstrap, "events", partitions=2)
        produce(broker.bootstrap, "events", [b"a", b"b", b"c"], partitions=2)
        broker.restart()
        assert broker.port == port
        produce(broker.bootstrap, "events", [b"d"], partition=0)
        assert sorted(values(consume(broker.bootstrap, "events", 4))) == [b"a", b"b", b"c", b"d"]
    assert not broker.running


def test_a_restart_keeps_every_listener_port(tmp_path: Path) -> None:
    listeners = "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0"
    config = {
        "listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
    }
    with InProcessBroker(tmp_path / "data", config=config) as broker:
        bound = dict(broker.listeners)
        assert set(bound) == {"PLAINTEXT", "OTHER"}
        broker.restart()
        assert broker.listeners == bound
        create_topic(broker.bootstrap_for("other"), "t")


def test_it_cannot_be_killed_and_says_to_use_a_process(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path / "data") as broker:
        with pytest.raises(InProcessBrokerError, match="BrokerProcess"):
            broker.kill()
        with pytest.raises(InProcessBrokerError, match="BrokerProcess"):
            broker.restart(kill=True)
        assert broker.running


def test_a_bad_setting_is_refused_with_the_brokers_message(tmp_path: Path) -> None:
    with pytest.raises(InProcessBrokerError, match=r"did you mean num\.partitions"):
        InProcessBroker(tmp_path / "data", config={"num.partition": "3"}).start()
    assert not (tmp_path / "data").exists()


def test_a_data_directory_another_broker_holds_is_refused(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path / "data"):
        second = InProcessBroker(tmp_path / "data")
        with pytest.raises(InProcessBrokerError, match="cannot start broker"):
            second.start()
        assert not second.running


def test_a_port_in_use_is_refused(tmp_path: Path) -> None:
    with (
        InProcessBroker(tmp_path / "first") as first,
        pytest.raises(InProcessBrokerError, match="cannot start broker"),
    ):
        InProcessBroker(tmp_path / "second", port=first.port).start()


def test_it_leaves_no_thread_signal_handler_or_loop_behind(tmp_path: Path) -> None:
    """The broker shares the process with the tests' own clients and a Spark session's
    py4j connection: it installs no signal handler, sets no event loop on the caller's
    thread and its threads end with it."""
    handlers = {
        signum: signal.getsignal(signum)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)
    }
    threads = set(threading.enumerate())
    with InProcessBroker(tmp_path / "data") as broker:
        create_topic(broker.bootstrap, "t")
        produce(broker.bootstrap, "t", [b"x"])
        assert any(t.name == f"onceflow-broker-{broker.port}" for t in threading.enumerate())
    assert set(threading.enumerate()) <= threads
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()
