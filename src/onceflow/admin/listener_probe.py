"""Why a listener hung up on a client: it expects TLS, or SASL, and the client did not.

librdkafka reports a plaintext client on a TLS listener (or a client without SASL on a
SASL listener) only as "every broker is down": the broker closes the connection at the
first request. One extra connection tells which: a TLS handshake that succeeds means the
listener speaks TLS; a SaslHandshake answered with a list of mechanisms means it expects
SASL.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from typing import Any

PROBE_TIMEOUT = 2.0


def expected_security(conf: Mapping[str, Any]) -> str | None:
    """What the first bootstrap listener expects that ``conf`` does not give, or None."""
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    address = str(conf.get("bootstrap.servers", "")).split(",")[0].strip()
    address = address.split("://")[-1]
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return None
    if "SSL" not in protocol and _speaks_tls(host.strip("[]"), int(port)):
        wanted = "SASL_SSL" if "SASL" in protocol else "SSL (or SASL_SSL)"
        return f"the listener expects TLS: set security.protocol={wanted}"
    if "SASL" not in protocol:
        mechanisms = _sasl_mechanisms(conf, address)
        if mechanisms:
            wanted = "SASL_SSL" if "SSL" in protocol else "SASL_PLAINTEXT"
            return (
                f"the listener expects SASL ({', '.join(mechanisms)}): set "
                f"security.protocol={wanted}, sasl.mechanism, sasl.username and sasl.password"
            )
    return None


def _speaks_tls(host: str, port: int) -> bool:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), PROBE_TIMEOUT) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


def _sasl_mechanisms(conf: Mapping[str, Any], address: str) -> list[str]:
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    from onceflow.protocol.client import WireClient

    plain = {k: str(v) for k, v in conf.items() if not k.startswith("sasl.")}
    plain["bootstrap.servers"] = address
    try:
        with WireClient.from_config(plain, PROBE_TIMEOUT) as client:
            response = client.request(SaslHandshakeRequest, mechanism="PLAIN")
    except (OSError, ValueError, EOFError):
        return []
    return list(response.mechanisms)
