"""Size-prefixed Kafka frames off a socket, with as few copies as the protocol allows.

An ``asyncio.BufferedProtocol``: the event loop receives straight into our buffers
(``recv_into``). Small frames (most requests) are cut out of one reusable receive buffer.
A large frame (a Produce request of a megabyte) gets a buffer of its own as soon as its
size is known, and the rest of it is received directly into that buffer, so its bytes are
copied once from the kernel and never again until the handler decodes them.

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
from collections.abc import Callable

SIZE = struct.Struct(">i")
RECEIVE_BUFFER_BYTES = 256 * 1024  # the selector transport reads at most this much per call
OWN_BUFFER_BYTES = 64 * 1024  # an incomplete frame at least this large gets its own buffer
PAUSE_FRAMES = 64  # stop reading while this many frames wait ...
PAUSE_BYTES = 4 * 1024 * 1024  # ... or this many bytes of them

Frame = bytes | memoryview


class FrameError(Exception):
    """The byte stream is not a sequence of acceptable frames; the connection must close."""


class FrameProtocol(asyncio.BufferedProtocol):
    def __init__(self, max_frame_bytes: int, on_open: Callable[[FrameProtocol], None]) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._on_open = on_open
        self.transport: asyncio.Transport | None = None
        self.peer = "unknown"
        self._buffer = bytearray(RECEIVE_BUFFER_BYTES)
        self._start = 0  # first unconsumed byte of _buffer
        self._end = 0  # end of the received bytes in _buffer
        self._own: bytearray | None = None  # the large frame being received
        self._own_filled = 0
        self._frames: collections.deque[Frame] = collections.deque()
        self._queued_bytes = 0
        self._error: FrameError | None = None  # delivered after the frames before it
        self._eof = False
        self._lost = False
        self._reading_paused = False
        self._frame_waiter: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._tls = False

    # -- asyncio callbacks ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "unknown"
        self._on_open(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._own is not None:
            return memoryview(self._own)[self._own_filled :]
        if self._end == len(self._buffer):
            self._compact()
        return memoryview(self._buffer)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._own is not None:
            self._own_filled += nbytes
            if self._own_filled == len(self._own):
                self._deliver(memoryview(self._own).toreadonly())
                self._own = None
                self._maybe_pause()
            return
        self._end += nbytes
        self._split()
        self._maybe_pause()

    def eof_received(self) -> bool:
        if self._error is None and self._own is not None:
            self._fail(f"connection closed inside a {len(self._own)}-byte request")
        elif self._error is None and self._end > self._start:
            if self._end - self._start < SIZE.size:
                self._fail("truncated size prefix")
            else:
                (size,) = SIZE.unpack_from(self._buffer, self._start)
                self._fail(f"connection closed inside a {size}-byte request")
        self._eof = True
        self._wake_reader()
        # Keep the transport open: the responses still owed are written (TLS cannot).
        return not self._tls

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._eof = True
        self._wake_reader()
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionResetError("connection lost"))
        self._drain_waiters.clear()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._drain_waiters.clear()

    # -- framing --------------------------------------------------------------------------

    def _split(self) -> None:
        """Cut every complete frame out of the receive buffer."""
        buffer = self._buffer
        view = memoryview(buffer)
        try:
            while self._error is None and self._end - self._start >= SIZE.size:
                (size,) = SIZE.unpack_from(buffer, self._start)
                if size < 0 or size > self.max_frame_bytes:
                    self._fail(
                        f"request size {size} is outside 0..{self.max_frame_bytes} "
                        "(socket.request.max.bytes)"
                    )
                    return
                begin = self._start + SIZE.size
                available = self._end - begin
                if available >= size:
                    self._deliver(bytes(view[begin : begin + size]))
                    self._start = begin + size
                    continue
                if size >= OWN_BUFFER_BYTES or size + SIZE.size > len(buffer):
                    own = bytearray(size)
                    own[:available] = view[begin : self._end]
                    self._own, self._own_filled = own, available
                    self._start = self._end = 0
                return
        finally:
            view.release()
            if self._start == self._end:
                self._start = self._end = 0

    def _compact(self) -> None:
        """Move the unconsumed bytes (the beginning of one frame) to the buffer's front."""
        remaining = self._end - self._start
        self._buffer[:remaining] = self._buffer[self._start : self._end]
        self._start, self._end = 0, remaining

    def _deliver(self, frame: Frame) -> None:
        self._frames.append(frame)
        self._queued_bytes += len(frame)
        self._wake_reader()

    def _fail(self, reason: str) -> None:
        self._error = FrameError(reason)
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

    async def start_tls(self, context: ssl.SSLContext, timeout: float) -> ssl.SSLObject | None:
        """Run the server side of the TLS handshake; from then on frames are decrypted.

        Raises what the handshake raised (ssl.SSLError, ConnectionError, TimeoutError)."""
        assert self.transport is not None
        transport = await asyncio.get_running_loop().start_tls(
            self.transport, self, context, server_side=True, ssl_handshake_timeout=timeout
        )
        assert transport is not None
        self.transport = transport
        self._tls = True
        return transport.get_extra_info("ssl_object")

    def write(self, data: bytes) -> None:
        if self._lost or self.transport is None:
            raise ConnectionResetError("connection lost")
        self.transport.write(data)

    async def drain(self) -> None:
        if self._lost:
            raise ConnectionResetError("connection lost")
        if self._writing_paused:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
