"""The outbox relay: publish outbox rows to Kafka, then mark them published.

Steps of one cycle (crash points between them):

1. claim work: on PostgreSQL lock some shard rows with ``FOR UPDATE SKIP LOCKED`` (held
   until step 6, so several relays share the shards and never publish one key
   concurrently); on SQLite take or renew a single-writer lease (``after_claim``);
2. read the claimed shards' unpublished rows in id order (``after_select``);
3. produce them with an idempotent producer, keyed by aggregate (``after_produce``);
4. flush and check every delivery report (``after_flush``); in transactional mode, commit
   the Kafka transaction (``after_kafka_commit``);
5. mark the rows published (``after_mark``) — on SQLite only while still holding the lease;
6. commit the database transaction (``after_db_commit``).

A crash anywhere before step 6 leaves the rows unpublished: the next holder of the shard
publishes them again, from the oldest, so the first copy of every event keeps per-key
order and nothing is lost; the copies are duplicates that the consumer's inbox removes
(dedupe on the ``onceflow-outbox-id`` header). In transactional mode the batch is
atomically visible to read_committed consumers, but a crash between the Kafka commit and
step 6 still republishes it: the outbox is at-least-once on the wire by nature.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from onceflow.crash_points import NO_CRASHES, CrashPoints
from onceflow.db import Database, Transaction
from onceflow.patterns.outbox import ID_HEADER, Outbox, OutboxRow
from onceflow.patterns.transactional import TRANSACTIONAL_PRODUCER_DEFAULTS
from onceflow.producing import abort_transaction, produce_waiting

STEPS = (
    "after_claim",
    "after_select",
    "after_produce",
    "after_flush",
    "after_kafka_commit",
    "after_mark",
    "after_db_commit",
)

log = logging.getLogger(__name__)


class RelayError(RuntimeError):
    """Publishing failed; nothing was marked published (the rows will be sent again)."""


@dataclass(slots=True)
class RelayConfig:
    bootstrap_servers: str
    batch_size: int = 500
    shards_per_cycle: int = 4  # PostgreSQL: shards one relay locks per cycle
    lease_ttl_ms: int = 15_000  # SQLite: the single-writer lease
    transactional_id: str | None = None  # set: publish each batch in a Kafka transaction
    idle_sleep_s: float = 0.2
    producer_config: dict[str, Any] = field(default_factory=dict)


class Relay:
    """Publishes an outbox; safe to run as several processes on PostgreSQL."""

    def __init__(
        self,
        db: Database,
        outbox: Outbox,
        config: RelayConfig,
        crash_points: CrashPoints = NO_CRASHES,
    ) -> None:
        self.db = db
        self.outbox = outbox
        self.config = config
        self.crash = crash_points
        self.holder = uuid.uuid4().hex
        self._next_shard = 0
        self.published = 0
        self.producer = self._make_producer()

    def _make_producer(self) -> Producer:
        settings: dict[str, Any] = {
            "bootstrap.servers": self.config.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "max.in.flight.requests.per.connection": 5,  # ordered under idempotence
            **self.config.producer_config,
        }
        if self.config.transactional_id:
            settings = {
                **TRANSACTIONAL_PRODUCER_DEFAULTS,
                **settings,
                "transactional.id": self.config.transactional_id,
            }
        producer = Producer(settings)
        if self.config.transactional_id:
            producer.init_transactions(30)
        return producer

    # -- one cycle --------------------------------------------------------------------

    def run_once(self) -> int:
        """Publish at most one batch; returns the number of rows published."""
        if self.db.dialect.serializes_writers:
            return self._cycle_with_lease()
        return self._cycle_locking_shards()

    def _cycle_locking_shards(self) -> int:
        with self.db.transaction() as tx:
            shards = self._lock_shards(tx)
            self.crash.reached("after_claim")
            rows = self.outbox.pending(tx, self.config.batch_size, shards)
            self.crash.reached("after_select")
            if not rows:
                return 0
            self._publish(rows)
            self.outbox.mark_published(tx, [row.id for row in rows])
            self.crash.reached("after_mark")
        self.crash.reached("after_db_commit")
        self.published += len(rows)
        return len(rows)

    def _lock_shards(self, tx: Transaction) -> list[int]:
        total = self.outbox.shards
        start = self._next_shard
        self._next_shard = (start + self.config.shards_per_cycle) % total
        rows = tx.fetchall(
            f"SELECT shard FROM {self.outbox.shard_table}"
            f" ORDER BY (shard - ? + ?) % ? LIMIT ?{self.db.dialect.row_lock_skipping_locked}",
            (start, total, total, self.config.shards_per_cycle),
        )
        return [int(r[0]) for r in rows]

    def _cycle_with_lease(self) -> int:
        if not self._take_lease():
            return 0
        self.crash.reached("after_claim")
        with self.db.transaction() as tx:  # a short read; the lease keeps other relays out
            rows = self.outbox.pending(tx, self.config.batch_size)
        self.crash.reached("after_select")
        if not rows:
            return 0
        self._publish(rows)
        with self.db.transaction() as tx:
            if not self._still_holding(tx):
                raise RelayError(
                    "relay lease expired while publishing (raise lease_ttl_ms): the batch"
                    " was sent but is not marked; another relay will send it again"
                )
            self.outbox.mark_published(tx, [row.id for row in rows])
            self._renew(tx)
            self.crash.reached("after_mark")
        self.crash.reached("after_db_commit")
        self.published += len(rows)
        return len(rows)

    def _take_lease(self) -> bool:
        table = self.outbox.lease_table
        now = self.db.dialect.now_ms
        with self.db.transaction() as tx:
            cursor = tx.execute(
                f"UPDATE {table} SET holder = ?, epoch = epoch + 1, expires_at_ms = {now} + ?"
                f" WHERE name = 'relay' AND (holder IS NULL OR holder = ?"
                f" OR expires_at_ms < {now})",
                (self.holder, self.config.lease_ttl_ms, self.holder),
            )
            return cursor.rowcount == 1

    def _still_holding(self, tx: Transaction) -> bool:
        row = tx.fetchone(
            f"SELECT holder, expires_at_ms >= {self.db.dialect.now_ms}"
            f" FROM {self.outbox.lease_table} WHERE name = 'relay'"
        )
        return row is not None and row[0] == self.holder and bool(row[1])

    def _renew(self, tx: Transaction) -> None:
        tx.execute(
            f"UPDATE {self.outbox.lease_table} SET expires_at_ms = {self.db.dialect.now_ms} + ?"
            " WHERE name = 'relay' AND holder = ?",
            (self.config.lease_ttl_ms, self.holder),
        )

    def release(self) -> None:
        """Give the SQLite lease up (graceful shutdown) so another relay starts at once."""
        if not self.db.dialect.serializes_writers:
            return
        with self.db.transaction() as tx:
            tx.execute(
                f"UPDATE {self.outbox.lease_table} SET holder = NULL, expires_at_ms = 0"
                " WHERE name = 'relay' AND holder = ?",
                (self.holder,),
            )

    # -- publishing -------------------------------------------------------------------

    def _publish(self, rows: list[OutboxRow]) -> None:
        failures: list[str] = []

        def report(error: KafkaError | None, _message: Any) -> None:
            if error is not None:
                failures.append(str(error))

        transactional = bool(self.config.transactional_id)
        if transactional:
            self.producer.begin_transaction()
        try:
            for row in rows:
                headers = [*row.headers, (ID_HEADER, str(row.id).encode())]
                produce_waiting(
                    self.producer, row.topic, value=row.value, key=row.key, headers=headers,
                    on_delivery=report,
                )  # fmt: skip
            self.crash.reached("after_produce")
            timeout = max(self.config.lease_ttl_ms / 2000, 5.0)
            if transactional:
                self.producer.commit_transaction(timeout)
                self.crash.reached("after_kafka_commit")
            else:
                remaining = self.producer.flush(timeout)
                if remaining:
                    failures.append(f"{remaining} records not acknowledged in {timeout} s")
            self.crash.reached("after_flush")
        except KafkaException as error:
            if transactional and error.args[0].txn_requires_abort():
                abort_transaction(self.producer, 30)
                # A new epoch: retried under the old one, records written but never
                # acknowledged before the abort are taken for duplicates (see
                # KafkaTransaction.abort in transactional.py).
                self.producer.close()
                self.producer = self._make_producer()
            raise RelayError(f"publishing {len(rows)} outbox rows failed: {error}") from error
        if failures:
            # An idempotent producer fails a partition's tail, never a hole in the middle,
            # so resending the whole batch keeps the first copies in order.
            self.producer = self._make_producer()
            raise RelayError(f"publishing failed ({len(failures)} errors): {failures[0]}")

    # -- loop -------------------------------------------------------------------------

    def run(
        self,
        should_stop: Callable[[], bool],
        idle_exit_s: float | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> int:
        """Cycle until ``should_stop()``, or until idle for ``idle_exit_s`` seconds: nothing
        published and the outbox empty. A relay kept out by another's lease (on SQLite, a
        killed relay's lease lasts until it expires) or by locked shards is not idle."""
        idle_since = time.monotonic()
        try:
            while not should_stop():
                try:
                    count = self.run_once()
                except RelayError as error:
                    if on_error is not None:
                        on_error(error)
                    log.warning("%s", error)
                    time.sleep(self.config.idle_sleep_s)
                    continue
                if count:
                    idle_since = time.monotonic()
                    continue
                if (
                    idle_exit_s is not None
                    and time.monotonic() - idle_since > idle_exit_s
                    and not self.outbox.backlog()
                ):
                    break
                time.sleep(self.config.idle_sleep_s)
        finally:
            self.release()
        return self.published
