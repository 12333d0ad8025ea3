"""Delivery guarantees as one setting, named like Kafka Streams' ``processing.guarantee``.

* ``at_most_once`` — commit the consumer offset *before* processing: a crash after the
  commit loses the batch, nothing is ever processed twice.
* ``at_least_once`` — commit *after* processing: a crash before the commit processes the
  batch again (duplicates), nothing is lost.
* ``exactly_once`` — at-least-once delivery made exactly-once in effect by one pattern:

  - ``db_offsets``: offsets stored in the database transaction (effects in a database);
  - ``inbox``: idempotent consumer, event ids in the database transaction;
  - ``kafka_transactions``: consume-transform-produce in Kafka transactions (effects are
    records in Kafka topics, consumers read_committed).

  ``exactly_once_v2`` (Kafka Streams' name) is accepted as an alias.

The unsafe combination — an inbox together with Kafka transactions — is refused (see
``check_combination``).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from enum import StrEnum

from onceflow.configuration_error import ConfigurationError

log = logging.getLogger(__name__)


class ProcessingGuarantee(StrEnum):
    AT_MOST_ONCE = "at_most_once"
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


class Pattern(StrEnum):
    NONE = "none"  # plain at-most/at-least-once
    DB_OFFSETS = "db_offsets"
    INBOX = "inbox"
    KAFKA_TRANSACTIONS = "kafka_transactions"


class CommitTiming(StrEnum):
    BEFORE = "before"  # Kafka offsets committed before processing
    AFTER = "after"  # Kafka offsets committed after processing
    DATABASE = "database"  # offsets committed with the work in the database transaction
    KAFKA_TRANSACTION = "kafka_transaction"  # offsets committed with the outputs


ALIASES = {
    "exactly_once_v2": "exactly_once",
    "exactly-once": "exactly_once",
    "at-least-once": "at_least_once",
    "at-most-once": "at_most_once",
}

UNSAFE_COMBINATION = (
    "an idempotent consumer (inbox) combined with Kafka transactions can LOSE events: the "
    "database commit of the event id is not atomic with the Kafka transaction, so if the "
    "Kafka commit fails after the database commit, the redelivered event is skipped as a "
    "duplicate and its output is never produced (seed article 'Kafka Deduplication "
    "Patterns', appendix). Use kafka_transactions alone, or inbox + outbox."
)


class UnsafeCombinationWarning(UserWarning):
    """The configuration can lose data; it was allowed by an explicit override."""


@dataclass(frozen=True, slots=True)
class Plan:
    guarantee: ProcessingGuarantee
    pattern: Pattern
    inbox: bool
    commit: CommitTiming

    @property
    def uses_kafka_transactions(self) -> bool:
        return self.pattern is Pattern.KAFKA_TRANSACTIONS


def parse_guarantee(value: str | ProcessingGuarantee) -> ProcessingGuarantee:
    text = str(value).strip().lower()
    text = ALIASES.get(text, text)
    try:
        return ProcessingGuarantee(text)
    except ValueError:
        choices = ", ".join(g.value for g in ProcessingGuarantee)
        raise ConfigurationError(
            f"unknown processing_guarantee {value!r}; choose one of {choices}"
        ) from None


def check_combination(pattern: Pattern, inbox: bool, allow_unsafe: bool) -> None:
    """Refuse inbox + Kafka transactions unless explicitly allowed (then warn loudly)."""
    if not (inbox and pattern is Pattern.KAFKA_TRANSACTIONS):
        return
    if not allow_unsafe:
        raise ConfigurationError(
            UNSAFE_COMBINATION + " (override: allow_unsafe_inbox_with_kafka_transactions)"
        )
    message = "UNSAFE CONFIGURATION: " + UNSAFE_COMBINATION
    log.warning("%s\n%s\n%s", "!" * 78, message, "!" * 78)
    warnings.warn(message, UnsafeCombinationWarning, stacklevel=3)


def plan(
    guarantee: str | ProcessingGuarantee,
    pattern: str | Pattern | None = None,
    *,
    inbox: bool = False,
    has_database: bool = False,
    allow_unsafe_inbox_with_kafka_transactions: bool = False,
) -> Plan:
    """Map a guarantee (and an optional pattern) to what the runner must do."""
    chosen = parse_guarantee(guarantee)
    try:
        selected = Pattern(str(pattern)) if pattern is not None else None
    except ValueError:
        choices = ", ".join(p.value for p in Pattern if p is not Pattern.NONE)
        raise ConfigurationError(f"unknown pattern {pattern!r}; choose one of {choices}") from None
    if chosen is not ProcessingGuarantee.EXACTLY_ONCE:
        if selected not in (None, Pattern.NONE):
            raise ConfigurationError(
                f"pattern {selected.value!r} only applies to exactly_once (got {chosen.value})"
            )
        if inbox and chosen is ProcessingGuarantee.AT_MOST_ONCE:
            raise ConfigurationError("an inbox removes duplicates: it needs at_least_once")
        timing = CommitTiming.BEFORE if chosen is ProcessingGuarantee.AT_MOST_ONCE else (
            CommitTiming.AFTER)  # fmt: skip
        if inbox:  # at_least_once + inbox is the inbox pattern
            return Plan(ProcessingGuarantee.EXACTLY_ONCE, Pattern.INBOX, True, CommitTiming.AFTER)
        return Plan(chosen, Pattern.NONE, False, timing)
    if selected in (None, Pattern.NONE):
        selected = Pattern.DB_OFFSETS if has_database else Pattern.KAFKA_TRANSACTIONS
    if selected is Pattern.INBOX:
        inbox = True
    check_combination(selected, inbox, allow_unsafe_inbox_with_kafka_transactions)
    if (inbox or selected in (Pattern.DB_OFFSETS, Pattern.INBOX)) and not has_database:
        raise ConfigurationError(f"pattern {selected.value!r} needs a database_url")
    timing = {
        Pattern.DB_OFFSETS: CommitTiming.DATABASE,
        Pattern.INBOX: CommitTiming.AFTER,
        Pattern.KAFKA_TRANSACTIONS: CommitTiming.KAFKA_TRANSACTION,
    }[selected]
    return Plan(chosen, selected, inbox, timing)
