"""A broker started on port 0 gets a free port below the kernel's ephemeral range, and
keeps it across restarts (``onceflow.broker.process.bind_ports``); ``onceflow.ports``
keeps a chosen port from others."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from onceflow import ports
from onceflow.broker.process import bind_ports
from onceflow.ports import _ephemeral_range

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:19093"


def below_the_ephemeral_range(port: int) -> bool:
    return 0 < port < _ephemeral_range()[0]


def test_port_zero_becomes_a_port_the_kernel_would_not_hand_out():
    config, port, listeners = bind_ports({"num.partitions": "3"}, 0, {})
    assert below_the_ephemeral_range(port)
    assert config == {"num.partitions": "3"} and listeners == {}


def test_a_given_port_is_kept():
    assert bind_ports({}, 19092, {})[1] == 19092


def test_each_listener_on_port_zero_gets_its_own_port_and_the_others_keep_theirs():
    config, _, listeners = bind_ports({"listeners": LISTENERS}, 0, {})
    assert set(listeners) == {"PLAINTEXT", "SASL_SSL"}
    ports = [int(address.rsplit(":", 1)[1]) for address in listeners.values()]
    assert len(set(ports)) == 2 and all(map(below_the_ephemeral_range, ports))
    assert config["listeners"] == (
        f"PLAINTEXT://{listeners['PLAINTEXT']},SASL_SSL://{listeners['SASL_SSL']},"
        "SSL://127.0.0.1:19093"
    )


def test_a_restart_keeps_the_ports_of_the_first_start():
    first, _, bound = bind_ports({"listeners": LISTENERS}, 0, {})
    again, _, still = bind_ports({"listeners": LISTENERS}, 0, bound)
    assert again == first and still == bound


def test_a_port_stays_reserved_while_the_process_that_chose_it_lives(tmp_path, monkeypatch):
    """A cluster node down for an outage comes back on the port chosen when the cluster
    started, minutes before: nobody else may choose it meanwhile (a parallel test's broker
    took such a port and then failed to bind it)."""
    monkeypatch.setattr(ports, "_CHOSEN", tmp_path)
    pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    finished = pid.stdout.strip()
    long_ago = time.time() - 2 * ports.RESERVED_S
    for port, chooser in ((10001, str(os.getpid())), (10002, finished), (10003, "")):
        note = tmp_path / str(port)
        note.write_text(chooser)
        os.utime(note, (long_ago, long_ago))
    (tmp_path / "10004").write_text(finished)  # chosen just now by a process that ended
    with ports._choosing() as reserved:
        assert reserved == {10001, 10004}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.isdigit()) == ["10001", "10004"]
    chosen = ports.free_ports(3)
    assert not set(chosen) & {10001, 10004}
    assert all((tmp_path / str(p)).read_text() == str(os.getpid()) for p in chosen)
