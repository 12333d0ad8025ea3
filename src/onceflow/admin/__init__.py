"""Cluster administration for the CLI and for programs: groups, transactions, topics.

Every operation takes a ``ClusterSession`` (an AdminClient on a librdkafka-style config
dict) and raises ``Unreachable`` (no broker answered), ``NotFound`` (unknown group, topic
or transactional id), ``Refused`` (the operation does not apply now) or ``AdminError``.
"""

from onceflow.admin.connect import ClusterSession, client_config, wire_client
from onceflow.admin.errors import AdminError, NotFound, Refused, Unreachable

__all__ = [
    "AdminError",
    "ClusterSession",
    "NotFound",
    "Refused",
    "Unreachable",
    "client_config",
    "wire_client",
]
