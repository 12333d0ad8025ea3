"""SaslHandshake v0-1 (API 17) and SaslAuthenticate v0-2 (API 36): the SASL exchange on a SASL_*
listener.

Until it completes, a connection may send only ApiVersions, SaslHandshake and
SaslAuthenticate (the connection closes on anything else). After SaslHandshake v0 the
SASL tokens follow as bare size-prefixed frames (Connection.raw_sasl_token); v1 wraps
them in SaslAuthenticate requests.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from onceflow.broker.context import Deferred, RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security.sasl_server import AuthenticationFailed
from onceflow.broker.security.session import Session
from onceflow.protocol.codec import build
from onceflow.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
NO_LIFETIME = datetime.timedelta(0)


@handles(17, 0, 1)
async def sasl_handshake(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    sasl = ctx.broker.sasl
    mechanisms = tuple(sasl.mechanisms)
    if not session.authenticating or session.sasl is not None:
        session.close_after_response = session.authenticating
        return build(ctx.response_class, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    if request.mechanism not in mechanisms:
        log.warning(
            "closing connection from %s: SASL mechanism %r is not enabled (%s)",
            ctx.peer,
            request.mechanism,
            ", ".join(mechanisms),
        )
        session.close_after_response = True
        return build(
            ctx.response_class,
            error_code=ErrorCode.unsupported_sasl_mechanism,
            mechanisms=mechanisms,
        )
    session.sasl = sasl.start(request.mechanism)
    session.raw_sasl_tokens = ctx.version == 0
    return build(ctx.response_class, error_code=ErrorCode.none, mechanisms=mechanisms)


@handles(36, 0, 2)
async def sasl_authenticate(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    exchange = session.sasl
    if not session.authenticating or exchange is None:
        session.close_after_response = session.authenticating
        return _response(ctx, ErrorCode.illegal_sasl_state, "SaslHandshake must come first")
    try:
        challenge = exchange_token(ctx.broker, session, ctx.peer, request.auth_bytes)
    except AuthenticationFailed as failure:
        message = (
            "Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {exchange.mechanism}"
        )
        response = _response(ctx, ErrorCode.sasl_authentication_failed, message)
        return Deferred(_after(failure.args[0], response))
    return _response(ctx, ErrorCode.none, None, challenge)


def exchange_token(broker: Any, session: Session, peer: str, token: bytes) -> bytes:
    """One step of the session's SASL exchange: the server's token for the client's.

    On failure: logged, the connection marked to close after the answer, and
    AuthenticationFailed raised with the delay (seconds) before that answer."""
    exchange = session.sasl
    try:
        challenge = exchange.respond(token)
    except AuthenticationFailed as reason:
        session.close_after_response = True
        delay = broker.sasl.throttle.delay_after_failure(session.client_host)
        log.warning(
            "Failed authentication with %s (user %r, mechanism %s): %s; closing after %.0f ms",
            peer,
            exchange.username,
            exchange.mechanism,
            reason,
            delay * 1000,
        )
        raise AuthenticationFailed(delay) from None
    if exchange.complete:
        session.principal = f"User:{exchange.username}"
        session.authenticating = False
        session.sasl = None
        session.raw_sasl_tokens = False
        log.info("%s authenticated as %s with %s", peer, session.principal, exchange.mechanism)
    return challenge


def _response(ctx: RequestContext, code: ErrorCode, message: str | None, data: bytes = b"") -> Any:
    return build(
        ctx.response_class,
        error_code=code,
        error_message=message,
        auth_bytes=data,
        session_lifetime=NO_LIFETIME,
    )


async def _after(delay: float, response: Any) -> Any:
    await asyncio.sleep(delay)
    return response
