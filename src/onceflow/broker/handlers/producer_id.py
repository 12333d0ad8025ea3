"""InitProducerId v0-5 (API 22): new ids for idempotent producers; transactional ids go to the
coordinator."""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build
from onceflow.protocol.errors import ErrorCode, KafkaError


@handles(22, 0, 5)
async def init_producer_id(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    rules.require_init_producer_id(ctx, request.transactional_id)
    if request.transactional_id is None:
        producer_id, epoch = broker.producer_ids.next_id(), 0
    else:
        try:
            producer_id, epoch = await broker.transactions.init_producer_id(
                request.transactional_id,
                request.transaction_timeout.total_seconds() * 1000,
                getattr(request, "producer_id", -1),
                getattr(request, "producer_epoch", -1),
            )
        except KafkaError as error:
            code = error.code
            if code == ErrorCode.producer_fenced and ctx.version < 4:
                code = ErrorCode.invalid_producer_epoch  # KIP-588: older clients
            return build(
                ctx.response_class,
                throttle_time=NO_THROTTLE,
                error_code=code,
                producer_id=-1,
                producer_epoch=-1,
            )
    return build(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
