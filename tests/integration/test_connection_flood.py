"""A flood of idle connections from one client: the broker keeps serving and stays small.

1,000 connections here; ``make stress`` runs 10,000 (``ONCEFLOW_CONNECTION_FLOOD``).
Loopback only.
"""

from __future__ import annotations

import os
import time

from onceflow.broker.process import BrokerProcess
from tests.integration.connections import (
    open_idle,
    open_sockets,
    raise_open_files_limit,
    round_trip,
    rss_kib,
    wait_for_open_sockets,
)

CONNECTIONS = int(os.environ.get("ONCEFLOW_CONNECTION_FLOOD", "1000"))
MAX_BYTES_PER_IDLE_CONNECTION = 64 * 1024


def test_a_flood_of_idle_connections_costs_little_and_the_broker_keeps_serving(tmp_path):
    raise_open_files_limit(CONNECTIONS + 1024)  # for this process and the broker
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        round_trip(broker.bootstrap)  # clients, topic and group exist before the baseline
        time.sleep(1.0)
        sockets_before, before = open_sockets(broker.pid), rss_kib(broker.pid)
        started = time.monotonic()
        sockets = open_idle(broker.bootstrap, CONNECTIONS)
        wait_for_open_sockets(broker.pid, lambda count: count >= sockets_before + CONNECTIONS)
        during = rss_kib(broker.pid)
        opened = time.monotonic() - started
        round_trip(broker.bootstrap)  # served while every one of them is open
        served = time.monotonic() - started
        for sock in sockets:
            sock.close()
        wait_for_open_sockets(broker.pid, lambda count: count <= sockets_before)
        after = rss_kib(broker.pid)
        elapsed = time.monotonic() - started
        per_connection = (during - before) * 1024 / CONNECTIONS
        print(
            f"{CONNECTIONS} idle connections: RSS {before} -> {during} KiB "
            f"({per_connection / 1024:.1f} KB each), {after} KiB after they closed; "
            f"opened in {opened:.1f} s, round trip at {served:.1f} s, closed at {elapsed:.1f} s"
        )
        assert per_connection < MAX_BYTES_PER_IDLE_CONNECTION
        assert (after - before) * 1024 < CONNECTIONS * MAX_BYTES_PER_IDLE_CONNECTION
        round_trip(broker.bootstrap)
    finally:
        broker.stop()
