"""DescribeCluster v0-1 (API 60): the single node, and (when asked) the cluster operations
allowed."""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.operations import CLUSTER_OPERATIONS
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build, element
from onceflow.protocol.errors import NO_ERROR, ErrorCode

BROKERS, CONTROLLERS = 1, 2  # DescribeCluster v1 endpoint types


@handles(60, 0, 1)
async def describe_cluster(ctx: RequestContext, request: Any) -> Any:
    cls = ctx.response_class
    endpoint_type = getattr(request, "endpoint_type", BROKERS)
    if endpoint_type != BROKERS:  # a broker listener describes brokers only, as Kafka's
        code = (
            ErrorCode.mismatched_endpoint_type
            if endpoint_type == CONTROLLERS
            else ErrorCode.unsupported_endpoint_type
        )
        return build(
            cls,
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=f"endpoint type {endpoint_type} is not served on this listener",
            endpoint_type=BROKERS,
            cluster_id="",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=-(2**31),
        )
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
