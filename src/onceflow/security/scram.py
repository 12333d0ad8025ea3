"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them.

The client side comes from ``scramp``. The server side is RFC 5802's few steps over
``hashlib``/``hmac``, because it must accept what Kafka accepts (see
ScramServerExchange). The credential a broker stores is salt, stored key, server key and
iterations, never the password; it is derived from a password or from the salted
password that AlterUserScramCredentials sends.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
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


_NONCE = r"[\x21-\x2b\x2d-\x7e]+"  # printable ASCII but ','
_CLIENT_FIRST = re.compile(
    r"^(?P<gs2>[ny],(?:a=[^,]*)?,)"
    rf"(?P<bare>n=(?P<name>[^,]+),r=(?P<nonce>{_NONCE})(?:,(?P<extensions>.*))?)$"
)
_CLIENT_FINAL = re.compile(
    rf"^(?P<without_proof>c=(?P<binding>[A-Za-z0-9+/=]+),r=(?P<nonce>{_NONCE})(?:,[^,]*)*?)"
    r",p=(?P<proof>[A-Za-z0-9+/=]+)$"
)


def _unescape(saslname: str) -> str:
    if re.search(r"=(?!2C|3D)", saslname):
        raise ScramFailure("'=' in a SCRAM user name must start =2C or =3D")
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramServerExchange:
    """The broker side of one SCRAM exchange (RFC 5802 section 5): client-first in,
    server-first out, then client-final in, server-final out.

    As Kafka does since 3.8.1, the client-final nonce need only end with the combined
    nonce: librdkafka before 2.6 repeats its own nonce in front of it. An unknown user
    gets a made-up credential, so the exchange fails at the proof exactly as a wrong
    password does and nothing tells the two apart.
    """

    def __init__(
        self, mechanism: str, lookup: Callable[[str], ScramCredential | None], secret: bytes
    ) -> None:
        self.mechanism = mechanism
        self.username: str | None = None
        self.complete = False
        self._digest = HASHES[mechanism]
        self._lookup = lookup
        self._secret = secret
        self._step = 0
        self._gs2 = ""
        self._auth_prefix = ""  # client-first-bare "," server-first
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def respond(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramFailure("SCRAM message is not UTF-8") from None
        self._step += 1
        if self._step == 1:
            return self._server_first(text).encode()
        if self._step == 2:
            return self._server_final(text).encode()
        raise ScramFailure("SCRAM message after the exchange completed")

    def _server_first(self, text: str) -> str:
        match = _CLIENT_FIRST.match(text)
        if match is None:
            raise ScramFailure("malformed SCRAM client-first message")
        self.username = _unescape(match["name"])
        if match["gs2"] not in ("n,,", "y,,", f"n,a={match['name']},", f"y,a={match['name']},"):
            raise ScramFailure("SCRAM authorization id differs from the user name")
        extensions = dict(
            item.partition("=")[::2] for item in (match["extensions"] or "").split(",") if item
        )
        if extensions.get("tokenauth") == "true":
            raise ScramFailure("delegation tokens are not supported")
        credential = self._lookup(self.username)
        if credential is None:
            salt = hmac.new(self._secret, self.username.encode(), hashlib.sha256).digest()
            credential = credential_from_salted(
                self.mechanism, salt, secrets.token_bytes(64), DEFAULT_ITERATIONS
            )
        self._credential = credential
        self._gs2 = match["gs2"]
        self._nonce = match["nonce"] + secrets.token_hex(16)
        server_first = (
            f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
            f"i={credential.iterations}"
        )
        self._auth_prefix = f"{match['bare']},{server_first}"
        return server_first

    def _server_final(self, text: str) -> str:
        match = _CLIENT_FINAL.match(text)
        if match is None:
            raise ScramFailure("malformed SCRAM client-final message")
        if not match["nonce"].endswith(self._nonce):
            raise ScramFailure("SCRAM client-final nonce does not match")
        if _b64decode(match["binding"]) != self._gs2.encode():
            raise ScramFailure("SCRAM channel binding does not match the GS2 header")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._auth_prefix},{match['without_proof']}".encode()
        signature = hmac.new(credential.stored_key, auth_message, self._digest).digest()
        proof = _b64decode(match["proof"])
        if len(proof) != len(signature):
            raise ScramFailure("SCRAM proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self._digest(client_key).digest(), credential.stored_key):
            raise ScramFailure("SCRAM proof does not match (wrong password or unknown user)")
        self.complete = True
        server_signature = hmac.new(credential.server_key, auth_message, self._digest).digest()
        return "v=" + base64.b64encode(server_signature).decode()


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ScramFailure("bad base64 in a SCRAM message") from None


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
