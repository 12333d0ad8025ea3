"""CreateAcls v0-3 (API 30), DescribeAcls v0-3 (API 29), DeleteAcls v0-3 (API 31): the ACL store
behind the authorizer. Version 0 has no pattern type: its ACLs and filters are LITERAL.

CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE; without an
authorizer (``authorizer.class.name`` empty) all three answer SECURITY_DISABLED.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any, TypeVar

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.broker.security.acl_model import (
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from onceflow.protocol.codec import NO_THROTTLE, build
from onceflow.protocol.errors import NO_ERROR, ErrorCode, KafkaError

Acl = TypeVar("Acl", AclBinding, AclFilter)
DISABLED = "No Authorizer is configured (authorizer.class.name)."
LITERAL = PatternType.LITERAL


def _acl_store(ctx: RequestContext, operation: Operation) -> Any:
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        raise KafkaError(ErrorCode.security_disabled, DISABLED)
    rules.require(ctx, operation, rules.CLUSTER)
    return authorizer.acls


def _enum(kind: type, value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN


# Where a request entry holds an ACL's resource type, name, pattern type, principal and host:
# a creation names them plainly, a filter (DescribeAcls, DeleteAcls) with "_filter".
CREATION_FIELDS = ("resource_type", "resource_name", "resource_pattern_type", "principal", "host")
FILTER_FIELDS = (
    "resource_type_filter",
    "resource_name_filter",
    "pattern_type_filter",
    "principal_filter",
    "host_filter",
)


def _from_request(kind: type[Acl], entry: Any, fields: tuple[str, ...]) -> Acl:
    resource_type, resource_name, pattern_type, principal, host = (
        getattr(entry, name, LITERAL)
        for name in fields  # v0 has no pattern type
    )
    return kind(
        resource_type=_enum(ResourceType, resource_type),
        resource_name=resource_name,
        pattern_type=_enum(PatternType, pattern_type),
        principal=principal,
        host=host,
        operation=_enum(Operation, entry.operation),
        permission=_enum(Permission, entry.permission_type),
    )


def _filter(entry: Any) -> AclFilter:
    return _from_request(AclFilter, entry, FILTER_FIELDS)


def _entry_fields(acl: AclBinding) -> dict[str, Any]:
    """The parts of an ACL that response entries hold beside its resource."""
    return {
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation,
        "permission_type": acl.permission,
    }


@handles(30, 0, 3)
async def create_acls(ctx: RequestContext, request: Any) -> Any:
    cls, result_cls = ctx.response_classes("results")
    try:
        store = _acl_store(ctx, Operation.ALTER)
    except KafkaError as error:
        failed = result_cls(error_code=error.code, error_message=error.message)
        return build(cls, throttle_time=NO_THROTTLE, results=(failed,) * len(request.creations))
    results, valid = [], []
    for creation in request.creations:
        binding = _from_request(AclBinding, creation, CREATION_FIELDS)
        try:
            binding.validate()
        except InvalidAcl as error:
            results.append(
                result_cls(error_code=ErrorCode.invalid_request, error_message=str(error))
            )
            continue
        valid.append(binding)
        results.append(result_cls(**NO_ERROR))
    store.add(valid)
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))


def _resource_key(acl: AclBinding) -> tuple[int, str, int]:
    return (acl.resource_type, acl.resource_name, acl.pattern_type)


@handles(29, 0, 3)
async def describe_acls(ctx: RequestContext, request: Any) -> Any:
    cls, resource_cls, description_cls = ctx.response_classes("resources", "acls")
    try:
        store = _acl_store(ctx, Operation.DESCRIBE)
        wanted = _filter(request)
        wanted.validate()
    except (KafkaError, InvalidAcl) as error:
        code = error.code if isinstance(error, KafkaError) else ErrorCode.invalid_request
        message = error.message if isinstance(error, KafkaError) else str(error)
        return build(
            cls, throttle_time=NO_THROTTLE, error_code=code, error_message=message, resources=()
        )
    matching = sorted((acl for acl in store.all() if wanted.matches(acl)), key=_resource_key)
    resources = tuple(
        build(
            resource_cls,
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern_type,
            acls=tuple(description_cls(**_entry_fields(acl)) for acl in acls),
        )
        for (resource_type, name, pattern_type), acls in groupby(matching, key=_resource_key)
    )
    return build(cls, throttle_time=NO_THROTTLE, **NO_ERROR, resources=resources)


@handles(31, 0, 3)
async def delete_acls(ctx: RequestContext, request: Any) -> Any:
    cls, result_cls, matching_cls = ctx.response_classes("filter_results", "matching_acls")
    try:
        store = _acl_store(ctx, Operation.ALTER)
    except KafkaError as error:
        failed = result_cls(error_code=error.code, error_message=error.message, matching_acls=())
        return build(
            cls, throttle_time=NO_THROTTLE, filter_results=(failed,) * len(request.filters)
        )
    filters: list[AclFilter | None] = []
    for entry in request.filters:
        acl_filter = _filter(entry)
        try:
            acl_filter.validate()
            filters.append(acl_filter)
        except InvalidAcl:
            filters.append(None)
    deleted = iter(store.remove([f for f in filters if f is not None]))
    results = []
    for acl_filter in filters:
        if acl_filter is None:
            results.append(
                result_cls(
                    error_code=ErrorCode.invalid_request,
                    error_message="the filter has an unknown resource, pattern, operation or "
                    "permission type",
                    matching_acls=(),
                )
            )
            continue
        results.append(
            result_cls(
                **NO_ERROR,
                matching_acls=tuple(
                    build(
                        matching_cls,
                        **NO_ERROR,
                        resource_type=acl.resource_type,
                        resource_name=acl.resource_name,
                        pattern_type=acl.pattern_type,
                        **_entry_fields(acl),
                    )
                    for acl in next(deleted)
                ),
            )
        )
    return build(cls, throttle_time=NO_THROTTLE, filter_results=tuple(results))
