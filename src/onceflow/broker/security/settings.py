"""The broker's security objects, built from its configuration (Kafka's setting names)."""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from pathlib import Path

from onceflow.broker.listeners import Listener, parse_listeners
from onceflow.broker.security.acl_store import AclStore
from onceflow.broker.security.authorizer import AUTHORIZER_NAMES, Authorizer
from onceflow.broker.security.credential_store import ScramCredentialStore
from onceflow.broker.security.plain_users import load_plain_users
from onceflow.broker.security.sasl_server import SaslServer
from onceflow.config import BrokerConfig
from onceflow.security import tls
from onceflow.security.scram import (
    DEFAULT_ITERATIONS,
    HASHES,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    credential_from_password,
    password_matches,
)


class SecuritySettingError(ValueError):
    """A listener or security setting that cannot work; the message says which and why."""


def configured_listeners(
    config: BrokerConfig, host: str, port: int, advertised_host: str | None
) -> list[Listener]:
    """``listeners`` if set, else one PLAINTEXT listener on --host/--port."""
    try:
        if config["listeners"]:
            return parse_listeners(
                config["listeners"],
                config["advertised.listeners"],
                config["listener.security.protocol.map"],
            )
        advertised = f"PLAINTEXT://{_bracketed(advertised_host)}:0" if advertised_host else ""
        plain = f"PLAINTEXT://{_bracketed(host)}:{port}"
        return parse_listeners(plain, advertised or config["advertised.listeners"])
    except ValueError as error:
        raise SecuritySettingError(str(error)) from None


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def server_tls_context(config: BrokerConfig) -> ssl.SSLContext:
    try:
        return tls.server_context(
            config["ssl.keystore.location"],
            config["ssl.key.password"] or None,
            config["ssl.truststore.location"] or None,
            config["ssl.client.auth"],
        )
    except ValueError as error:
        raise SecuritySettingError(str(error)) from None


def sasl_server(config: BrokerConfig, credentials: ScramCredentialStore) -> SaslServer:
    try:
        plain_users = load_plain_users(config["sasl.plain.users.file"])
    except ValueError as error:
        raise SecuritySettingError(str(error)) from None
    return SaslServer(
        [m for m in config["sasl.enabled.mechanisms"].split(",") if m],
        plain_users,
        credentials,
        config["connection.failed.authentication.delay.ms"],
    )


def authorizer(config: BrokerConfig, data_dir: Path) -> Authorizer | None:
    name = config["authorizer.class.name"].strip()
    if not name:
        return None
    if name not in AUTHORIZER_NAMES:
        raise SecuritySettingError(
            f"authorizer.class.name: unknown authorizer {name!r} (use {AUTHORIZER_NAMES[0]})"
        )
    return Authorizer(
        AclStore(data_dir),
        super_users(config["super.users"]),
        config["allow.everyone.if.no.acl.found"],
    )


def super_users(text: str) -> set[str]:
    users = {user.strip() for user in text.split(";") if user.strip()}
    for user in users:
        kind, separator, name = user.partition(":")
        if not separator or not kind or not name:
            raise SecuritySettingError(
                f"super.users: {user!r} is not a principal (User:NAME; separate with ';')"
            )
    return users


def needs(listeners: list[Listener], check: str) -> bool:
    return any(getattr(listener.protocol, check) for listener in listeners)


@dataclass(frozen=True, slots=True)
class ScramUser:
    mechanism: str
    name: str
    password: str
    iterations: int = DEFAULT_ITERATIONS


_ADD_SCRAM = re.compile(r"^\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[(.*)\]\s*$")


def parse_add_scram(text: str) -> ScramUser:
    """``SCRAM-SHA-256=[name=alice,password=alice-secret]`` (``iterations=8192`` optional),
    the syntax of Kafka's ``kafka-storage format --add-scram``."""
    match = _ADD_SCRAM.match(text)
    if match is None:
        raise SecuritySettingError(
            f"--add-scram: expected 'SCRAM-SHA-256=[name=NAME,password=PASSWORD]', got {text!r}"
        )
    mechanism, body = match.groups()
    fields = {}
    for item in body.split(","):
        key, separator, value = item.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if not separator or key.strip() not in ("name", "password", "iterations"):
            raise SecuritySettingError(
                f"--add-scram: unknown entry {item.strip()!r} (name, password, iterations)"
            )
        fields[key.strip()] = value
    if not fields.get("name") or not fields.get("password"):
        raise SecuritySettingError("--add-scram: name and password are both required")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise SecuritySettingError("--add-scram: iterations must be a number") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise SecuritySettingError(
            f"--add-scram: iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS}"
        )
    return ScramUser(mechanism, fields["name"], fields["password"], iterations)


def add_scram_users(store: ScramCredentialStore, users: list[ScramUser]) -> None:
    """Store each user's credential unless the stored one already has that password."""
    upserts = []
    for user in users:
        assert user.mechanism in HASHES
        current = store.get(user.name, user.mechanism)
        if (
            current is not None
            and current.iterations == user.iterations
            and password_matches(user.mechanism, current, user.password)
        ):
            continue
        upserts.append(
            (
                user.name,
                user.mechanism,
                credential_from_password(user.mechanism, user.password, user.iterations),
            )
        )
    if upserts:
        store.apply(upserts, [])
