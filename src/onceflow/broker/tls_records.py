"""The server side of one TLS session, decrypted and encrypted in memory.

asyncio's TLS transport gives every connection a 256 KiB receive buffer from the moment
the handshake starts, idle or not. Here the received bytes come from the thread's shared
scratch buffer (``framing``), are fed to OpenSSL in record-sized pieces and decrypted
into a second shared buffer, so a connection holds only its ``SSLObject`` and two memory
BIOs that never grow beyond a few records. Nothing is allocated before the client's
first byte.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from typing import Protocol

log = logging.getLogger(__name__)

RECORD_BYTES = 16 * 1024  # TLS's largest plaintext record
PLAIN_BUFFER_BYTES = 64 * 1024


class _PlainScratch(threading.local):
    def __init__(self) -> None:
        self.view = memoryview(bytearray(PLAIN_BUFFER_BYTES))


_plain = _PlainScratch()


class PlainSide(Protocol):
    """What the TLS layer hands decrypted bytes to (framing's FrameProtocol)."""

    peer: str
    transport: asyncio.Transport | None

    def consume(self, data: memoryview) -> None: ...
    def end_of_stream(self) -> None: ...
    def close(self) -> None: ...


class TlsRecords:
    def __init__(self, context: ssl.SSLContext, frames: PlainSide) -> None:
        self._context = context
        self._frames = frames
        self._incoming: ssl.MemoryBIO | None = None
        self._outgoing: ssl.MemoryBIO | None = None
        self._session: ssl.SSLObject | None = None
        self.handshake: asyncio.Future[ssl.SSLObject] = asyncio.get_running_loop().create_future()
        self.handshake.add_done_callback(_retrieve)

    def received(self, data: memoryview) -> None:
        """Bytes off the socket: progress the handshake, hand decrypted bytes to framing."""
        if self.handshake.cancelled():
            return  # the handshake deadline passed; the connection is closing
        if self._session is None:
            self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            self._session = self._context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        assert self._incoming is not None
        for offset in range(0, len(data), RECORD_BYTES):
            self._incoming.write(data[offset : offset + RECORD_BYTES])
            if not self.handshake.done() and not self._shake():
                return
            if not self._decrypt():
                return
        self._flush()

    def send(self, data: bytes | memoryview) -> None:
        """Encrypt record by record (the outgoing BIO stays one record small) and hand the
        transport all of it in one write."""
        assert self._session is not None and self._outgoing is not None
        view = memoryview(data)
        records = []
        try:
            for offset in range(0, len(view), RECORD_BYTES):
                self._session.write(view[offset : offset + RECORD_BYTES])
                records.append(self._outgoing.read())
        except ssl.SSLError as error:
            raise ConnectionResetError(f"TLS write failed: {error}") from None
        transport = self._frames.transport
        if transport is not None and not transport.is_closing():
            transport.write(b"".join(records))

    def close(self) -> None:
        """Send close_notify (best effort) before the transport closes."""
        if self._established():
            assert self._session is not None
            try:
                self._session.unwrap()
            except (ssl.SSLError, ValueError):
                pass  # SSLWantReadError: the peer's close_notify is not awaited
            self._flush()

    def lost(self) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(ConnectionResetError("connection lost in TLS handshake"))

    def _established(self) -> bool:
        handshake = self.handshake
        return handshake.done() and not handshake.cancelled() and handshake.exception() is None

    def _shake(self) -> bool:
        assert self._session is not None
        try:
            self._session.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return True
        except ssl.SSLError as error:
            self._flush()  # the alert that tells the client why
            self.handshake.set_exception(error)
            return False
        self._flush()
        self.handshake.set_result(self._session)
        return True

    def _decrypt(self) -> bool:
        """Everything decryptable so far, to framing; False once the session has ended."""
        if not self._established():
            return True
        assert self._session is not None
        plain = _plain.view
        while True:
            try:
                count = self._session.read(len(plain), plain)
            except ssl.SSLWantReadError:
                return True
            except ssl.SSLZeroReturnError:
                count = 0
            except ssl.SSLError as error:
                log.warning("TLS error from %s: %s", self._frames.peer, error)
                self._frames.close()
                return False
            if count == 0:  # close_notify
                self._flush()
                self._frames.end_of_stream()
                return False
            self._frames.consume(plain[:count])

    def _flush(self) -> None:
        assert self._outgoing is not None
        pending = self._outgoing.read()
        transport = self._frames.transport
        if pending and transport is not None and not transport.is_closing():
            transport.write(pending)


def _retrieve(future: asyncio.Future[ssl.SSLObject]) -> None:
    """A failed handshake is reported by whoever awaited it, or not at all."""
    if not future.cancelled():
        future.exception()
