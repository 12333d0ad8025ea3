"""The SQLite outbox relay and its single-writer lease, against a real broker."""

from __future__ import annotations

from onceflow.db import connect
from onceflow.patterns.outbox import Outbox
from onceflow.patterns.relay import Relay, RelayConfig

ROWS = 10


def test_idle_exit_waits_for_the_lease_of_a_killed_relay(
    kafka_session_broker, kafka_topic_factory, tmp_path
):
    """A relay killed holding the lease leaves it until it expires; a relay started meanwhile
    with an idle exit shorter than that must not exit with rows still unpublished."""
    topic = kafka_topic_factory(1)
    with connect(f"sqlite:///{tmp_path / 'app.db'}") as db:
        outbox = Outbox(db)
        outbox.create_schema()
        with db.transaction() as tx:
            for n in range(ROWS):
                outbox.add(tx, topic, b"k", f"v{n}")
        config = RelayConfig(kafka_session_broker.bootstrap, lease_ttl_ms=1500, idle_sleep_s=0.05)
        killed = Relay(db, outbox, config)
        assert killed._take_lease()  # then SIGKILLed: the lease stays until it expires
        published = Relay(db, outbox, config).run(lambda: False, idle_exit_s=0.3)
        assert (published, outbox.backlog()) == (ROWS, 0)
