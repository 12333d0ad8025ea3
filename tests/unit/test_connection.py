"""Connection: requests answered in order, and no hang when the client goes away."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace

from kio.schema.api_versions.v0.request import ApiVersionsRequest

import onceflow.broker.handlers  # noqa: F401  (registers the API handlers)
from onceflow.broker.connection import MAX_IN_FLIGHT, Connection
from onceflow.broker.metrics import BrokerMetrics
from onceflow.config import BrokerConfig
from tests.kit.wire import encode

# what Connection reads
BROKER = SimpleNamespace(config=BrokerConfig.from_strings({}), traps=None, metrics=BrokerMetrics())


def api_versions_frame(correlation_id: int) -> bytes:
    return encode(ApiVersionsRequest(), correlation_id)


class FakeFrames:
    """Stands in for FrameProtocol: hands out frames, records or refuses writes."""

    peer = "127.0.0.1:4242"

    def __init__(self, frames: list[bytes], lost_after: int | None = None) -> None:
        self.frames = list(frames)
        self.lost_after = lost_after
        self.written: list[bytes] = []
        self.closed = False

    async def next_frame(self) -> bytes | None:
        await asyncio.sleep(0)
        return self.frames.pop(0) if self.frames else None

    def write(self, data: bytes) -> None:
        if self.lost_after is not None and len(self.written) >= self.lost_after:
            raise ConnectionResetError("connection lost")
        self.written.append(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def close(self) -> None:
        self.closed = True


def serve(frames: FakeFrames, timeout: float = 10.0) -> None:
    """Run a connection over ``frames``; fail (rather than hang) if it does not end."""
    loop = asyncio.new_event_loop()
    try:
        task = loop.create_task(Connection(BROKER, frames).serve())  # type: ignore[arg-type]
        loop.run_until_complete(asyncio.wait({task}, timeout=timeout))
        assert task.done(), "the connection did not finish"
        task.result()
    finally:
        loop.close()


def correlation_ids(responses: list[bytes]) -> list[int]:
    return [struct.unpack_from(">i", response, 4)[0] for response in responses]


def test_responses_come_back_in_request_order():
    frames = FakeFrames([api_versions_frame(n) for n in range(40)])
    serve(frames)
    assert correlation_ids(frames.written) == list(range(40))
    assert frames.closed


def test_lost_connection_with_more_requests_than_the_queue_holds_does_not_hang():
    # The sender dies on its second write; the request loop still has far more requests
    # than MAX_IN_FLIGHT to answer and must stop rather than wait on a full queue.
    frames = FakeFrames([api_versions_frame(n) for n in range(4 * MAX_IN_FLIGHT)], lost_after=1)
    serve(frames)
    assert correlation_ids(frames.written) == [0]
    assert frames.closed
