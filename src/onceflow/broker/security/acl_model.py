"""ACL bindings and filters with Kafka's codes and matching rules."""

from __future__ import annotations

import enum
from dataclasses import dataclass

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# An ALLOW of these operations also allows DESCRIBE (or DESCRIBE_CONFIGS); DENY is exact.
IMPLIES_DESCRIBE = frozenset(
    {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})

# The operations Kafka defines for each resource type (authorized_operations bit sets).
RESOURCE_OPERATIONS = {
    ResourceType.TOPIC: (
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE),
    ResourceType.CLUSTER: (
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}


class InvalidAcl(ValueError):
    """An ACL binding Kafka would refuse to create."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def validate(self) -> None:
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAcl(f"invalid resource type {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"invalid pattern type {self.pattern_type.name}")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise InvalidAcl(f"invalid operation {self.operation.name}")
        if self.permission in (Permission.UNKNOWN, Permission.ANY):
            raise InvalidAcl(f"invalid permission type {self.permission.name}")
        if not self.resource_name:
            raise InvalidAcl("resource name must not be empty")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl(f"the cluster resource is named {CLUSTER_NAME}")
        kind, separator, name = self.principal.partition(":")
        if not separator or not kind or not name:
            raise InvalidAcl(f"invalid principal {self.principal!r} (expected User:NAME)")
        if not self.host:
            raise InvalidAcl("host must not be empty (* for any host)")

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL's resource pattern covers the resource ``name``."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A filter as DescribeAcls and DeleteAcls send it: None fields match anything."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def validate(self) -> None:
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            raise InvalidAcl("the filter has an unknown resource or pattern type")
        if self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            raise InvalidAcl("the filter has an unknown operation or permission type")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation != Operation.ANY and acl.operation != self.operation:
            return False
        return self.permission == Permission.ANY or acl.permission == self.permission

    def _matches_pattern(self, acl: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            # Every ACL that would apply to the resource ``name``.
            if name is None:
                return True
            if acl.pattern_type == PatternType.PREFIXED:
                return name.startswith(acl.resource_name)
            return acl.resource_name in (name, WILDCARD)
        if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
            return False
        return name is None or acl.resource_name == name
