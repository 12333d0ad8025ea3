"""DescribeCluster v0-1 (API 60): the single node, and (when asked) the cluster operations
allowed."""

from __future__ import annotations

import datetime
from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.operations import CLUSTER_OPERATIONS
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import build, element
from onceflow.protocol.errors import ErrorCode


@handles(60, 0, 1)
async def describe_cluster(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    cls = ctx.response_class
    broker_cls = element(cls, "brokers")
    return build(
        cls,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=getattr(request, "endpoint_type", 1),
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=(
            build(
                broker_cls,
                broker_id=broker.node_id,
                host=ctx.advertised_host,
                port=ctx.advertised_port,
                rack=None,
            ),
        ),
        cluster_authorized_operations=rules.authorized_operations(
            ctx,
            rules.CLUSTER,
            rules.CLUSTER_NAME,
            getattr(request, "include_cluster_authorized_operations", False),
            CLUSTER_OPERATIONS,
        ),
    )
