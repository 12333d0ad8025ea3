"""DescribeCluster v0-1 (API 60): the single node, and (when asked) the cluster operations
allowed."""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.operations import CLUSTER_OPERATIONS
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build, element
from onceflow.protocol.errors import NO_ERROR


@handles(60, 0, 1)
async def describe_cluster(ctx: RequestContext, request: Any) -> Any:
    cls = ctx.response_class
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        **NO_ERROR,
        endpoint_type=getattr(request, "endpoint_type", 1),
        **cluster_fields(ctx, request, element(cls, "brokers"), "broker_id"),
    )


def cluster_fields(ctx: RequestContext, request: Any, broker_cls: type, id_field: str) -> dict:
    """What DescribeCluster and Metadata both say of the cluster: its id, this broker as the
    only broker and the controller, and (when asked) the cluster operations allowed."""
    broker = ctx.broker
    this_broker = build(
        broker_cls,
        **{id_field: broker.node_id},
        host=ctx.advertised_host,
        port=ctx.advertised_port,
        rack=None,
    )
    return {
        "brokers": (this_broker,),
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "cluster_authorized_operations": rules.authorized_operations(
            ctx,
            rules.CLUSTER,
            rules.CLUSTER_NAME,
            getattr(request, "include_cluster_authorized_operations", False),
            CLUSTER_OPERATIONS,
        ),
    }
