"""ACLs: list, create and delete them with kafka-acls' vocabulary.

Through confluent-kafka's AdminClient (DescribeAcls, CreateAcls, DeleteAcls), so it works
against onceflow's broker with an authorizer and against any Kafka cluster. Names are
Kafka's: operations ``Read``, ``Write``, ``Describe``, ``DescribeConfigs``...; resource
types ``Topic``, ``Group``, ``TransactionalId``, ``Cluster``; pattern types ``literal``,
``prefixed`` (and, as filters, ``any`` and ``match``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from onceflow.admin.connect import ClusterSession, not_authorized
from onceflow.admin.errors import AdminError

CLUSTER_NAME = "kafka-cluster"  # the one name of the Cluster resource
OPERATIONS = (
    "All",
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
)
PATTERN_TYPES = ("literal", "prefixed", "any", "match")
RESOURCE_TYPES = {"TOPIC": "Topic", "GROUP": "Group", "TRANSACTIONAL_ID": "TransactionalId"}


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource named on the command line: type (librdkafka's name) and name."""

    type: str  # TOPIC, GROUP, TRANSACTIONAL_ID or BROKER (Kafka's Cluster)
    name: str


@dataclass(frozen=True, slots=True)
class Acl:
    principal: str
    host: str
    operation: str  # Kafka's spelling: Read, DescribeConfigs, ...
    permission: str  # Allow or Deny
    resource_type: str  # Topic, Group, TransactionalId, Cluster
    resource_name: str
    pattern_type: str  # literal or prefixed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def operation_enum(name: str) -> Any:
    """Kafka's operation name (any case: Read, describe-configs, DESCRIBE_CONFIGS) as the
    AclOperation."""
    from confluent_kafka.admin import AclOperation

    wanted = name.replace("-", "").replace("_", "").lower()
    for operation in OPERATIONS:
        if operation.lower() == wanted:
            return AclOperation[_snake(operation)]
    raise ValueError(f"unknown operation {name!r} (one of {', '.join(OPERATIONS)})")


def _snake(camel: str) -> str:
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(camel)).upper()


def _camel(snake: str) -> str:
    return "".join(part.title() for part in snake.split("_"))


def _resource_type_name(resource_type: Any) -> str:
    name = resource_type.name
    return "Cluster" if name == "BROKER" else RESOURCE_TYPES.get(name, _camel(name))


def as_acl(binding: Any) -> Acl:
    return Acl(
        principal=binding.principal,
        host=binding.host,
        operation=_camel(binding.operation.name),
        permission=binding.permission_type.name.title(),
        resource_type=_resource_type_name(binding.restype),
        resource_name=binding.name,
        pattern_type=binding.resource_pattern_type.name.lower(),
    )


def bindings(
    resources: Iterable[Resource],
    principals: Iterable[tuple[str, str]],
    hosts: dict[str, list[str]],
    operations: Iterable[str],
    pattern_type: str,
) -> list[Any]:
    """One AclBinding per resource, (permission, principal), host and operation."""
    from confluent_kafka.admin import AclBinding, AclPermissionType, ResourcePatternType

    if pattern_type not in ("literal", "prefixed"):
        raise ValueError("ACLs are created with --resource-pattern-type literal or prefixed")
    pattern = ResourcePatternType[pattern_type.upper()]
    made = []
    for resource in resources:
        for permission, principal in principals:
            for host in hosts[permission]:
                for operation in operations:
                    made.append(
                        AclBinding(
                            _resource_enum(resource.type),
                            resource.name,
                            pattern,
                            principal,
                            host,
                            operation_enum(operation),
                            AclPermissionType[permission.upper()],
                        )
                    )
    return made


def filters(
    resources: Iterable[Resource],
    principals: Iterable[tuple[str, str]],
    operations: Iterable[str],
    pattern_type: str,
) -> list[Any]:
    """AclBindingFilters: every combination given; what is not given matches anything."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    pattern = ResourcePatternType[pattern_type.upper()]
    chosen_resources = list(resources) or [None]
    chosen_principals: list[tuple[str, str] | None] = list(principals) or [None]
    chosen_operations = [operation_enum(o) for o in operations] or [AclOperation.ANY]
    made = []
    for resource in chosen_resources:
        for principal in chosen_principals:
            for operation in chosen_operations:
                made.append(
                    AclBindingFilter(
                        _resource_enum(resource.type) if resource else ResourceType.ANY,
                        resource.name if resource else None,
                        pattern if resource else ResourcePatternType.ANY,
                        principal[1] if principal else None,
                        None,
                        operation,
                        AclPermissionType[principal[0].upper()]
                        if principal
                        else AclPermissionType.ANY,
                    )
                )
    return made


def _resource_enum(name: str) -> Any:
    from confluent_kafka.admin import ResourceType

    return ResourceType[name]


def list_acls(session: ClusterSession, acl_filters: list[Any]) -> list[Acl]:
    """The ACLs matching any of the filters; an empty answer is checked on the wire,
    because librdkafka reports DescribeAcls' error (no authorizer, not authorized) as no
    ACLs at all."""
    found: set[Acl] = set()
    for acl_filter in acl_filters:
        future = session.admin.describe_acls(acl_filter, request_timeout=session.timeout)
        found.update(as_acl(b) for b in session.result(future, "describe ACLs"))
    if not found:
        check_describe_acls(session)
    return sorted(found, key=_order)


def check_describe_acls(session: ClusterSession) -> None:
    """Raise what a DescribeAcls of every ACL answers: NotAuthorized, or AdminError when
    the cluster has no authorizer (SECURITY_DISABLED)."""
    from kio.schema.describe_acls.v1.request import DescribeAclsRequest
    from kio.schema.errors import ErrorCode

    any_value = 1  # Kafka's ANY for resource, pattern, operation and permission types
    with session.wire() as client:
        response = client.request(
            DescribeAclsRequest,
            resource_type_filter=any_value,
            resource_name_filter=None,
            pattern_type_filter=any_value,
            principal_filter=None,
            host_filter=None,
            operation=any_value,
            permission_type=any_value,
        )
    if response.error_code == ErrorCode.none:
        return
    code = ErrorCode(response.error_code).name.upper()
    if code.endswith("_AUTHORIZATION_FAILED"):
        raise not_authorized("describe ACLs", code, session.principal)
    if code == "SECURITY_DISABLED":
        raise AdminError(
            "describe ACLs: the cluster has no authorizer, so ACLs are neither kept nor "
            "enforced (SECURITY_DISABLED; set authorizer.class.name on the brokers)"
        )
    raise AdminError(f"describe ACLs: {code}: {response.error_message or ''}".rstrip(": "))


def create_acls(session: ClusterSession, new: list[Any]) -> list[Acl]:
    futures = session.admin.create_acls(new, request_timeout=session.timeout)
    for binding, future in futures.items():
        session.result(future, f"create ACL {_describe(as_acl(binding))}")
    return sorted((as_acl(b) for b in new), key=_order)


def delete_acls(session: ClusterSession, acl_filters: list[Any]) -> list[Acl]:
    futures = session.admin.delete_acls(acl_filters, request_timeout=session.timeout)
    deleted: set[Acl] = set()
    for future in futures.values():
        deleted.update(as_acl(b) for b in session.result(future, "delete ACLs"))
    return sorted(deleted, key=_order)


def _order(acl: Acl) -> tuple[str, ...]:
    return (acl.resource_type, acl.resource_name, acl.pattern_type, acl.principal, acl.operation)


def _describe(acl: Acl) -> str:
    return (
        f"{acl.permission} {acl.principal} {acl.operation} on {acl.resource_type} "
        f"{acl.resource_name} ({acl.pattern_type}) from {acl.host}"
    )
