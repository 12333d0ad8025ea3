"""Who may do what: Kafka's authorization checks, one helper per kind of check.

Each handler calls these near its top (docs/security.md has the table per API). With no
authorizer configured every helper returns at once: nothing is looked up per request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from onceflow.broker.security.acl_model import CLUSTER_NAME, Operation, ResourceType
from onceflow.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
READ, WRITE, CREATE, DELETE = Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE
ALTER, DESCRIBE = Operation.ALTER, Operation.DESCRIBE
DESCRIBE_CONFIGS, ALTER_CONFIGS = Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS
IDEMPOTENT_WRITE, CLUSTER_ACTION = Operation.IDEMPOTENT_WRITE, Operation.CLUSTER_ACTION
NO_AUTHORIZED_OPERATIONS = -(2**31)

DENIED_CODE = {
    TOPIC: ErrorCode.topic_authorization_failed,
    GROUP: ErrorCode.group_authorization_failed,
    CLUSTER: ErrorCode.cluster_authorization_failed,
    TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
}

Denials = dict[str, ErrorCode]


def enabled(ctx: RequestContext) -> bool:
    return ctx.broker.authorizer is not None


def allowed(
    ctx: RequestContext,
    operation: Operation,
    resource_type: ResourceType,
    name: str,
    log_denied: bool = True,
) -> bool:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    session = ctx.session
    return authorizer.authorize(
        session.principal, session.client_host, operation, resource_type, name, log_denied
    )


def require(
    ctx: RequestContext, operation: Operation, resource_type: ResourceType, name: str = ""
) -> None:
    """Raise Kafka's *_AUTHORIZATION_FAILED for the resource type unless allowed."""
    if resource_type == CLUSTER:
        name = CLUSTER_NAME
    if not allowed(ctx, operation, resource_type, name):
        raise KafkaError(DENIED_CODE[resource_type])


def denied_topics(ctx: RequestContext, operation: Operation, names: Iterable[str]) -> Denials:
    """{topic: TOPIC_AUTHORIZATION_FAILED} for each topic the operation is not allowed on."""
    if ctx.broker.authorizer is None:
        return {}
    return {
        name: ErrorCode.topic_authorization_failed
        for name in set(names)
        if not allowed(ctx, operation, TOPIC, name)
    }


def check(denials: Denials, name: str) -> None:
    """Raise the denial recorded for ``name``, if any (inside a handler's per-item try)."""
    if denials and name in denials:
        raise KafkaError(denials[name])


def everything(names: Iterable[str], code: ErrorCode) -> Denials:
    return dict.fromkeys(names, code)


def produce_denials(ctx: RequestContext, transactional_id: str | None, topic_data: Any) -> Denials:
    """Produce: WRITE on the transactional id (if any), then WRITE on each topic."""
    if ctx.broker.authorizer is None:
        return {}
    topics = [topic.name for topic in topic_data]
    if transactional_id is not None and not allowed(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
        return everything(topics, ErrorCode.transactional_id_authorization_failed)
    return denied_topics(ctx, WRITE, topics)


def fetch_denials(ctx: RequestContext, request: Any, topics: list[str]) -> Denials:
    """Fetch: CLUSTER_ACTION for a follower (replica id >= 0), else READ on each topic
    (``topics``: the names fetched, resolved from topic ids from v13 on)."""
    if ctx.broker.authorizer is None:
        return {}
    replica_id = getattr(request, "replica_id", -1)
    if replica_id >= 0:
        if allowed(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
            return {}
        return everything(topics, ErrorCode.topic_authorization_failed)
    return denied_topics(ctx, READ, topics)


def group_then_topics(
    ctx: RequestContext,
    group_id: str,
    group_operation: Operation,
    topic_operation: Operation,
    topics: list[str],
    transactional_id: str | None = None,
) -> Denials:
    """TxnOffsetCommit/OffsetCommit/OffsetDelete: WRITE on the transactional id (if
    given), then the group, then each topic; the first failing level answers for all."""
    if ctx.broker.authorizer is None:
        return {}
    if transactional_id is not None and not allowed(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
        return everything(topics, ErrorCode.transactional_id_authorization_failed)
    if not allowed(ctx, group_operation, GROUP, group_id):
        return everything(topics, ErrorCode.group_authorization_failed)
    return denied_topics(ctx, topic_operation, topics)


def add_partitions_denials(
    ctx: RequestContext, transactional_id: str, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], ErrorCode]:
    """AddPartitionsToTxn: WRITE on the transactional id and each topic. If any topic is
    denied, nothing is added: the other partitions answer OPERATION_NOT_ATTEMPTED."""
    if ctx.broker.authorizer is None:
        return {}
    if not allowed(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    denied = denied_topics(ctx, WRITE, [topic for topic, _ in partitions])
    if not denied:
        return {}
    return {
        (topic, partition): denied.get(topic, ErrorCode.operation_not_attempted)
        for topic, partition in partitions
    }


def require_init_producer_id(ctx: RequestContext, transactional_id: str | None) -> None:
    """InitProducerId: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on
    the cluster or WRITE on some topic."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return
    if transactional_id is not None:
        require(ctx, WRITE, TRANSACTIONAL_ID, transactional_id)
        return
    if allowed(ctx, IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME, log_denied=False):
        return
    session = ctx.session
    if not authorizer.authorize_any(session.principal, session.client_host, WRITE, TOPIC):
        raise KafkaError(ErrorCode.cluster_authorization_failed)


def require_cluster_action_or_alter(ctx: RequestContext) -> None:
    """WriteTxnMarkers: ALTER on the cluster (an admin aborting a hanging transaction)
    or CLUSTER_ACTION (a broker)."""
    if ctx.broker.authorizer is None or allowed(ctx, ALTER, CLUSTER, CLUSTER_NAME, False):
        return
    require(ctx, CLUSTER_ACTION, CLUSTER)


def config_resource_denial(
    ctx: RequestContext, operation: Operation, resource_type: int, name: str
) -> None:
    """DescribeConfigs/AlterConfigs: the operation on the topic, or on the cluster for a
    broker resource (config resource types: 2 topic, 4 broker, 8 broker logger)."""
    if ctx.broker.authorizer is None:
        return
    if resource_type == 2:
        require(ctx, operation, TOPIC, name)
    elif resource_type in (4, 8):
        require(ctx, operation, CLUSTER)


def create_topic_denials(ctx: RequestContext, names: list[str]) -> Denials:
    """CreateTopics: CREATE on the cluster, else CREATE on each topic."""
    if ctx.broker.authorizer is None or allowed(ctx, CREATE, CLUSTER, CLUSTER_NAME, False):
        return {}
    return denied_topics(ctx, CREATE, names)


def visible_topics(ctx: RequestContext, names: Iterable[str]) -> list[str]:
    """The topics the principal may DESCRIBE (Metadata for all topics, OffsetFetch)."""
    if ctx.broker.authorizer is None:
        return list(names)
    return [name for name in names if allowed(ctx, DESCRIBE, TOPIC, name, log_denied=False)]


def hidden_topics(ctx: RequestContext, names: Iterable[str]) -> set[str]:
    """Metadata for all topics lists only those the principal may DESCRIBE."""
    if ctx.broker.authorizer is None:
        return set()
    return {name for name in names if not allowed(ctx, DESCRIBE, TOPIC, name, log_denied=False)}


def metadata_denials(ctx: RequestContext, wanted: Any, allow_auto_create: bool) -> Denials:
    """Metadata for named topics: DESCRIBE on each; creating a missing one needs CREATE
    on the cluster or the topic."""
    if ctx.broker.authorizer is None:
        return {}
    names = [topic.name for topic in wanted if topic.name is not None]
    denied = denied_topics(ctx, DESCRIBE, names)
    missing = [n for n in names if n not in denied and n not in ctx.broker.logs.topics]
    if missing and allow_auto_create and ctx.broker.config["auto.create.topics.enable"]:
        denied.update(create_topic_denials(ctx, missing))
    return denied


def offsets_to_show(ctx: RequestContext, answers: list, all_topics: bool) -> list:
    """OffsetFetch: offsets of topics the principal may not DESCRIBE are left out when
    it asked for every topic, and answer TOPIC_AUTHORIZATION_FAILED when it named them.
    ``answers`` are the coordinator's ((topic, partition), offset, epoch, metadata, code)."""
    if ctx.broker.authorizer is None:
        return answers
    hidden = hidden_topics(ctx, {topic for (topic, _), *_ in answers})
    if not hidden:
        return answers
    if all_topics:
        return [answer for answer in answers if answer[0][0] not in hidden]
    refused = ErrorCode.topic_authorization_failed
    return [
        (answer[0], -1, -1, "", refused) if answer[0][0] in hidden else answer for answer in answers
    ]


def visible_groups(ctx: RequestContext, group_ids: Iterable[str]) -> set[str]:
    """ListGroups: every group for DESCRIBE on the cluster, else those with DESCRIBE."""
    ids = set(group_ids)
    if ctx.broker.authorizer is None or allowed(ctx, DESCRIBE, CLUSTER, CLUSTER_NAME, False):
        return ids
    return {group for group in ids if allowed(ctx, DESCRIBE, GROUP, group, log_denied=False)}


def coordinator_key_denial(ctx: RequestContext, key_type: int, key: str) -> ErrorCode | None:
    """FindCoordinator: DESCRIBE on the group (key type 0) or transactional id (1)."""
    if ctx.broker.authorizer is None:
        return None
    resource = GROUP if key_type == 0 else TRANSACTIONAL_ID
    return None if allowed(ctx, DESCRIBE, resource, key) else DENIED_CODE[resource]


def authorized_operations(
    ctx: RequestContext, resource_type: ResourceType, name: str, wanted: bool, default: int
) -> int:
    """The authorized_operations bit set when the client asked for it."""
    if not wanted:
        return NO_AUTHORIZED_OPERATIONS
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return default
    session = ctx.session
    return authorizer.authorized_operations(
        session.principal, session.client_host, resource_type, name
    )
