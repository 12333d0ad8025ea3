"""A small synchronous Kafka protocol client built on kio.

Used where librdkafka exposes no API (transaction admin: ListTransactions,
DescribeTransactions, DescribeProducers) and by tests that need exact requests. It speaks
every security protocol (TLS, SASL PLAIN and SCRAM) and takes a bootstrap list of
several hosts; ``WireClient.from_config`` takes the same settings as librdkafka.
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from onceflow.protocol.client_config import ClientSecurity, SaslCredentials
from onceflow.protocol.codec import build, request_class, response_class
from onceflow.protocol.errors import ErrorCode
from onceflow.security.plain import plain_message
from onceflow.security.scram import ScramClientExchange

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


class AuthenticationError(ConnectionError):
    """The broker refused the SASL mechanism or the credentials."""


class WireClient:
    """One connection to one broker; ``request`` sends a kio request and decodes the reply.

    ``bootstrap`` may list several ``host:port`` (comma-separated, optionally
    ``PROTOCOL://host:port``); the first that accepts the connection is used.
    """

    def __init__(
        self,
        bootstrap: str,
        timeout: float = 10.0,
        *,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
        client_id: str = "onceflow-wire",
    ) -> None:
        self.client_id = client_id
        self.correlation_id = 0
        self.address = ""
        self.sock = self._connect(bootstrap, timeout, ssl_context)
        if sasl is not None:
            try:
                self._authenticate(sasl)
            except BaseException:
                self.close()
                raise

    @classmethod
    def from_config(cls, conf: dict[str, str], timeout: float = 10.0) -> WireClient:
        """Connect with Kafka/librdkafka-style settings: ``bootstrap.servers``,
        ``security.protocol``, ``ssl.ca.location``, ``ssl.certificate.location``,
        ``ssl.key.location``, ``ssl.key.password``, ``sasl.mechanism`` (or
        ``sasl.mechanisms``), ``sasl.username``, ``sasl.password``; settings for other
        clients in the same dictionary are ignored. ValueError for settings that
        cannot work together."""
        security = ClientSecurity.from_config(conf)
        return cls(
            security.bootstrap,
            timeout,
            ssl_context=security.ssl_context,
            sasl=security.sasl,
            client_id=conf.get("client.id", "onceflow-wire"),
        )

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connecting ---------------------------------------------------------------------

    def _connect(
        self, bootstrap: str, timeout: float, context: ssl.SSLContext | None
    ) -> socket.socket:
        failures = []
        for host, port in parse_bootstrap(bootstrap):
            try:
                sock = socket.create_connection((host, port), timeout=timeout)
            except OSError as error:
                failures.append(f"{host}:{port}: {error.strerror or error}")
                continue
            if context is not None:
                try:
                    sock = context.wrap_socket(sock, server_hostname=host)
                except (OSError, ssl.SSLError) as error:
                    sock.close()
                    failures.append(f"{host}:{port}: TLS handshake failed: {error}")
                    continue
            self.address = f"{host}:{port}"
            return sock
        raise ConnectionError(f"cannot reach {bootstrap}: " + "; ".join(failures))

    def _authenticate(self, sasl: SaslCredentials) -> None:
        handshake = self.request(request_class(SASL_HANDSHAKE_KEY, 1), mechanism=sasl.mechanism)
        if handshake.error_code != ErrorCode.none:
            raise AuthenticationError(
                f"{self.address}: SASL mechanism {sasl.mechanism} is not enabled "
                f"(the broker offers {', '.join(handshake.mechanisms) or 'none'})"
            )
        if sasl.mechanism == "PLAIN":
            self._sasl_step(plain_message(sasl.username, sasl.password))
            return
        scram = ScramClientExchange(sasl.mechanism, sasl.username, sasl.password)
        server_first = self._sasl_step(scram.first())
        server_final = self._sasl_step(scram.final(server_first))
        try:
            scram.verify(server_final)
        except Exception as error:
            raise AuthenticationError(
                f"{self.address}: the broker's SCRAM signature is wrong: {error}"
            ) from None

    def _sasl_step(self, token: bytes) -> bytes:
        try:
            response = self.request(request_class(SASL_AUTHENTICATE_KEY, 2), auth_bytes=token)
        except ConnectionError:
            raise AuthenticationError(f"{self.address}: connection closed during SASL") from None
        if response.error_code != ErrorCode.none:
            raise AuthenticationError(
                f"{self.address}: {response.error_message or response.error_code.name}"
            )
        return response.auth_bytes

    # -- frames and requests ------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def _read_exactly(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            data += chunk
        return data

    def send(self, request: Any, header_version: int | None = None) -> int:
        """Send a kio request entity without waiting for its answer (``read_frame`` reads
        answers in order); its correlation id. ``header_version`` puts another version in
        the request header than the entity's own (to send what a broker must refuse)."""
        cls = type(request)
        self.correlation_id += 1
        header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
        buffer = io.BytesIO()
        entity_writer(header_cls)(
            buffer,
            header_cls(
                request_api_key=i16(cls.__api_key__),
                request_api_version=i16(
                    cls.__version__ if header_version is None else header_version
                ),
                correlation_id=i32(self.correlation_id),
                client_id=self.client_id,
            ),
        )
        entity_writer(cls)(buffer, request)
        payload = buffer.getvalue()
        self.send_raw(struct.pack(">i", len(payload)) + payload)
        return self.correlation_id

    def request(self, request: Any, *, decode_as: type | None = None, **fields: Any) -> Any:
        """Send a kio request entity (or its class plus fields); return the decoded response
        (as ``decode_as``, a dataclass shaped like kio's response class, when given)."""
        if isinstance(request, type):
            request = build(request, **fields)
        cls = type(request)
        self.send(request)
        frame = self.read_frame()
        response_cls = decode_as or response_class(cls.__api_key__, cls.__version__)
        correlation_id = struct.unpack_from(">i", frame, 0)[0]
        assert correlation_id == self.correlation_id
        offset = 4
        if response_cls.__flexible__ and cls.__api_key__ != 18:
            offset += 1  # empty tagged fields of response header v1
        response, _ = entity_reader(response_cls)(frame, offset)
        return response


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """(host, port) of each entry of a bootstrap list: ``a:9092,b:9093``,
    ``SASL_SSL://a:9093``, ``[::1]:9092``."""
    addresses = []
    for entry in bootstrap.split(","):
        entry = entry.strip()
        if not entry:
            continue
        address = entry.split("://", 1)[-1]
        host, colon, port = address.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError(f"bootstrap server {entry!r} is not HOST:PORT")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ValueError("no bootstrap server given")
    return addresses
