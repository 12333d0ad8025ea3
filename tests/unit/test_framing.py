"""FrameProtocol: size-prefixed frames cut out of a byte stream however it is chunked."""

from __future__ import annotations

import asyncio
import random
import struct

import pytest

from onceflow.broker import framing
from onceflow.broker.framing import FrameError, FrameProtocol


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.closed = False
        self.written: list[bytes] = []

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 4242) if name == "peername" else default


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def open_protocol(max_frame_bytes: int = 1 << 24) -> tuple[FrameProtocol, FakeTransport]:
    opened: list[FrameProtocol] = []
    protocol = FrameProtocol(max_frame_bytes, opened.append)
    transport = FakeTransport()
    protocol.connection_made(transport)
    assert opened == [protocol] and protocol.peer == "127.0.0.1:4242"
    return protocol, transport


def feed(protocol: FrameProtocol, data: bytes, chunk_sizes: list[int]) -> None:
    """Deliver ``data`` the way the event loop does: get_buffer, copy, buffer_updated."""
    position = 0
    sizes = iter(chunk_sizes)
    while position < len(data):
        buffer = protocol.get_buffer(-1)
        count = min(next(sizes, len(data)), len(buffer), len(data) - position)
        assert count > 0
        buffer[:count] = data[position : position + count]
        del buffer
        protocol.buffer_updated(count)
        position += count


async def drain_frames(protocol: FrameProtocol, count: int) -> list[bytes]:
    return [bytes(await protocol.next_frame()) for _ in range(count)]


MIXED = [0, 1, 7, 300, 70_000, 300_000, 1_100_000]  # small, own-buffer and huge frames
SMALL = [0, 1, 2, 3, 50, 999, 4_000, 20_000, 60_000]  # many frames per receive buffer


@pytest.mark.parametrize(("seed", "sizes", "count"), [
    *((seed, MIXED, 25) for seed in range(4)),
    *((seed, SMALL, 400) for seed in range(4)),
])  # fmt: skip
def test_frames_survive_any_chunking(seed, sizes, count):
    rng = random.Random(seed)
    payloads = [rng.randbytes(rng.choice(sizes)) for _ in range(count)]
    stream = b"".join(frame(p) for p in payloads)
    sizes = [1, 3, 4, 5, 100, 4096, 65536, 262144]
    chunks = [rng.choices(sizes, weights=[1, 1, 1, 1, 2, 4, 40, 40])[0] for _ in range(50_000)]

    async def run() -> None:
        protocol, transport = open_protocol()
        received: list[bytes] = []
        position = 0
        while position < len(stream):  # feed a little, take what is ready, repeat
            step = min(len(stream) - position, rng.randint(1, 400_000))
            feed(protocol, stream[position : position + step], chunks)
            position += step
            while protocol._frames:
                received.append(bytes(await protocol.next_frame()))
        protocol.eof_received()
        assert await protocol.next_frame() is None
        assert received == payloads
        assert not transport.paused

    asyncio.run(run())


def test_large_frame_is_read_only_and_received_in_its_own_buffer():
    payload = bytes(range(256)) * 1000

    async def run() -> None:
        protocol, _ = open_protocol()
        feed(protocol, frame(payload), [100, 1 << 20])
        received = await protocol.next_frame()
        assert isinstance(received, memoryview) and received.readonly
        assert bytes(received) == payload

    asyncio.run(run())


@pytest.mark.parametrize("size", [-1, 1001])
def test_size_outside_limits_fails_after_the_frames_before_it(size):
    async def run() -> None:
        protocol, transport = open_protocol(max_frame_bytes=1000)
        feed(protocol, frame(b"ok") + struct.pack(">i", size) + b"xx", [1 << 20])
        assert await protocol.next_frame() == b"ok"
        with pytest.raises(FrameError, match=r"socket\.request\.max\.bytes"):
            await protocol.next_frame()
        assert transport.paused  # nothing more is read from a broken stream

    asyncio.run(run())


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        (b"\x00\x00", "truncated size prefix"),
        (struct.pack(">i", 10) + b"abc", "inside a 10-byte request"),
        (struct.pack(">i", 100_000) + b"abc", "inside a 100000-byte request"),
    ],
)
def test_end_of_stream_inside_a_frame(tail, reason):
    async def run() -> None:
        protocol, _ = open_protocol()
        feed(protocol, frame(b"whole") + tail, [1 << 20])
        protocol.eof_received()
        assert await protocol.next_frame() == b"whole"
        with pytest.raises(FrameError, match=reason):
            await protocol.next_frame()

    asyncio.run(run())


def test_reading_pauses_while_frames_wait_and_resumes_when_taken(monkeypatch):
    monkeypatch.setattr(framing, "PAUSE_FRAMES", 4)

    async def run() -> None:
        protocol, transport = open_protocol()
        feed(protocol, b"".join(frame(b"x%d" % n) for n in range(6)), [1 << 20])
        assert transport.paused
        assert await drain_frames(protocol, 4) == [b"x0", b"x1", b"x2", b"x3"]
        assert transport.paused  # two still wait: not below half of PAUSE_FRAMES
        assert await drain_frames(protocol, 1) == [b"x4"]
        assert not transport.paused

    asyncio.run(run())


def test_next_frame_waits_for_data_and_drain_for_the_transport():
    async def run() -> None:
        protocol, transport = open_protocol()
        waiting = asyncio.ensure_future(protocol.next_frame())
        await asyncio.sleep(0)
        assert not waiting.done()
        feed(protocol, frame(b"late"), [2, 1 << 20])
        assert await waiting == b"late"
        protocol.pause_writing()
        drained = asyncio.ensure_future(protocol.drain())
        await asyncio.sleep(0)
        assert not drained.done()
        protocol.resume_writing()
        await drained
        protocol.write(b"answer")
        assert transport.written == [b"answer"]
        protocol.connection_lost(None)
        assert await protocol.next_frame() is None
        with pytest.raises(ConnectionResetError):
            protocol.write(b"too late")

    asyncio.run(run())


def test_an_idle_connection_holds_no_receive_buffer():
    async def run() -> None:
        first, _ = open_protocol()
        second, _ = open_protocol()
        # Both receive into the thread's one scratch buffer.
        assert first.get_buffer(-1).obj is second.get_buffer(-1).obj
        feed(first, frame(b"whole") + struct.pack(">i", 1000) + b"abc", [1 << 20])
        assert first._own is not None and len(first._own) == 1000  # sized to its frame
        feed(first, b"x" * 997, [1 << 20])
        assert first._own is None and first._head == b""  # given to the frame
        assert await drain_frames(first, 2) == [b"whole", b"abc" + b"x" * 997]

    asyncio.run(run())
