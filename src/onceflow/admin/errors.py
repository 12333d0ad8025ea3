"""What an admin operation can fail with, by what the caller should do about it."""

from __future__ import annotations


class AdminError(RuntimeError):
    """The operation could not be done or checked (the cluster answered with an error)."""


class Unreachable(AdminError):
    """No broker of the cluster answered, or every one refused the connection."""


class AuthenticationFailed(Unreachable):
    """The connection was refused at TLS or SASL: wrong credentials or security.protocol."""


class NotFound(AdminError):
    """The group, topic, partition or transactional id does not exist."""


class Refused(AdminError):
    """The cluster is fine but the operation does not apply (e.g. the group is not empty)."""


class AlreadyExists(Refused):
    """What was to be created exists already (Kafka's TOPIC_ALREADY_EXISTS)."""


class NotAuthorized(AdminError):
    """The principal may not do or see this (a Kafka ``*_AUTHORIZATION_FAILED`` error)."""
