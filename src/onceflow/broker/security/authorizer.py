"""Kafka's StandardAuthorizer rules over the ACL store.

Super users may do anything. Otherwise the ACLs whose resource pattern covers the
resource decide: a matching DENY wins over any ALLOW; a matching ALLOW allows; if no ACL
covers the resource at all, ``allow.everyone.if.no.acl.found`` decides; else denied.
An ACL matches when its principal is the client's or ``User:*``, its host is the
client's address or ``*``, and its operation is the one asked for or ALL (an ALLOW of
READ, WRITE, DELETE or ALTER also allows DESCRIBE; ALTER_CONFIGS allows DESCRIBE_CONFIGS).
"""

from __future__ import annotations

import logging

from onceflow.broker.security.acl_model import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    RESOURCE_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from onceflow.broker.security.acl_store import AclStore

log = logging.getLogger(__name__)

# Names Kafka users put in authorizer.class.name; onceflow's authorizer follows their rules.
AUTHORIZER_NAMES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "onceflow",
)
CACHE_LIMIT = 100_000

Key = tuple[str, str, Operation, ResourceType, str]


class Authorizer:
    def __init__(self, acls: AclStore, super_users: set[str], allow_if_no_acl: bool) -> None:
        self.acls = acls
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._cache: dict[Key, bool] = {}
        self._cache_version = -1

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        log_denied: bool = True,
    ) -> bool:
        if self._cache_version != self.acls.version or len(self._cache) > CACHE_LIMIT:
            self._cache.clear()
            self._cache_version = self.acls.version
        key = (principal, host, operation, resource_type, name)
        allowed = self._cache.get(key)
        if allowed is None:
            allowed = self._cache[key] = self._decide(key)
        if not allowed and log_denied:
            log.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
                principal,
                operation.name,
                host,
                resource_type.name,
                name,
            )
        return allowed

    def _decide(self, key: Key) -> bool:
        principal, host, operation, resource_type, name = key
        if principal in self.super_users:
            return True
        covering = [
            acl for acl in self.acls.of_type(resource_type) if acl.applies_to(resource_type, name)
        ]
        if not covering:
            return self.allow_if_no_acl
        allowed = False
        for acl in covering:
            result = _result(acl, principal, host, operation)
            if result is Permission.DENY:
                return False
            if result is Permission.ALLOW:
                allowed = True
        return allowed

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type allows ``operation`` (Kafka's
        authorizeByResourceType, as used for idempotent producers): an ALLOW that is not
        cancelled by a DENY on every resource (the literal ``*``)."""
        if principal in self.super_users:
            return True
        acls = self.acls.of_type(resource_type)
        for acl in acls:
            if (
                acl.resource_name == WILDCARD
                and acl.pattern_type == PatternType.LITERAL
                and _result(acl, principal, host, operation) is Permission.DENY
            ):
                return False
        if any(_result(acl, principal, host, operation) is Permission.ALLOW for acl in acls):
            return True
        return not acls and self.allow_if_no_acl

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The bit set of operations allowed on the resource (authorized_operations)."""
        bits = 0
        for operation in RESOURCE_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name, log_denied=False):
                bits |= 1 << operation
        return bits


def _result(acl: AclBinding, principal: str, host: str, operation: Operation) -> Permission | None:
    if acl.principal not in (principal, WILDCARD_PRINCIPAL):
        return None
    if acl.host not in (WILDCARD, host):
        return None
    if acl.operation != Operation.ALL:
        if acl.permission == Permission.ALLOW:
            if operation == Operation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == Operation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation != operation:
                return None
        elif acl.operation != operation:
            return None
    return acl.permission
