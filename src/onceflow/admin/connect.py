"""Clients for a cluster described by one librdkafka-style config dict.

Every admin operation (and the CLI) builds its clients here from the same dict:
``bootstrap.servers`` (one or several ``HOST:PORT``), ``security.protocol``, ``ssl.*``,
``sasl.*`` and any other librdkafka setting. ``ClusterSession`` waits for admin results
while watching librdkafka's error events, so an unreachable cluster is reported as soon
as every bootstrap broker has failed instead of after the request timeout.
"""

from __future__ import annotations

import concurrent.futures
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from onceflow.admin.errors import (
    AdminError,
    AlreadyExists,
    AuthenticationFailed,
    NotAuthorized,
    NotFound,
    Refused,
    Unreachable,
)
from onceflow.admin.listener_probe import expected_security
from onceflow.protocol.client import AuthenticationError, WireClient

QUIET = {"log_level": 0}  # librdkafka logs nothing unless asked (--debug)
NOT_FOUND_ERRORS = {
    "GROUP_ID_NOT_FOUND",
    "UNKNOWN_TOPIC_OR_PART",
    "UNKNOWN_TOPIC_ID",
    "TRANSACTIONAL_ID_NOT_FOUND",
}
REFUSED_ERRORS = {"NON_EMPTY_GROUP", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS"}
AUTHENTICATION_ERRORS = {"_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED"}
UNREACHABLE_ERRORS = {"_ALL_BROKERS_DOWN", "_TRANSPORT", "_RESOLVE", "_TIMED_OUT"}


def client_config(
    bootstrap: str, settings: Mapping[str, str] | None = None, *, debug: bool = False
) -> dict[str, str]:
    """The config dict: ``bootstrap.servers`` then ``settings``; librdkafka quiet unless debug."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if not debug:
        conf.update(QUIET)
    conf.update(settings or {})
    return conf


def bootstrap_of(conf: Mapping[str, Any]) -> str:
    return str(conf["bootstrap.servers"])


def wire_client(conf: Mapping[str, Any], address: str | None = None) -> WireClient:
    """A raw protocol connection to the cluster of ``conf`` (or to one broker of it).

    The one place a WireClient is made from a config dict.
    """
    if address is not None:
        conf = {**conf, "bootstrap.servers": address}
    try:
        return WireClient.from_config({key: str(value) for key, value in conf.items()})
    except ValueError as error:  # settings that cannot work (e.g. SASL without a password)
        raise AdminError(str(error)) from None
    except (AuthenticationError, ssl.SSLError) as error:
        raise AuthenticationFailed(f"cannot connect to {bootstrap_of(conf)}: {error}") from None
    except OSError as error:  # unreachable: the message says why
        raise Unreachable(str(error)) from None


def describe_kafka_error(error: Any) -> tuple[str, str]:
    """(Kafka error name, readable text) of a KafkaException or KafkaError."""
    inner = error.args[0] if getattr(error, "args", None) else error
    if hasattr(inner, "name") and callable(inner.name):
        return inner.name(), inner.str()
    return "", str(error)


def principal_of(conf: Mapping[str, Any]) -> str:
    """The principal a Kafka broker's default rules give a client with ``conf``.

    SASL: ``User:`` and the user name; TLS with a client certificate: ``User:`` and the
    certificate's subject; otherwise ``User:ANONYMOUS``.
    """
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    if protocol.startswith("SASL"):
        user = conf.get("sasl.username")
        return f"User:{user}" if user else "the SASL principal"
    certificate = conf.get("ssl.certificate.location")
    if protocol == "SSL" and certificate:
        try:
            from cryptography import x509

            with open(str(certificate), "rb") as file:
                leaf = x509.load_pem_x509_certificate(file.read())
            return "User:" + leaf.subject.rfc4514_string()
        except (OSError, ValueError):
            return f"the principal of {certificate}"
    return "User:ANONYMOUS"


def translate(error: BaseException, what: str, principal: str | None = None) -> AdminError:
    """A KafkaException as the AdminError that says what to do about it."""
    name, text = describe_kafka_error(error)
    if name.endswith("_AUTHORIZATION_FAILED"):
        return not_authorized(what, name, principal)
    message = f"{what}: {text}" + (f" ({name})" if name and name not in text else "")
    if name in NOT_FOUND_ERRORS:
        return NotFound(message)
    if name == "TOPIC_ALREADY_EXISTS":
        return AlreadyExists(message)
    if name in REFUSED_ERRORS:
        return Refused(message)
    if name in AUTHENTICATION_ERRORS:
        return AuthenticationFailed(message)
    if name in UNREACHABLE_ERRORS:
        return Unreachable(message)
    return AdminError(message)


def not_authorized(what: str, code: str, principal: str | None) -> NotAuthorized:
    """``describe group g: not authorized (GROUP_AUTHORIZATION_FAILED, principal User:x)``."""
    who = f", principal {principal}" if principal else ""
    return NotAuthorized(f"{what}: not authorized ({code}{who})")


class ClusterSession:
    """An AdminClient on ``conf`` whose waits end as soon as the cluster is known down.

    Each operation asks for the cluster's metadata afresh; inside ``one_view()`` the
    operations of this thread share the first answer (a page of the console asks a dozen
    questions of one moment of a cluster with 10,000 partitions)."""

    def __init__(self, conf: Mapping[str, Any], timeout: float = 15.0) -> None:
        from confluent_kafka.admin import AdminClient

        self.conf = dict(conf)
        self.timeout = timeout
        self._down: list[str] = []
        self._last_transport: str | None = None
        self.admin = AdminClient({**self.conf, "error_cb": self._on_error})
        self._view = threading.local()  # .metadata inside one_view()

    @contextmanager
    def one_view(self) -> Iterator[None]:
        """The metadata this thread reads is read once within the block."""
        self._view.active, self._view.metadata = True, None
        try:
            yield
        finally:
            self._view.active, self._view.metadata = False, None

    @property
    def bootstrap(self) -> str:
        return bootstrap_of(self.conf)

    @property
    def principal(self) -> str:
        return principal_of(self.conf)

    def _on_error(self, error: Any) -> None:
        name = error.name()
        if name == "_AUTHENTICATION":
            reason = _short(error.str())
            failure = f"authentication failed at {self.bootstrap}: {reason}"
            self._down.append(AuthenticationFailed(failure))
        elif name == "_SSL":
            reason = _short(error.str())
            self._down.append(AuthenticationFailed(f"TLS with {self.bootstrap} failed: {reason}"))
        elif name == "_ALL_BROKERS_DOWN":
            self._down.append(self._all_down())
        elif name in ("_TRANSPORT", "_RESOLVE"):
            self._last_transport = error.str()

    def _all_down(self) -> AdminError:
        """Why no broker answered; a silent disconnect is probed for a security mismatch."""
        if self._last_transport is not None:
            return Unreachable(f"cannot reach {self.bootstrap}: {_short(self._last_transport)}")
        mismatch = expected_security(self.conf)
        if mismatch is not None:
            return AuthenticationFailed(f"cannot connect to {self.bootstrap}: {mismatch}")
        return Unreachable(f"cannot reach {self.bootstrap}: every broker is down")

    def _check_down(self) -> None:
        if self._down:
            raise self._down[0]

    def result(self, future: concurrent.futures.Future, what: str) -> Any:
        """The future's result; Unreachable early, AdminError subclasses for Kafka errors."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return future.result(timeout=0.05)
            except concurrent.futures.TimeoutError:
                pass
            except Exception as error:  # KafkaException and friends
                if type(error).__name__ != "KafkaException":
                    raise
                self._check_down()
                raise translate(error, what, self.principal) from None
            self.admin.poll(0)
            self._check_down()
            if time.monotonic() > deadline:
                raise Unreachable(
                    f"{what}: no answer from {self.bootstrap} within {self.timeout:g} s"
                )

    def results(self, futures: Mapping[Any, concurrent.futures.Future], what: str) -> dict:
        return {key: self.result(future, what) for key, future in futures.items()}

    def check(self) -> None:
        """Raise Unreachable unless the cluster answers a DescribeCluster/Metadata request."""
        self.result(self.admin.describe_cluster(request_timeout=self.timeout), "describe cluster")

    def list_topics(self) -> Any:
        """Cluster metadata of every topic (asking for one could auto-create it)."""
        shared = getattr(self._view, "active", False)
        if shared and self._view.metadata is not None:
            return self._view.metadata
        self.check()
        try:
            metadata = self.admin.list_topics(timeout=self.timeout)
        except Exception as error:
            raise translate(error, "metadata", self.principal) from None
        if shared:
            self._view.metadata = metadata
        return metadata

    def require_topics(self, names: list[str]) -> None:
        """NotFound for a topic that does not exist, NotAuthorized for one the principal
        may not describe (Metadata for just these names, never creating them)."""
        from confluent_kafka import TopicCollection

        if not names:
            return
        futures = self.admin.describe_topics(
            TopicCollection(list(names)), request_timeout=self.timeout
        )
        for name, future in futures.items():
            try:
                self.result(future, f"describe topic {name}")
            except NotFound:
                raise NotFound(f"topic {name!r} does not exist") from None

    def require_visibility(self, what: str) -> None:
        """Called when a listing came back empty: NotAuthorized if the principal may not
        describe the cluster (Kafka's authorizer then shows it only what its ACLs allow,
        so an empty answer says nothing about the cluster)."""
        from confluent_kafka.admin import AclOperation

        future = self.admin.describe_cluster(
            include_authorized_operations=True, request_timeout=self.timeout
        )
        operations = self.result(future, "describe cluster").authorized_operations or []
        if AclOperation.DESCRIBE in operations or AclOperation.ALL in operations:
            return
        raise NotAuthorized(
            f"{what}: nothing is visible to principal {self.principal}: it may not describe "
            "the cluster (no DESCRIBE ACL), so it sees only what its own ACLs allow, and "
            "none of that exists; connect as another principal (--command-config) or "
            "grant ACLs (onceflow acls create)"
        )

    def wire(self, address: str | None = None) -> WireClient:
        return wire_client(self.conf, address)


def _short(reason: str) -> str:
    """librdkafka's "HOST/bootstrap: Connect to ... failed: X (after 0ms ...)" as "X"."""
    text = reason.split(": ", 1)[-1] if "/bootstrap: " in reason else reason
    return text.split(" (after ")[0]
