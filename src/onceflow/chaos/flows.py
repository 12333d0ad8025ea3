"""The seed articles' flows, run one numbered step at a time on real Kafka and a database.

"Kafka Deduplication Patterns" numbers every step of each pattern (consume, REST POST,
begin/commit the database transaction, insert the event id, insert the entity, insert the
outbox event, produce, update the consumer offsets, begin/commit the Kafka transaction)
and the Karafka article adds offsets stored in the database transaction. ``ArticleFlow``
runs exactly those steps, in the article's order, for one event at a time, and reaches a
crash point named after the step once it is done, so a chaos cell can SIGKILL the worker
between any two steps. The pieces are onceflow's own (``Inbox``, ``Outbox``,
``OffsetStore``, ``KafkaTransaction``); only their order is the article's.

Outputs, audited afterwards: the REST service's calls, the ``entities`` table and the
output topic (directly, through a Kafka transaction, or from the outbox by the relay).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaPartition

from onceflow.crash_points import CrashPoints
from onceflow.db import Database, Transaction
from onceflow.patterns.inbox import Inbox
from onceflow.patterns.offsets import OffsetStore
from onceflow.patterns.outbox import Outbox
from onceflow.patterns.runner_output import idempotent_producer
from onceflow.patterns.transactional import KafkaTransaction

log = logging.getLogger(__name__)
TP = tuple[str, int]

STEP_LABELS = {
    "consume": "Consume event",
    "rest_post": "REST POST request",
    "begin_db": "Begin DB transaction",
    "insert_event_id": "DB insert eventId",
    "insert_entity": "DB insert entity",
    "insert_outbox": "DB insert outbox event",
    "commit_db": "Commit DB transaction",
    "produce": "Produce event",
    "update_offsets": "Update consumer offsets",
    "begin_kafka": "Begin Kafka transaction",
    "send_offsets": "Update consumer offsets (in the Kafka transaction)",
    "commit_kafka": "Commit Kafka transaction",
    "lock_offset": "DB lock the partition's offset row",
    "store_offset": "DB update the partition's offset",
    "commit_kafka_offset": "Commit the offset to Kafka",
}

FLOWS: dict[str, tuple[str, ...]] = {
    "no_dedup": (
        "consume", "rest_post", "begin_db", "insert_entity", "commit_db", "produce",
        "update_offsets",
    ),
    "idempotent_consumer": (
        "consume", "begin_db", "insert_event_id", "rest_post", "insert_entity", "produce",
        "commit_db", "update_offsets",
    ),
    "outbox": (
        "consume", "rest_post", "begin_db", "insert_entity", "insert_outbox", "commit_db",
        "update_offsets",
    ),
    "idempotent_consumer_outbox": (
        "consume", "begin_db", "insert_event_id", "rest_post", "insert_entity",
        "insert_outbox", "commit_db", "update_offsets",
    ),
    "kafka_transactions": (
        "consume", "rest_post", "begin_db", "insert_entity", "commit_db", "begin_kafka",
        "produce", "send_offsets", "commit_kafka",
    ),
    "idempotent_consumer_kafka_transactions_db_first": (
        "consume", "begin_db", "insert_event_id", "rest_post", "insert_entity", "commit_db",
        "begin_kafka", "produce", "send_offsets", "commit_kafka",
    ),
    "idempotent_consumer_kafka_transactions_kafka_first": (
        "consume", "begin_db", "insert_event_id", "rest_post", "insert_entity", "begin_kafka",
        "produce", "send_offsets", "commit_kafka", "commit_db",
    ),
    "db_offsets": (
        "consume", "begin_db", "lock_offset", "rest_post", "insert_entity", "store_offset",
        "commit_db", "commit_kafka_offset",
    ),
}  # fmt: skip

# Business steps an event already seen (inbox) or already counted (database offsets) skips.
WORK_STEPS = frozenset({"rest_post", "insert_entity", "insert_outbox", "produce"})

ENTITIES_QUERY = "SELECT event_id AS id, key FROM entities ORDER BY seq"


def entities_ddl(db: Database) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS entities (seq {db.autoincrement_pk},"
        " event_id TEXT NOT NULL, key TEXT, n INTEGER)"
    )


@dataclass
class FlowSettings:
    bootstrap: str
    input_topic: str
    output_topic: str
    group: str
    transactional_id: str
    rest_url: str
    idle_exit_s: float = 2.0
    consumer_config: dict[str, Any] = field(default_factory=dict)


@dataclass
class EventInFlight:
    message: Message
    event: dict[str, Any]
    transactions: ExitStack = field(default_factory=ExitStack)
    tx: Transaction | None = None
    skip_work: bool = False

    @property
    def partition(self) -> tuple[str, int]:
        return self.message.topic(), self.message.partition()


class ArticleFlow:
    """One consumer processing one event at a time through a flow's numbered steps."""

    def __init__(self, name: str, settings: FlowSettings, db: Database, crash: CrashPoints) -> None:
        if name not in FLOWS:
            raise ValueError(f"unknown flow {name!r}; known: {', '.join(FLOWS)}")
        self.name = name
        self.steps = FLOWS[name]
        self.settings = settings
        self.db = db
        self.crash = crash
        self.inbox = Inbox(db, settings.group)
        self.outbox = Outbox(db)
        self.offsets = OffsetStore(db, settings.group)
        self.processed = 0
        self._producer: Producer | None = None
        self._txn: KafkaTransaction | None = None
        self.consumer = Consumer(
            {
                "bootstrap.servers": settings.bootstrap,
                "group.id": settings.group,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,
                **settings.consumer_config,
            }
        )

    def prepare(self) -> None:
        with self.db.transaction() as tx:
            tx.execute(entities_ddl(self.db))
        self.inbox.create_schema()
        self.outbox.create_schema()
        self.offsets.create_schema()
        if "begin_kafka" in self.steps:  # fences and aborts what a killed instance left open
            self._txn = KafkaTransaction(self.settings.bootstrap, self.settings.transactional_id)

    def run(self) -> int:
        """Process events until every partition was read to its end and none arrived for
        ``idle_exit_s``; returns how many. (Idleness counted without knowing the end
        ends the run when a fetch or a step is slow, e.g. on a loaded cluster, and
        leaves events unprocessed.)"""
        self.prepare()
        assigned = set(self._assign())
        at_end: set[TP] = set()
        idle_since = time.monotonic()
        try:
            while at_end != assigned or time.monotonic() - idle_since < self.settings.idle_exit_s:
                message = self.consumer.poll(0.2)
                if message is None:
                    continue
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add((message.topic(), message.partition()))
                        idle_since = time.monotonic()
                    else:
                        log.warning("consumer: %s", message.error())
                    continue
                at_end.discard((message.topic(), message.partition()))
                idle_since = time.monotonic()
                self._process(message)
        finally:
            self.consumer.close()
            if self._txn is not None:
                self._txn.close()
            if self._producer is not None:
                self._producer.flush(10)
        return self.processed

    def _assign(self) -> list[TP]:
        topic = self.settings.input_topic
        metadata = self.consumer.list_topics(topic, timeout=30).topics[topic]
        partitions = [(topic, p) for p in sorted(metadata.partitions)]
        if self.name == "db_offsets":  # the Karafka article: max(database, Kafka)
            starts = {
                (s.topic, s.partition): s.offset
                for s in self.offsets.start_offsets(partitions, self._kafka_committed)
            }
        else:
            starts = self._kafka_committed(partitions)
        self.consumer.assign(
            [
                KafkaPartition(t, p, OFFSET_BEGINNING if starts[(t, p)] is None else starts[(t, p)])
                for t, p in partitions
            ]
        )
        return partitions

    def _kafka_committed(self, partitions: list[TP]) -> dict[TP, int | None]:
        committed = self.consumer.committed([KafkaPartition(t, p) for t, p in partitions], 30)
        return {(c.topic, c.partition): (c.offset if c.offset >= 0 else None) for c in committed}

    # -- one event ----------------------------------------------------------------------

    def _process(self, message: Message) -> None:
        event = json.loads(message.value())
        flight = EventInFlight(message, event)
        with flight.transactions:  # an exception rolls back whatever is still open
            for step in self.steps:
                if flight.skip_work and step in WORK_STEPS:
                    continue
                getattr(self, f"_{step}")(flight)
                self.crash.reached(step)
        if not flight.skip_work:
            self.processed += 1

    def _consume(self, flight: EventInFlight) -> None:
        pass  # the poll that returned the message

    def _rest_post(self, flight: EventInFlight) -> None:
        body = json.dumps({"id": flight.event["id"], "key": flight.event.get("key")}).encode()
        request = urllib.request.Request(
            self.settings.rest_url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            if response.status >= 300:
                raise RuntimeError(f"REST call answered {response.status}")

    def _begin_db(self, flight: EventInFlight) -> None:
        flight.tx = flight.transactions.enter_context(self.db.transaction())

    def _commit_db(self, flight: EventInFlight) -> None:
        flight.transactions.close()  # leaves the transaction's block: COMMIT
        flight.tx = None

    def _insert_event_id(self, flight: EventInFlight) -> None:
        assert flight.tx is not None
        flight.skip_work = not self.inbox.claim(flight.tx, str(flight.event["id"]))

    def _insert_entity(self, flight: EventInFlight) -> None:
        assert flight.tx is not None
        event = flight.event
        flight.tx.execute(
            "INSERT INTO entities (event_id, key, n) VALUES (?, ?, ?)",
            (str(event["id"]), event.get("key"), event.get("n")),
        )

    def _insert_outbox(self, flight: EventInFlight) -> None:
        assert flight.tx is not None
        self.outbox.add(
            flight.tx, self.settings.output_topic, flight.message.key(), flight.message.value()
        )

    def _produce(self, flight: EventInFlight) -> None:
        message = flight.message
        if self._txn is not None:
            self._txn.produce(self.settings.output_topic, message.value(), message.key())
            return
        producer = self._direct_producer()
        failures: list[str] = []
        producer.produce(
            self.settings.output_topic,
            value=message.value(),
            key=message.key(),
            on_delivery=lambda error, _m: failures.append(str(error)) if error else None,
        )
        if producer.flush(30) or failures:
            raise RuntimeError(f"produce failed: {failures or 'not acknowledged'}")

    def _update_offsets(self, flight: EventInFlight) -> None:
        topic, partition = flight.partition
        self.consumer.commit(
            offsets=[KafkaPartition(topic, partition, flight.message.offset() + 1)],
            asynchronous=False,
        )

    def _begin_kafka(self, flight: EventInFlight) -> None:
        assert self._txn is not None
        self._txn.begin()

    def _send_offsets(self, flight: EventInFlight) -> None:
        assert self._txn is not None
        self._txn.send_offsets(self.consumer, {flight.partition: flight.message.offset() + 1})

    def _commit_kafka(self, flight: EventInFlight) -> None:
        assert self._txn is not None
        self._txn.commit()

    def _lock_offset(self, flight: EventInFlight) -> None:
        assert flight.tx is not None
        stored = self.offsets.lock(flight.tx, *flight.partition)
        flight.skip_work = stored is not None and flight.message.offset() < stored

    def _store_offset(self, flight: EventInFlight) -> None:
        assert flight.tx is not None
        if not flight.skip_work:  # a stale event must not move the offset back
            self.offsets.store(flight.tx, *flight.partition, flight.message.offset() + 1)

    def _commit_kafka_offset(self, flight: EventInFlight) -> None:
        try:
            self._update_offsets(flight)
        except KafkaException as error:  # the database holds the truth; Kafka's may lag
            log.warning("Kafka offset commit failed: %s", error)

    def _direct_producer(self) -> Producer:
        if self._producer is None:
            self._producer = idempotent_producer(self.settings.bootstrap, {"linger.ms": 0})
        return self._producer
