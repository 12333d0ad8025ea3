"""One client connection: read frames, dispatch, write responses in request order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onceflow.broker.context import NO_RESPONSE, Deferred, RequestContext
from onceflow.broker.framing import Frame, FrameError, FrameProtocol
from onceflow.broker.registry import HANDLERS
from onceflow.broker.security.sasl_server import AuthenticationFailed
from onceflow.broker.security.session import Session
from onceflow.broker.traps import APPLIED, SENT, Trap
from onceflow.protocol.codec import (
    API_VERSIONS_KEY,
    MalformedRequest,
    api_name,
    decode_request,
    encode_response,
    error_response,
    peek_header,
    request_class,
    response_class,
)
from onceflow.protocol.errors import ErrorCode, KafkaError
from onceflow.security.tls import certificate_principal

if TYPE_CHECKING:
    from onceflow.broker.core import BrokerCore

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 16
LEAVE_ON_DISCONNECT = "onceflow.group.leave.on.disconnect"
TLS_HANDSHAKE_TIMEOUT = 10.0  # or connections.max.idle.ms if that is shorter
METADATA_KEY = 3
SASL_PHASE_APIS = frozenset({API_VERSIONS_KEY, 17, 36})  # + SaslHandshake, SaslAuthenticate


class CloseConnection(Exception):
    """The client sent something Kafka answers by closing the connection."""


class Connection:
    def __init__(
        self,
        broker: BrokerCore,
        frames: FrameProtocol,
        session: Session | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.broker = broker
        self.frames = frames
        self.peer = frames.peer
        self.session = session or Session(client_host=self.peer.rsplit(":", 1)[0])
        self._tls = tls
        self._responses: asyncio.Queue[Any] = asyncio.Queue(MAX_IN_FLIGHT)
        self._opened = time.monotonic()
        self._unanswered = 0  # requests read and not yet answered
        idle_ms = broker.config["connections.max.idle.ms"]
        self._max_idle = idle_ms / 1000 if idle_ms >= 0 else None
        self._idle_timer: asyncio.TimerHandle | None = None

    async def serve(self) -> None:
        self._watch_idle(self._max_idle)
        try:
            if self._tls is None or await self._start_tls(self._tls):
                await self._serve_requests()
        finally:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            if self.session.group_members and self.broker.config[LEAVE_ON_DISCONNECT]:
                self.broker.groups.members_disconnected(self.session.group_members)

    def _watch_idle(self, delay: float | None) -> None:
        if delay is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(delay, self._expire)

    def _expire(self) -> None:
        """Kafka's connections.max.idle.ms: close a connection with no request in flight
        that has sent and received nothing for that long, and one that has not finished
        SASL authentication within that time of connecting."""
        assert self._max_idle is not None
        now = time.monotonic()
        if self.session.authenticating and now - self._opened >= self._max_idle:
            log.info(
                "closing connection from %s: not authenticated within "
                "connections.max.idle.ms (%d ms)",
                self.peer,
                self._max_idle * 1000,
            )
            self.frames.close()
            return
        idle = now - self.frames.last_activity
        if idle >= self._max_idle and self._unanswered == 0:
            log.debug("closing connection from %s: idle for %.0f s", self.peer, idle)
            self.frames.close()
            return
        self._watch_idle(max(self._max_idle - idle, 0.001))

    async def _serve_requests(self) -> None:
        sender: asyncio.Task[None] | None = None  # started by the first request
        session = self.session
        limited = session.authenticating  # frames limited to sasl.server.max.receive.size
        try:
            while True:
                try:
                    frame = await self.frames.next_frame()
                except FrameError as error:
                    raise CloseConnection(str(error)) from None
                if frame is None:
                    break
                if sender is None:
                    sender = asyncio.create_task(self._send_responses())
                self._unanswered += 1
                result = await self._dispatch(frame)
                if result is NO_RESPONSE:
                    self._unanswered -= 1
                elif not await self._enqueue(result, sender):
                    break  # the sender is gone: the connection was lost
                if session.close_after_response:
                    break
                if limited and not session.authenticating:
                    self.frames.max_frame_bytes = self.broker.config["socket.request.max.bytes"]
                    limited = False
        except CloseConnection as reason:
            log.warning("closing connection from %s: %s", self.peer, reason)
        except ConnectionError:
            pass
        finally:
            if sender is not None and await self._enqueue(None, sender):
                with contextlib.suppress(Exception):
                    await sender
            self.frames.close()

    async def _start_tls(self, context: ssl.SSLContext) -> bool:
        """The TLS handshake; the client certificate's subject becomes the principal."""
        deadline = min(TLS_HANDSHAKE_TIMEOUT, self._max_idle or TLS_HANDSHAKE_TIMEOUT)
        try:
            ssl_object = await self.frames.start_tls(context, deadline)
        except (OSError, TimeoutError, ssl.SSLError) as error:
            log.warning("TLS handshake with %s failed: %s", self.peer, error)
            self.frames.close()
            return False
        principal = certificate_principal(ssl_object)
        if principal is not None:
            self.session.principal = principal
        return True

    async def _enqueue(self, item: Any, sender: asyncio.Task[None]) -> bool:
        """Hand a response to the sender, in order; False if the sender has stopped."""
        if sender.done():
            return False
        if not self._responses.full():
            self._responses.put_nowait(item)
            return True
        put = asyncio.ensure_future(self._responses.put(item))
        await asyncio.wait((put, sender), return_when=asyncio.FIRST_COMPLETED)
        if put.done():
            return True
        put.cancel()
        return False

    async def _send_responses(self) -> None:
        while True:
            item = await self._responses.get()
            if item is None:
                return
            if isinstance(item, _Pending):
                try:
                    item = await item.encoded()
                except Exception:
                    log.exception("deferred response failed on %s", self.peer)
                    self.frames.close()
                    return
            self.frames.write(item)
            self._unanswered -= 1
            await self.frames.drain()

    async def _dispatch(self, frame: Frame) -> Any:
        if self.session.raw_sasl_tokens:
            return self._raw_sasl_token(frame)
        read_at = time.monotonic()
        try:
            api_key, version, correlation_id = peek_header(frame)
        except MalformedRequest as error:
            raise CloseConnection(str(error)) from None
        handler = HANDLERS.get(api_key)
        if self.session.authenticating and api_key not in SASL_PHASE_APIS:
            raise CloseConnection(
                f"{api_name(api_key)} request before SASL authentication (SaslHandshake, "
                "SaslAuthenticate) completed"
            )
        if handler is None or not handler.supports(version):
            if api_key == API_VERSIONS_KEY:
                return self._unsupported_api_versions(correlation_id)
            # Kafka cannot parse the header of a request it does not serve and closes the
            # connection; ApiVersions told the client what it may send.
            raise CloseConnection(f"{api_name(api_key)} v{version} is not served by this broker")
        cls = request_class(api_key, version)
        assert cls is not None  # the registry only holds versions kio models
        try:
            header, body = decode_request(frame, cls)
        except MalformedRequest as error:
            raise CloseConnection(str(error)) from None
        responder = response_class(api_key, version)
        context = RequestContext(self.broker, header, self.peer, self.session)
        trap = self._trap(api_key, body)
        if trap is not None and trap.phase == SENT:
            await self._hold(trap)
        try:
            result = await handler.handle(context, body)
            if trap is not None and trap.phase == APPLIED and isinstance(result, Deferred):
                result = await result.awaitable
        except KafkaError as error:
            result = error_response(responder, error.code)
        except Exception:
            log.exception("%s v%d from %s failed", api_name(api_key), version, self.peer)
            result = error_response(responder, ErrorCode.unknown_server_error)
        if trap is not None and trap.phase == APPLIED:
            await self._hold(trap)
        metrics = self.broker.metrics
        if isinstance(result, Deferred):
            # A future stays as it is; a coroutine starts running now, as a task.
            ready = asyncio.ensure_future(result.awaitable)
            ready.add_done_callback(
                lambda _: metrics.request(api_key, version, time.monotonic() - read_at)
            )
            return _Pending(api_key, correlation_id, Deferred(ready), responder)
        metrics.request(api_key, version, time.monotonic() - read_at)
        if result is NO_RESPONSE:
            return NO_RESPONSE
        return _encode(api_key, correlation_id, result, responder)

    def _trap(self, api_key: int, body: Any) -> Trap | None:
        """The request trap this request springs (onceflow.broker.traps; tests only)."""
        traps = self.broker.traps
        if traps is None:
            return None
        worker = traps.worker_of(self.session.listener_name)
        if worker is None:
            return None
        if api_key == METADATA_KEY and body.topics:
            traps.asked_about(worker, [topic.name for topic in body.topics if topic.name])
        return traps.match(worker, api_key)

    async def _hold(self, trap: Trap) -> None:
        assert self.broker.traps is not None
        if not await self.broker.traps.hold(trap, lambda: self.frames.peer_gone):
            raise CloseConnection(f"request held by a test trap dropped ({trap.line.strip()})")

    def _raw_sasl_token(self, frame: Frame) -> Any:
        """A SASL token after SaslHandshake v0: answered as a bare frame; a failure has no
        answer but closing the connection (after the failure delay)."""
        from onceflow.broker.handlers.sasl import exchange_token

        try:
            challenge = exchange_token(self.broker, self.session, self.peer, bytes(frame))
        except AuthenticationFailed as failure:
            return _Silence(failure.args[0])
        return struct.pack(">i", len(challenge)) + challenge

    def _unsupported_api_versions(self, correlation_id: int) -> bytes:
        from onceflow.broker.handlers.api_versions import api_versions_response

        cls = response_class(API_VERSIONS_KEY, 0)
        return encode_response(
            API_VERSIONS_KEY,
            correlation_id,
            api_versions_response(cls, ErrorCode.unsupported_version),
        )


@dataclass(slots=True)
class _Pending:
    """A deferred response in the send queue; encoded once its awaitable is done."""

    api_key: int
    correlation_id: int
    deferred: Deferred
    responder: type

    async def encoded(self) -> bytes:
        try:
            response = await self.deferred.awaitable
        except KafkaError as error:
            response = error_response(self.responder, error.code)
        return _encode(self.api_key, self.correlation_id, response, self.responder)


class _Silence(_Pending):
    """Nothing to send, after a delay (a failed SASL v0 exchange, then the close)."""

    __slots__ = ()

    def __init__(self, seconds: float) -> None:
        super().__init__(0, 0, Deferred(asyncio.sleep(seconds, b"")), object)

    async def encoded(self) -> bytes:
        return await self.deferred.awaitable


def _encode(api_key: int, correlation_id: int, response: Any, responder: type) -> bytes:
    """Encode a response; a response that cannot be encoded becomes UNKNOWN_SERVER_ERROR."""
    try:
        return encode_response(api_key, correlation_id, response)
    except Exception:
        log.exception("cannot encode %s response", api_name(api_key))
        return encode_response(
            api_key, correlation_id, error_response(responder, ErrorCode.unknown_server_error)
        )
