"""ElectLeaders v0-2 (API 43), AlterPartitionReassignments v0 (API 45),
ListPartitionReassignments v0 (API 46).

On one broker every partition's only replica (node 0) is its leader and its preferred
leader, so, as a one-broker Kafka answers: an election is never needed
(ELECTION_NOT_NEEDED), a reassignment to exactly the current replica set is done at once,
and no reassignment is ever in progress.
"""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build
from onceflow.protocol.errors import NO_ERROR, ErrorCode, ErrorOutcome, KafkaError


@handles(43, 0, 2)
async def elect_leaders(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.ALTER, rules.CLUSTER)
    cls, topic_cls, partition_cls = ctx.response_classes(
        "replica_election_results", "partition_result"
    )
    results = []
    # Asked for every partition, Kafka lists only those whose leader changed: none here.
    for wanted in request.topic_partitions or ():
        partitions = []
        for number in wanted.partitions:
            code, message = (
                ErrorCode.election_not_needed,
                "Leader election not needed for topic partition.",
            )
            try:
                ctx.broker.logs.partition(wanted.topic, number)
            except KafkaError as error:
                code, message = error.code, error.message
            partitions.append(
                build(partition_cls, partition_id=number, error_code=code, error_message=message)
            )
        results.append(build(topic_cls, topic=wanted.topic, partition_result=tuple(partitions)))
    return build(
        cls, throttle_time=NO_THROTTLE, **NO_ERROR, replica_election_results=tuple(results)
    )


@handles(45, 0, 0)
async def alter_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.ALTER, rules.CLUSTER)
    cls, topic_cls, partition_cls = ctx.response_classes("responses", "partitions")
    node_id = ctx.broker.node_id
    topics = []
    for wanted in request.topics:
        partitions = []
        for item in wanted.partitions:
            with ErrorOutcome() as outcome:
                ctx.broker.logs.partition(wanted.name, item.partition_index)
                _check_target(item.replicas, node_id)
            partitions.append(
                build(partition_cls, partition_index=item.partition_index, **outcome.fields)
            )
        topics.append(build(topic_cls, name=wanted.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=NO_THROTTLE, **NO_ERROR, responses=tuple(topics))


def _check_target(replicas: Any, node_id: int) -> None:
    if replicas is None:
        raise KafkaError(
            ErrorCode.no_reassignment_in_progress, "No ongoing reassignment for this partition."
        )
    if not replicas:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    if len(set(replicas)) != len(replicas):
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes duplicate replicas.",
        )
    for broker_id in replicas:
        if broker_id != node_id:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )


@handles(46, 0, 0)
async def list_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    rules.require(ctx, rules.DESCRIBE, rules.CLUSTER)
    return build(ctx.response_class, throttle_time=NO_THROTTLE, **NO_ERROR, topics=())
