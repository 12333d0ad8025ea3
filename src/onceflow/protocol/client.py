"""A small synchronous Kafka protocol client built on kio.

Used where librdkafka exposes no API (transaction admin: ListTransactions,
DescribeTransactions, DescribeProducers) and by tests that need exact requests.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from onceflow.protocol.codec import build, response_class


class WireClient:
    """One connection to one broker; ``request`` sends a kio request and decodes the reply."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def request(self, request: Any, **fields: Any) -> Any:
        """Send a kio request entity (or its class plus fields); return the decoded response."""
        if isinstance(request, type):
            request = build(request, **fields)
        cls = type(request)
        self.correlation_id += 1
        header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
        buffer = io.BytesIO()
        entity_writer(header_cls)(
            buffer,
            header_cls(
                request_api_key=i16(cls.__api_key__),
                request_api_version=i16(cls.__version__),
                correlation_id=i32(self.correlation_id),
                client_id="wire-test",
            ),
        )
        entity_writer(cls)(buffer, request)
        payload = buffer.getvalue()
        self.send_raw(struct.pack(">i", len(payload)) + payload)
        frame = self.read_frame()
        response_cls = response_class(cls.__api_key__, cls.__version__)
        correlation_id = struct.unpack_from(">i", frame, 0)[0]
        assert correlation_id == self.correlation_id
        offset = 4
        if response_cls.__flexible__ and cls.__api_key__ != 18:
            offset += 1  # empty tagged fields of response header v1
        response, _ = entity_reader(response_cls)(frame, offset)
        return response
