"""Kafka/librdkafka-style client settings turned into what a connection needs."""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass

from onceflow.security.protocols import SecurityProtocol
from onceflow.security.tls import client_context

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS_OPTION = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    bootstrap: str
    protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None
    sasl: SaslCredentials | None

    @classmethod
    def from_config(cls, conf: dict[str, str]) -> ClientSecurity:
        bootstrap = conf.get("bootstrap.servers", "").strip()
        if not bootstrap:
            raise ValueError("bootstrap.servers is required")
        try:
            protocol = SecurityProtocol.parse(conf.get("security.protocol", "PLAINTEXT"))
        except ValueError as error:
            raise ValueError(f"security.protocol: {error}") from None
        context = _tls(conf) if protocol.uses_tls else None
        sasl = _sasl(conf) if protocol.uses_sasl else None
        return cls(bootstrap, protocol, context, sasl)


def _tls(conf: dict[str, str]) -> ssl.SSLContext:
    verify = conf.get("enable.ssl.certificate.verification", "true").lower() != "false"
    identification = conf.get("ssl.endpoint.identification.algorithm", "https").lower()
    context = client_context(
        conf.get("ssl.ca.location") or None,
        conf.get("ssl.certificate.location") or None,
        conf.get("ssl.key.location") or None,
        conf.get("ssl.key.password") or None,
        verify_hostname=verify and identification != "none",
    )
    if not verify:
        context.verify_mode = ssl.CERT_NONE
    return context


def _sasl(conf: dict[str, str]) -> SaslCredentials:
    mechanism = (conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "GSSAPI").upper()
    if mechanism not in MECHANISMS:
        raise ValueError(
            f"sasl.mechanism {mechanism} is not supported here (use {', '.join(MECHANISMS)})"
        )
    username, password = conf.get("sasl.username"), conf.get("sasl.password")
    jaas = dict(_JAAS_OPTION.findall(conf.get("sasl.jaas.config", "")))
    username = username or jaas.get("username")
    password = password or jaas.get("password")
    if not username or password is None:
        raise ValueError(f"SASL {mechanism} needs sasl.username and sasl.password")
    return SaslCredentials(mechanism, username, password)
