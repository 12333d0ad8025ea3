"""Kafka's four security protocols: what each puts on a connection."""

from __future__ import annotations

import enum


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @classmethod
    def parse(cls, text: str) -> SecurityProtocol:
        try:
            return cls(text.strip().upper())
        except ValueError:
            names = ", ".join(protocol.value for protocol in cls)
            raise ValueError(f"unknown security protocol {text!r} (one of {names})") from None
