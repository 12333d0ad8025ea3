"""One strategy per pattern, behind one interface (``base.Strategy``) the Runner's loop calls.

=====================  ==================================================
pattern                strategy
=====================  ==================================================
at_most_once           ``AtMostOnce``: commit, then the work
at_least_once          ``AtLeastOnce``: the work, then the commit
inbox (+ outbox)       ``InboxConsumer``: event ids claimed with the work
db_offsets (+ outbox)  ``DbOffsets``: offsets stored with the work
kafka_transactions     ``KafkaTransactions``: outputs and offsets in one
                       Kafka transaction
=====================  ==================================================

What they share is composed in, not inherited: the consumer (``runner_consumer``), the
record work (``runner_work``), the outputs (``runner_output``) and the steps in ``base``.
``open_strategy`` creates the pattern's tables and transactional producer and returns its
strategy.
"""

from __future__ import annotations

from onceflow.configuration_error import ConfigurationError
from onceflow.db import Database
from onceflow.patterns.guarantees import CommitTiming, Pattern, Plan
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.offsets import OffsetStore
from onceflow.patterns.outbox import Outbox
from onceflow.patterns.strategies.at_least_once import AtLeastOnce
from onceflow.patterns.strategies.at_most_once import AtMostOnce
from onceflow.patterns.strategies.base import RunnerParts, Strategy
from onceflow.patterns.strategies.db_offsets import DbOffsets
from onceflow.patterns.strategies.inbox_consumer import InboxConsumer
from onceflow.patterns.strategies.kafka_transactions import KafkaTransactions
from onceflow.patterns.transactional import KafkaTransaction

__all__ = [
    "AtLeastOnce",
    "AtMostOnce",
    "DbOffsets",
    "InboxConsumer",
    "KafkaTransactions",
    "RunnerParts",
    "Strategy",
    "open_strategy",
]


def open_strategy(plan: Plan, parts: RunnerParts, db: Database | None) -> Strategy:
    """The plan's strategy, with its tables created (offsets, inbox, outbox) and its
    transactional producer initialized (fencing a previous incarnation)."""
    config = parts.config
    match plan.pattern, db, config.transactional_id:
        case Pattern.DB_OFFSETS, Database(), _:
            offsets = OffsetStore(db, config.group_id, config.offsets_table)
            offsets.create_schema()
            inbox = _open_inbox(parts, db) if plan.inbox else None
            _open_outbox(parts, db)
            return DbOffsets(parts, db, offsets, inbox)
        case Pattern.INBOX, Database(), _:
            inbox = _open_inbox(parts, db)
            _open_outbox(parts, db)
            return InboxConsumer(parts, db, inbox)
        case Pattern.KAFKA_TRANSACTIONS, _, str(transactional_id):
            inbox = _open_inbox(parts, db) if plan.inbox and db is not None else None
            txn = KafkaTransaction(config.bootstrap_servers, transactional_id,
                                   config.producer_config)  # fmt: skip
            parts.output.txn = txn
            return KafkaTransactions(parts, txn, db, inbox)
        case Pattern.NONE, _, _:
            if db is not None:
                _open_outbox(parts, db)
            if plan.commit is CommitTiming.BEFORE:
                return AtMostOnce(parts, db)
            return AtLeastOnce(parts, db)
    # RunnerConfig.validate() refuses these first, with the reasons.
    missing = "transactional_id" if plan.uses_kafka_transactions else "database_url"
    raise ConfigurationError(f"pattern {plan.pattern.value!r} needs a {missing}")


def _open_inbox(parts: RunnerParts, db: Database) -> Inbox:
    inbox = Inbox(db, parts.config.group_id, parts.config.inbox_table)
    inbox.create_schema()
    return inbox


def _open_outbox(parts: RunnerParts, db: Database) -> None:
    """outbox=True: ``ctx.produce`` writes outbox rows in the batch's transaction."""
    if parts.config.outbox:
        outbox = Outbox(db, parts.config.outbox_table)
        outbox.create_schema()
        parts.output.outbox = outbox
