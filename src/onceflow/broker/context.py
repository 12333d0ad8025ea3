"""What a handler gets besides the decoded request."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onceflow.broker.security.session import Session
from onceflow.protocol.codec import RequestHeader, element, response_class

if TYPE_CHECKING:
    from onceflow.broker.core import BrokerCore


@dataclass(slots=True)
class RequestContext:
    broker: BrokerCore
    header: RequestHeader
    peer: str
    session: Session

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def advertised_host(self) -> str:
        """This broker's host as the client's listener advertises it."""
        return self.session.advertised_host

    @property
    def advertised_port(self) -> int:
        return self.session.advertised_port

    @property
    def response_class(self) -> type:
        cls = response_class(self.header.api_key, self.header.api_version)
        assert cls is not None
        return cls

    def response_classes(self, *path: str) -> tuple[type, ...]:
        """The response class, then the entity class held by each field along ``path``:
        ``("topics", "partitions")`` gives the response, topic and partition classes."""
        classes = [self.response_class]
        for field_name in path:
            classes.append(element(classes[-1], field_name))
        return tuple(classes)


@dataclass(slots=True)
class Deferred:
    """A response that is ready only once ``awaitable`` completes (for example an fsync).

    The connection keeps reading requests meanwhile but sends responses in order.
    """

    awaitable: Awaitable[Any]


NO_RESPONSE = object()  # acks=0 produce: the client expects nothing back
