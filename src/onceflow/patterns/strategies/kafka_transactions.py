"""exactly_once + kafka_transactions: consume-transform-produce (transactional.py has the
steps and the producer).

The batches of ``commit_interval_ms`` share one Kafka transaction: begin
(``after_begin``), each batch's outputs produced into it (a database, if any, is written
first, in its own transaction: ``before_db_commit``, ``after_db_commit``)
(``after_produce``), then the consumer positions added (``after_send_offsets``) and the
commit (``after_kafka_commit``). Any failure aborts the whole transaction and rewinds every
batch in it to its first offsets.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException, Message

from onceflow.db import Database, DatabaseError
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.runner_pending import Pending
from onceflow.patterns.runner_work import HandlerFailed
from onceflow.patterns.strategies.base import TP, RunnerParts, handle_in_transaction
from onceflow.patterns.transactional import KafkaTransaction, ProducerFenced, TransactionFailed

log = logging.getLogger("onceflow.patterns.runner")


class KafkaTransactions:
    rewinds_failed_batches = True
    offset_store = None

    def __init__(
        self,
        parts: RunnerParts,
        txn: KafkaTransaction,
        db: Database | None,
        inbox: Inbox | None,
    ) -> None:
        self.parts = parts
        self.txn = txn
        self.db = db
        # With a database: the refused combination (event ids claimed before the Kafka
        # commit can lose events), run only with allow_unsafe_inbox_with_kafka_transactions.
        self.inbox = inbox
        self._pending = Pending()  # the batches in the open transaction

    def process(self, messages: list[Message]) -> None:
        parts, txn = self.parts, self.txn
        crash = parts.crash
        self._pending.add(messages)  # empty whenever no transaction is open
        try:
            if not txn.open:
                txn.begin()
                crash.reached("after_begin")
            if self.db is not None:  # DB work first, then the Kafka commit (article order)
                with self.db.transaction() as tx:
                    handle_in_transaction(parts.work, messages, tx, self.inbox)
                    crash.reached("before_db_commit")
                crash.reached("after_db_commit")
            else:
                parts.work.handle(messages, None)
            crash.reached("after_produce")
            if self._pending.due(parts.config.commit_interval_ms):
                self._commit()
        except KafkaException as error:
            self._failed(error)
        except (HandlerFailed, DatabaseError) as failure:
            # the whole transaction goes: every batch in it is read again
            starts = self._pending.take().starts
            parts.stats.aborted += 1
            txn.abort()
            parts.consumer.rewind_to(starts)
            if isinstance(failure, HandlerFailed):
                failure.starts = starts
            raise

    def _commit(self) -> None:
        parts = self.parts
        self.txn.send_offsets(parts.consumer.client, self._pending.ends)
        parts.crash.reached("after_send_offsets")
        self.txn.commit()
        self._pending.take()
        parts.stats.commits += 1
        parts.crash.reached("after_kafka_commit")

    def _failed(self, error: KafkaException) -> None:
        """Abort, rewind to the transaction's first offsets and back off (or raise
        ProducerFenced)."""
        parts = self.parts
        starts = self._pending.take().starts
        parts.stats.aborted += 1
        parts.stats.retries += 1
        try:
            self.txn.fail(error, parts.consumer.client, starts)  # aborts, rewinds and raises
        except TransactionFailed as failed:
            parts.consumer.progress.rewound(starts)
            log.warning("transaction aborted, its batches rewound: %s", failed)
            time.sleep(parts.config.retry_backoff_s)

    def commit_pending(self) -> None:
        if not self._pending:
            return
        try:
            self._commit()
        except KafkaException as error:
            self._failed(error)

    def partitions_lost(self, partitions: list[TP]) -> None:
        if self.txn.open:
            # the open transaction holds their outputs: it must not commit without them
            self._abort("partitions lost")
        for tp in partitions:
            self._pending.drop(tp)

    def _abort(self, why: str) -> None:
        starts = self._pending.take().starts
        log.warning("aborting the open transaction (%s)", why)
        self.parts.stats.aborted += 1
        try:
            self.txn.abort()
        except KafkaException as error:
            raise ProducerFenced(f"abort failed: {error}") from error
        self.parts.consumer.rewind_to(starts)
