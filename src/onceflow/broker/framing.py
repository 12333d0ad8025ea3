"""Size-prefixed Kafka frames off a socket, with as few copies as the protocol allows,
and nothing held by a connection that has nothing in flight.

An ``asyncio.BufferedProtocol``. The event loop receives into one scratch buffer shared
by every connection of the thread (``get_buffer``, ``recv_into`` and ``buffer_updated``
run back to back, so no two connections use it at once); complete frames are copied out
of it. An incomplete frame gets a buffer of exactly its size as soon as its size prefix is
known, and a large one is received straight into that buffer. A delivered frame's buffer
belongs to the frame and is freed with it: an idle connection holds no receive buffer.

On a TLS listener the records are decrypted here too (:mod:`onceflow.broker.tls_records`):
asyncio's own TLS transport keeps a 256 KiB buffer per connection.

Frames are handed to one consumer (the connection's request loop) in order by
``next_frame()``. Reading pauses while too many received frames wait to be handled, as a
``StreamReader`` pauses when its buffer is full. Writing goes through ``write()`` and
``drain()`` with the transport's flow control.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import struct
import threading
import time
from collections.abc import Callable

from onceflow.broker.tls_records import TlsRecords

SIZE = struct.Struct(">i")
RECEIVE_BUFFER_BYTES = 256 * 1024  # the selector transport reads at most this much per call
OWN_BUFFER_BYTES = 64 * 1024  # the rest of a frame at least this large is received directly
PAUSE_FRAMES = 64  # stop reading while this many frames wait ...
PAUSE_BYTES = 4 * 1024 * 1024  # ... or this many bytes of them

Frame = bytes | memoryview


class _Scratch(threading.local):
    """The thread's receive buffer, lent to one connection at a time."""

    def __init__(self) -> None:
        self.view = memoryview(bytearray(RECEIVE_BUFFER_BYTES))


_scratch = _Scratch()


class FrameError(Exception):
    """The byte stream is not a sequence of acceptable frames; the connection must close."""


class FrameProtocol(asyncio.BufferedProtocol):
    def __init__(
        self,
        max_frame_bytes: int,
        on_open: Callable[[FrameProtocol], None],
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._on_open = on_open
        self._on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.peer = "unknown"
        self.last_activity = time.monotonic()  # the last byte received or sent
        self._head = b""  # the first bytes (fewer than 4) of a size prefix
        self._own: bytearray | None = None  # the incomplete frame, sized to it
        self._own_filled = 0
        self._direct = False  # get_buffer handed out _own itself, not the scratch buffer
        self._frames: collections.deque[Frame] = collections.deque()
        self._queued_bytes = 0
        self._error: FrameError | None = None  # delivered after the frames before it
        self._eof = False
        self._lost = False
        self._reading_paused = False
        self._frame_waiter: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._tls: TlsRecords | None = None

    # -- asyncio callbacks ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        self._on_open(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        own = self._own
        if (
            self._tls is None
            and own is not None
            and len(own) - self._own_filled >= OWN_BUFFER_BYTES
        ):
            self._direct = True
            return memoryview(own)[self._own_filled :]
        self._direct = False
        return _scratch.view

    def buffer_updated(self, nbytes: int) -> None:
        self.last_activity = time.monotonic()
        if self._direct:
            self._direct = False
            self._own_filled += nbytes
            if self._own is not None and self._own_filled == len(self._own):
                self._deliver_own()
        elif self._tls is not None:
            self._tls.received(_scratch.view[:nbytes])
        else:
            self.consume(_scratch.view[:nbytes])
        self._maybe_pause()

    def eof_received(self) -> bool:
        if self._error is None and self._own is not None:
            self._fail(f"connection closed inside a {len(self._own)}-byte request")
        elif self._error is None and self._head:
            self._fail("truncated size prefix")
        self._eof = True
        self._wake_reader()
        # Keep the transport open: the responses still owed are written (TLS cannot).
        return self._tls is None

    @property
    def peer_gone(self) -> bool:
        """The client closed its end (or the connection was lost)."""
        return self._eof or self._lost

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._eof = True
        self._own = None
        # Dropping the TLS layer breaks the cycle between it and this protocol, so a closed
        # connection is freed at once rather than by the cyclic garbage collector.
        tls, self._tls = self._tls, None
        if tls is not None:
            tls.lost()
        self._wake_reader()
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionResetError("connection lost"))
        self._drain_waiters.clear()
        if self._on_lost is not None:
            on_lost, self._on_lost = self._on_lost, None
            on_lost()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # -- framing --------------------------------------------------------------------------

    def consume(self, data: memoryview) -> None:
        """Cut frames out of received (or decrypted) bytes; keep an incomplete one."""
        position, end = 0, len(data)
        while position < end and self._error is None:
            own = self._own
            if own is not None:
                take = min(len(own) - self._own_filled, end - position)
                own[self._own_filled : self._own_filled + take] = data[position : position + take]
                self._own_filled += take
                position += take
                if self._own_filled == len(own):
                    self._deliver_own()
                continue
            if self._head or end - position < SIZE.size:
                take = min(SIZE.size - len(self._head), end - position)
                self._head += bytes(data[position : position + take])
                position += take
                if len(self._head) < SIZE.size:
                    return
                (size,) = SIZE.unpack(self._head)
                self._head = b""
                begin = position
            else:
                (size,) = SIZE.unpack_from(data, position)
                begin = position + SIZE.size
            if size < 0 or size > self.max_frame_bytes:
                self._fail(
                    f"request size {size} is outside 0..{self.max_frame_bytes} "
                    "(socket.request.max.bytes)"
                )
                return
            if end - begin >= size:
                self._deliver(bytes(data[begin : begin + size]))
                position = begin + size
            else:
                self._own, self._own_filled = bytearray(size), 0
                position = begin

    def _deliver_own(self) -> None:
        assert self._own is not None
        self._deliver(memoryview(self._own).toreadonly())
        self._own, self._own_filled = None, 0

    def _deliver(self, frame: Frame) -> None:
        self._frames.append(frame)
        self._queued_bytes += len(frame)
        self._wake_reader()

    def _fail(self, reason: str) -> None:
        self._error = FrameError(reason)
        self._own = None
        self._wake_reader()
        if self.transport is not None and not self._lost:
            self.transport.pause_reading()
            self._reading_paused = True

    def _maybe_pause(self) -> None:
        if self._reading_paused or self._lost or self.transport is None:
            return
        if len(self._frames) >= PAUSE_FRAMES or self._queued_bytes >= PAUSE_BYTES:
            self.transport.pause_reading()
            self._reading_paused = True

    def _wake_reader(self) -> None:
        waiter = self._frame_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def end_of_stream(self) -> None:
        """The peer ended the TLS session (close_notify): like a TCP end of stream."""
        self.eof_received()
        self.close()

    # -- for the request loop -------------------------------------------------------------

    async def next_frame(self) -> Frame | None:
        """The next frame; None at a clean end of stream; FrameError for a broken stream."""
        while not self._frames:
            if self._error is not None:
                raise self._error
            if self._eof:
                return None
            self._frame_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._frame_waiter
            finally:
                self._frame_waiter = None
        frame = self._frames.popleft()
        self._queued_bytes -= len(frame)
        if (
            self._reading_paused
            and self._error is None
            and not self._lost
            and len(self._frames) < PAUSE_FRAMES // 2
            and self._queued_bytes < PAUSE_BYTES // 2
        ):
            self._reading_paused = False
            assert self.transport is not None
            self.transport.resume_reading()
        return frame

    def pause_reading(self) -> None:
        """Leave incoming bytes in the socket until ``start_tls`` (a TLS listener)."""
        assert self.transport is not None
        self.transport.pause_reading()

    async def start_tls(self, context: ssl.SSLContext, timeout: float) -> ssl.SSLObject:
        """Run the server side of the TLS handshake; from then on frames are decrypted.

        Raises what the handshake raised (ssl.SSLError, ConnectionError, TimeoutError)."""
        assert self.transport is not None
        self._tls = TlsRecords(context, self)
        self.transport.resume_reading()
        # Not wait_for: its frame keeps the future, whose exception's traceback keeps that
        # frame, a cycle that would hold each failed handshake until a full collection.
        async with asyncio.timeout(timeout):
            return await self._tls.handshake

    def write(self, data: bytes) -> None:
        if self._lost or self.transport is None:
            raise ConnectionResetError("connection lost")
        self.last_activity = time.monotonic()
        if self._tls is not None:
            self._tls.send(data)
        else:
            self.transport.write(data)

    async def drain(self) -> None:
        if self._lost:
            raise ConnectionResetError("connection lost")
        if self._writing_paused:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            if self._tls is not None:
                self._tls.close()
            self.transport.close()
