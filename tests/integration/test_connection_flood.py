"""A flood of idle connections from one client: the broker keeps serving and stays small.

1,000 connections here; ``make stress`` runs 10,000 (``ONCEFLOW_CONNECTION_FLOOD``).
Loopback only.
"""

from __future__ import annotations

import os
import time

from onceflow.broker.process import BrokerProcess
from tests.integration.connections import idle_burst, raise_open_files_limit, round_trip, rss_kib

CONNECTIONS = int(os.environ.get("ONCEFLOW_CONNECTION_FLOOD", "1000"))
MAX_BYTES_PER_IDLE_CONNECTION = 64 * 1024


def test_a_flood_of_idle_connections_costs_little_and_the_broker_keeps_serving(tmp_path):
    raise_open_files_limit(CONNECTIONS + 1024)  # for this process and the broker
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        round_trip(broker.bootstrap)  # clients, topic and group exist before the baseline
        time.sleep(1.0)
        before = rss_kib(broker.pid)
        started = time.monotonic()
        seconds: dict[str, float] = {}

        def serve() -> None:  # served while every one of them is open
            seconds["opened"] = time.monotonic() - started
            round_trip(broker.bootstrap)
            seconds["served"] = time.monotonic() - started

        during, after = idle_burst(broker.pid, broker.bootstrap, CONNECTIONS, while_open=serve)
        elapsed = time.monotonic() - started
        per_connection = (during - before) * 1024 / CONNECTIONS
        print(
            f"{CONNECTIONS} idle connections: RSS {before} -> {during} KiB "
            f"({per_connection / 1024:.1f} KB each), {after} KiB after they closed; "
            f"opened in {seconds['opened']:.1f} s, round trip at {seconds['served']:.1f} s, "
            f"closed at {elapsed:.1f} s"
        )
        assert per_connection < MAX_BYTES_PER_IDLE_CONNECTION
        assert (after - before) * 1024 < CONNECTIONS * MAX_BYTES_PER_IDLE_CONNECTION
        round_trip(broker.bootstrap)
    finally:
        broker.stop()
