"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them.

The exchanges come from ``scramp``; this module holds what Kafka adds: the credential a
broker stores (salt, stored key, server key, iterations, never the password), derived
either from a password or from the salted password that AlterUserScramCredentials sends.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import scramp

HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
# Kafka's ScramMechanism codes in AlterUserScramCredentials / DescribeUserScramCredentials.
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}
MIN_ITERATIONS = 4096  # Kafka's bounds for a stored credential
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32
MIN_SALT_BYTES = 12  # scramp refuses shorter salts


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def as_auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        return self.salt, self.stored_key, self.server_key, self.iterations


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    name = HASHES[mechanism]().name
    return hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)


def credential_from_salted(
    mechanism: str, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    digest = HASHES[mechanism]
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    return ScramCredential(
        salt=salt,
        stored_key=digest(client_key).digest(),
        server_key=hmac.new(salted, b"Server Key", digest).digest(),
        iterations=iterations,
    )


def credential_from_password(
    mechanism: str,
    password: str,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
    return credential_from_salted(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def password_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    expected = credential_from_password(
        mechanism, password, credential.iterations, credential.salt
    ).stored_key
    return hmac.compare_digest(expected, credential.stored_key)


class ScramFailure(Exception):
    """The SCRAM exchange failed; the message is for the broker's log only."""


class ScramServerExchange:
    """The broker side of one SCRAM exchange: client-first in, server-first out, then
    client-final in, server-final out. ``lookup`` returns a user's credential or None.

    An unknown user gets a made-up credential, so the exchange fails at the proof exactly
    as a wrong password does and nothing tells the two apart.
    """

    def __init__(
        self, mechanism: str, lookup: Callable[[str], ScramCredential | None], secret: bytes
    ) -> None:
        self.mechanism = mechanism
        self.username: str | None = None
        self._lookup = lookup
        self._secret = secret
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._step = 0
        self.complete = False

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        self.username = username
        credential = self._lookup(username)
        if credential is None:
            salt = hmac.new(self._secret, username.encode(), hashlib.sha256).digest()
            credential = credential_from_salted(
                self.mechanism, salt, secrets.token_bytes(64), DEFAULT_ITERATIONS
            )
        return credential.as_auth_info()

    def respond(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramFailure("SCRAM message is not UTF-8") from None
        try:
            if self._step == 0:
                self._step = 1
                self._server.set_client_first(text)
                return self._server.get_server_first().encode()
            if self._step == 1:
                self._step = 2
                self._server.set_client_final(text)
                self.complete = True
                return self._server.get_server_final().encode()
        except scramp.ScramException as error:
            raise ScramFailure(str(error)) from None
        raise ScramFailure("SCRAM message after the exchange completed")


class ScramClientExchange:
    """The client side, for onceflow's own protocol client."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"unknown SCRAM mechanism {mechanism}")
        self._client = scramp.ScramClient([mechanism], username, password)

    def first(self) -> bytes:
        return self._client.get_client_first().encode()

    def final(self, server_first: bytes) -> bytes:
        self._client.set_server_first(server_first.decode())
        return self._client.get_client_final().encode()

    def verify(self, server_final: bytes) -> None:
        self._client.set_server_final(server_final.decode())
