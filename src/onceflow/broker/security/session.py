"""What the broker knows about the client on one connection."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class Session:
    """The connection's principal (``User:NAME``), the client's address, and whether it
    still has to authenticate with SASL before anything but ApiVersions and SASL."""

    principal: str = ANONYMOUS
    client_host: str = ""
    listener_name: str = "PLAINTEXT"
    advertised_host: str = ""
    advertised_port: int = -1
    authenticating: bool = False
    sasl: Any = None  # the SASL exchange under way (broker.security.sasl_server)
    raw_sasl_tokens: bool = False  # after SaslHandshake v0: tokens without Kafka headers
    close_after_response: bool = False
    # group id -> member id of the group members that spoke on this connection
    # (onceflow.group.leave.on.disconnect ends their sessions when it closes)
    group_members: dict[str, str] = field(default_factory=dict)
