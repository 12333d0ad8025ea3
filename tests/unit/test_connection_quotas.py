"""ConnectionQuotas: Kafka's per-address, per-listener and broker-wide connection limits."""

from __future__ import annotations

import asyncio

from onceflow.broker.connection_quotas import ConnectionQuotas
from onceflow.config import BrokerConfig


def quotas(**settings: str) -> ConnectionQuotas:
    return ConnectionQuotas.from_config(BrokerConfig.from_strings(settings), ["PLAINTEXT", "SSL"])


def test_per_ip_limit_and_overrides_count_across_listeners():
    async def run() -> None:
        limits = quotas(
            **{
                "max.connections.per.ip": "2",
                "max.connections.per.ip.overrides": "127.0.0.9:0,::ffff:127.0.0.8:3",
            }
        )
        assert limits.admit("PLAINTEXT", "10.0.0.1")
        assert limits.admit("SSL", "10.0.0.1")
        assert not limits.admit("PLAINTEXT", "10.0.0.1")
        assert limits.total == 2
        assert limits.admit("PLAINTEXT", "10.0.0.2")  # another address is not affected
        assert not limits.admit("PLAINTEXT", "127.0.0.9")
        assert [limits.admit("SSL", "127.0.0.8") for _ in range(4)] == [True] * 3 + [False]
        limits.release("SSL", "10.0.0.1")
        assert limits.admit("PLAINTEXT", "10.0.0.1")

    asyncio.run(run())


def test_a_full_listener_or_broker_waits_for_a_slot():
    async def run() -> None:
        limits = quotas(**{"max.connections": "3", "listener.name.plaintext.max.connections": "1"})
        assert limits.admit("PLAINTEXT", "10.0.0.1")
        waiting = asyncio.ensure_future(limits.wait_for_slot("PLAINTEXT"))
        await asyncio.sleep(0)
        assert not waiting.done()
        await limits.wait_for_slot("SSL")  # the other listener is not held
        assert limits.admit("SSL", "10.0.0.2") and limits.admit("SSL", "10.0.0.3")
        assert not limits.slot_available("SSL")  # the broker is full
        limits.release("PLAINTEXT", "10.0.0.1")
        await asyncio.sleep(0)
        assert waiting.done()

    asyncio.run(run())
