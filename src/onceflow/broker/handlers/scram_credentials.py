"""AlterUserScramCredentials v0 (API 51) and DescribeUserScramCredentials v0 (API 50), as
Kafka's controller answers them. Upsertions carry the salted password; the broker keeps only the
stored and server keys derived from it (broker/security/credential_store.py)."""

from __future__ import annotations

from typing import Any

from onceflow.broker.context import RequestContext
from onceflow.broker.registry import handles
from onceflow.broker.security import rules
from onceflow.protocol.codec import NO_THROTTLE, build
from onceflow.protocol.errors import NO_ERROR, ErrorCode, KafkaError
from onceflow.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_CODES,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)

TWICE = "A user credential cannot be altered twice in the same request"


def _check_name_and_mechanism(name: str, mechanism: int) -> str:
    if not name:
        raise KafkaError(ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism not in MECHANISM_NAMES:
        raise KafkaError(ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return MECHANISM_NAMES[mechanism]


@handles(51, 0, 0)
async def alter_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    cls, result_cls = ctx.response_classes("results")
    store = ctx.broker.scram_credentials
    users = [item.name for item in (*request.deletions, *request.upsertions)]
    try:
        rules.require(ctx, rules.ALTER, rules.CLUSTER)
    except KafkaError as error:
        return build(
            cls,
            throttle_time=NO_THROTTLE,
            results=tuple(
                result_cls(user=user, error_code=error.code, error_message=None)
                for user in dict.fromkeys(users)
            ),
        )
    errors: dict[str, KafkaError] = {}
    deletions: dict[str, str] = {}
    upserts: dict[str, tuple[str, ScramCredential]] = {}
    for deletion in request.deletions:
        name = deletion.name
        if name in errors:
            continue
        try:
            if name in deletions:
                raise KafkaError(ErrorCode.duplicate_resource, TWICE)
            mechanism = _check_name_and_mechanism(name, deletion.mechanism)
            if store.get(name, mechanism) is None:
                raise KafkaError(
                    ErrorCode.resource_not_found,
                    "Attempt to delete a user credential that does not exist",
                )
            deletions[name] = mechanism
        except KafkaError as error:
            deletions.pop(name, None)
            errors[name] = error
    for upsertion in request.upsertions:
        name = upsertion.name
        if name in errors:
            continue
        try:
            if name in deletions or name in upserts:
                raise KafkaError(ErrorCode.duplicate_resource, TWICE)
            mechanism = _check_name_and_mechanism(name, upsertion.mechanism)
            if upsertion.iterations < MIN_ITERATIONS:
                raise KafkaError(ErrorCode.unacceptable_credential, "Too few iterations")
            if upsertion.iterations > MAX_ITERATIONS:
                raise KafkaError(ErrorCode.unacceptable_credential, "Too many iterations")
            upserts[name] = (
                mechanism,
                credential_from_salted(
                    mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
                ),
            )
        except KafkaError as error:
            deletions.pop(name, None)
            upserts.pop(name, None)
            errors[name] = error
    if deletions or upserts:
        store.apply(
            [(name, mechanism, credential) for name, (mechanism, credential) in upserts.items()],
            list(deletions.items()),
        )
    results = [result_cls(user=name, **NO_ERROR) for name in (*deletions, *upserts)]
    results += [
        result_cls(user=name, error_code=error.code, error_message=error.message)
        for name, error in errors.items()
    ]
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(results))


@handles(50, 0, 0)
async def describe_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    cls, result_cls, info_cls = ctx.response_classes("results", "credential_infos")
    rules.require(ctx, rules.DESCRIBE, rules.CLUSTER)
    known = ctx.broker.scram_credentials.users()
    wanted = sorted(known) if not request.users else [user.name for user in request.users]
    results = []
    for name in dict.fromkeys(wanted):
        code, message, infos = ErrorCode.none, None, ()
        if wanted.count(name) > 1:
            code = ErrorCode.duplicate_resource
            message = (
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {name}"
            )
        elif name not in known:
            code = ErrorCode.resource_not_found
            message = f"Attempt to describe a user credential that does not exist: {name}"
        else:
            infos = tuple(
                info_cls(mechanism=MECHANISM_CODES[mechanism], iterations=credential.iterations)
                for mechanism, credential in sorted(known[name].items())
            )
        results.append(
            result_cls(user=name, error_code=code, error_message=message, credential_infos=infos)
        )
    return build(cls, throttle_time=NO_THROTTLE, **NO_ERROR, results=tuple(results))
