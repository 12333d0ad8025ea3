"""The broker side of SASL: which mechanisms, whose credentials, and what a failure costs.

A failed authentication is answered with SASL_AUTHENTICATION_FAILED and one message that
does not say which part was wrong, logged, and the connection is closed. Each failure
from an address within a minute of the previous one doubles the delay before that
answer (from ``connection.failed.authentication.delay.ms``, at most 5 s), which slows
down password guessing from one host without holding up anyone else.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from onceflow.broker.security.credential_store import ScramCredentialStore
from onceflow.security.plain import PlainFailure, parse_plain
from onceflow.security.scram import HASHES, ScramFailure, ScramServerExchange

log = logging.getLogger(__name__)

MAX_FAILURE_DELAY = 5.0
FAILURE_MEMORY_SECONDS = 60.0


class AuthenticationFailed(Exception):
    """Wrong credentials or a broken exchange; the message is for the broker's log."""


class PlainExchange:
    def __init__(self, users: dict[str, str]) -> None:
        self.mechanism = "PLAIN"
        self.username: str | None = None
        self.complete = False
        self._users = users

    def respond(self, message: bytes) -> bytes:
        try:
            username, password = parse_plain(message)
        except PlainFailure as error:
            raise AuthenticationFailed(str(error)) from None
        self.username = username
        expected = self._users.get(username)
        # Compare against something even for unknown users: the time taken tells nothing.
        matches = hmac.compare_digest(
            (expected or secrets.token_hex(16)).encode(), password.encode()
        )
        if expected is None or not matches:
            raise AuthenticationFailed("unknown user or wrong password")
        self.complete = True
        return b""


class ScramExchange:
    def __init__(self, exchange: ScramServerExchange) -> None:
        self._exchange = exchange
        self.mechanism = exchange.mechanism

    @property
    def username(self) -> str | None:
        return self._exchange.username

    @property
    def complete(self) -> bool:
        return self._exchange.complete

    def respond(self, message: bytes) -> bytes:
        try:
            return self._exchange.respond(message)
        except ScramFailure as error:
            raise AuthenticationFailed(str(error)) from None


@dataclass
class FailureThrottle:
    base_delay: float
    monotonic: Callable[[], float] = time.monotonic
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict)

    def delay_after_failure(self, host: str) -> float:
        now = self.monotonic()
        count, last = self._failures.get(host, (0, 0.0))
        count = count + 1 if now - last < FAILURE_MEMORY_SECONDS else 1
        self._failures[host] = (count, now)
        if len(self._failures) > 10_000:  # forget the oldest half rather than grow
            for stale in sorted(self._failures, key=lambda h: self._failures[h][1])[:5_000]:
                del self._failures[stale]
        if self.base_delay <= 0:
            return 0.0
        return min(self.base_delay * 2 ** (count - 1), MAX_FAILURE_DELAY)


class SaslServer:
    """Everything the SASL handlers need from the broker."""

    def __init__(
        self,
        mechanisms: list[str],
        plain_users: dict[str, str],
        scram_credentials: ScramCredentialStore,
        failure_delay_ms: int,
    ) -> None:
        self.mechanisms = mechanisms
        self.plain_users = plain_users
        self.scram_credentials = scram_credentials
        self.throttle = FailureThrottle(failure_delay_ms / 1000)
        self._secret = secrets.token_bytes(32)

    def start(self, mechanism: str) -> PlainExchange | ScramExchange:
        if mechanism == "PLAIN":
            return PlainExchange(self.plain_users)
        assert mechanism in HASHES
        return ScramExchange(
            ScramServerExchange(
                mechanism,
                lambda user: self.scram_credentials.get(user, mechanism),
                self._secret,
            )
        )
