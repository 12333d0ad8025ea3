"""SaslHandshake and SaslAuthenticate: the SASL exchange on a SASL_* listener.

Until it completes, a connection may send only ApiVersions, SaslHandshake and
SaslAuthenticate (the connection closes on anything else). Handshake v0, which sends the
SASL tokens without Kafka framing, is not served: clients use v1 when it is advertised.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from onceflow.broker.context import Deferred, RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security.sasl_server import AuthenticationFailed
from onceflow.protocol.codec import build
from onceflow.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
NO_LIFETIME = datetime.timedelta(0)


@handles(17, 1, 1)
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
    return build(ctx.response_class, error_code=ErrorCode.none, mechanisms=mechanisms)


@handles(36, 0, 2)
async def sasl_authenticate(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    exchange = session.sasl
    if not session.authenticating or exchange is None:
        session.close_after_response = session.authenticating
        return _response(ctx, ErrorCode.illegal_sasl_state, "SaslHandshake must come first")
    try:
        challenge = exchange.respond(request.auth_bytes)
    except AuthenticationFailed as reason:
        session.close_after_response = True
        delay = ctx.broker.sasl.throttle.delay_after_failure(session.client_host)
        log.warning(
            "Failed authentication with %s (user %r, mechanism %s): %s; closing after %.0f ms",
            ctx.peer,
            exchange.username,
            exchange.mechanism,
            reason,
            delay * 1000,
        )
        message = (
            "Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {exchange.mechanism}"
        )
        response = _response(ctx, ErrorCode.sasl_authentication_failed, message)
        return Deferred(_after(delay, response))
    if exchange.complete:
        session.principal = f"User:{exchange.username}"
        session.authenticating = False
        session.sasl = None
        log.info("%s authenticated as %s with %s", ctx.peer, session.principal, exchange.mechanism)
    return _response(ctx, ErrorCode.none, None, challenge)


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
