"""Exactly-once patterns for Python consumers (see docs/patterns.md).

* ``offsets`` — offsets stored in the database transaction (Karafka's pattern);
* ``inbox`` — idempotent consumer;
* ``outbox`` + ``relay`` — transactional outbox and its publisher (``onceflow relay``);
* ``transactional`` — consume-transform-produce in Kafka transactions;
* ``guarantees`` — ``processing_guarantee`` = at_most_once | at_least_once | exactly_once;
* ``runner`` — one consumer loop tying them together.

They store their state with ``onceflow.db`` (SQLite / PostgreSQL, re-exported here) and
reach ``onceflow.crash_points`` between their steps, for the chaos harness.
"""

from onceflow.configuration_error import ConfigurationError
from onceflow.crash_points import CrashPoints
from onceflow.db import (
    Database,
    DatabaseError,
    LockTimeout,
    Transaction,
    connect,
)
from onceflow.patterns.guarantees import Pattern, ProcessingGuarantee, UnsafeCombinationWarning
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.offsets import OffsetStore
from onceflow.patterns.outbox import Outbox
from onceflow.patterns.records import DecodeError, Record
from onceflow.patterns.relay import Relay, RelayConfig
from onceflow.patterns.runner import Context, Runner, RunnerConfig, RunStats

__all__ = [
    "ConfigurationError",
    "Context",
    "CrashPoints",
    "Database",
    "DatabaseError",
    "DecodeError",
    "Inbox",
    "LockTimeout",
    "OffsetStore",
    "Outbox",
    "Pattern",
    "ProcessingGuarantee",
    "Record",
    "Relay",
    "RelayConfig",
    "RunStats",
    "Runner",
    "RunnerConfig",
    "Transaction",
    "UnsafeCombinationWarning",
    "connect",
]
