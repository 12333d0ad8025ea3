"""Watch a running pipeline from outside: how many output records exist now, and whether
some consumer group has committed the whole input.

Used to time faults by output growth (a fault lands once the outputs grew, i.e. while the
pipeline is making progress, never during its start-up) and to tell when it has drained.
Outputs are tables (SQLite or PostgreSQL) and topics. SQLite tables are watched through
the database file's headers, so a commit is seen within a millisecond, and counted again
every ``TABLE_RECOUNT_S`` whatever the headers say (a WAL database whose writers close
their connections after each commit is checkpointed and its WAL reset each time, which
can leave both headers as they were: a watcher that looks only between such commits sees
no change at all); PostgreSQL tables and topics are counted every ``SLOW_COUNT_S``.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Literal

from onceflow.db import DatabaseUrl, quote_identifier
from onceflow.faults.inotify import JournalDeletions
from onceflow.faults.outputs import Output

SLOW_COUNT_S = 0.02
TABLE_RECOUNT_S = 0.25
OWN_GROUP_PREFIX = "onceflow-"  # the groups of onceflow's own clients (the probe, topics)


class OutputProbe:
    """``progress`` maps a table of state (``--expect``) to the SQL sum of its numeric
    columns and the factor that turns it into input records counted (see expect.py);
    other tables count rows."""

    def __init__(
        self, outputs: list[Output], bootstrap: str, database_url: str | None,
        progress: dict[str, tuple[str, float]] | None = None,
    ) -> None:  # fmt: skip
        from confluent_kafka import Consumer

        self.outputs = outputs
        self.progress = progress or {}
        self.bootstrap = bootstrap
        url = DatabaseUrl.parse(database_url) if database_url else None
        self.database = Path(url.target) if url is not None and url.dialect == "sqlite" else None
        self.postgres = url.target if url is not None and url.dialect == "postgresql" else None
        self._postgres: Any = None  # one autocommit connection, opened on first use
        self._journal: JournalDeletions | Literal[False] | None = None  # False: no inotify
        self._counted_at = 0.0
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "onceflow-prove-probe",
             "enable.auto.commit": False, "log_level": 0}
        )  # fmt: skip
        self._partitions: dict[str, list[int]] = {}
        tables = all(output.kind == "table" for output in outputs)
        self._tables_only = tables and self.database is not None
        self._last: tuple[bytes, ...] | None = None  # stamp of the last count
        self._last_written: tuple[bytes, ...] | None = None  # ... of the last commit seen
        self._count_cache = 0
        self._rows_seen: dict[str, int] = {}  # last good count per table

    def count(self) -> int:
        """Output records written so far (topics: uncommitted ones included). With table
        outputs only, the tables are counted again when the database files changed (a
        read of two headers is cheap: it lets the watcher look every millisecond) or
        ``TABLE_RECOUNT_S`` after the last count."""
        if self._tables_only:
            stamp = self._stamp()
            recent = time.monotonic() - self._counted_at < TABLE_RECOUNT_S
            if stamp == self._last and self._count_cache >= 0 and recent:
                return self._count_cache
            self._last = stamp
        elif time.monotonic() - self._counted_at < SLOW_COUNT_S:
            return self._count_cache
        self._counted_at = time.monotonic()
        self._count_cache = sum(self._count(output) for output in self.outputs)
        return self._count_cache

    @property
    def sees_writes(self) -> bool:
        """Can ``written()`` tell the instant a write lands (table outputs only)?"""
        return self._tables_only

    def await_write(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the next commit; True when one happened. A rollback
        journal's deletion is waited for with inotify (the commit's very instant); else
        the file headers are polled (``written``)."""
        if self._journal is None and self.database is not None:
            self.database.parent.mkdir(parents=True, exist_ok=True)
            self._journal = JournalDeletions.open(self.database) or False
        if self._journal:
            if self._journal.wait(timeout):
                self._last_written = self._stamp()
                return True
            return self.written()  # a WAL database: its commits delete no journal
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.written():
                return True
            time.sleep(0.0005)
        return False

    def written(self) -> bool:
        """Did a transaction commit since the last look? (no query: reads of two file
        headers) In WAL mode a commit updates the WAL index; with a rollback journal the
        header changes while the journal exists and the commit happens when the journal
        goes away, so a change is only reported once there is no journal."""
        assert self.database is not None
        stamp = self._stamp()
        if stamp == self._last_written:
            return False
        if self.database.with_name(self.database.name + "-journal").exists():
            return False  # not committed yet: report it once the journal is gone
        self._last_written = stamp
        return True

    def _stamp(self) -> tuple[bytes, ...]:
        """What changes with every SQLite commit: the database header's change counter
        (rollback journal) and the WAL index header in the -shm file (WAL mode), plus
        whether a rollback journal exists. File times are too coarse for this."""
        assert self.database is not None
        return (
            _read(self.database, 24, 4),
            _read(self.database.with_name(self.database.name + "-shm"), 0, 48),
        )

    def _count(self, output: Output) -> int:
        if output.kind == "table":
            return self._rows(output.name)
        from confluent_kafka import KafkaException, TopicPartition

        try:
            partitions = self._topic_partitions(output.name)
            return sum(
                self._consumer.get_watermark_offsets(TopicPartition(output.name, p), 2)[1]
                for p in partitions
            )
        except KafkaException:
            return 0

    def _topic_partitions(self, topic: str) -> list[int]:
        if topic not in self._partitions:
            metadata = self._consumer.list_topics(topic, timeout=5).topics.get(topic)
            if metadata is None or metadata.error is not None:
                return []
            self._partitions[topic] = sorted(metadata.partitions)
        return self._partitions[topic]

    def _rows(self, table: str) -> int:
        if self.postgres is not None:
            return self._postgres_rows(table)
        if self.database is None or not self.database.exists():
            return 0
        try:
            # closed at once: a connection left for the garbage collector keeps the -shm
            # file mapped, and another process may truncate it under the mapping (SIGBUS)
            with closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True,
                                         timeout=1)) as db:  # fmt: skip
                quoted = quote_identifier(table)
                total, factor = self.progress.get(table, ("count(*)", 1.0))
                measure = db.execute(f"SELECT {total} FROM {quoted}").fetchone()[0]
                rows = round((measure or 0) * factor)
        except sqlite3.Error:  # locked by a writer (rollback journal), not created yet
            self._last = None  # counted from an old count: count again next time
            return self._rows_seen.get(table, 0)
        self._rows_seen[table] = rows
        return rows

    def _postgres_rows(self, table: str) -> int:
        import psycopg

        total, factor = self.progress.get(table, ("count(*)", 1.0))
        try:
            if self._postgres is None:
                self._postgres = psycopg.connect(self.postgres, autocommit=True, connect_timeout=5)
            row = self._postgres.execute(
                f"SELECT {total} FROM {quote_identifier(table)}"
            ).fetchone()
        except psycopg.Error:  # not created yet, or the server is busy: the last count
            if self._postgres is not None and self._postgres.closed:
                self._postgres = None
            return self._rows_seen.get(table, 0)
        rows = round(float(row[0] or 0) * factor)
        self._rows_seen[table] = rows
        return rows

    def close(self) -> None:
        self._consumer.close()
        if self._journal:
            self._journal.close()
        if self._postgres is not None:
            self._postgres.close()


def group_committed_to_end(bootstrap: str, topic: str) -> bool:
    """Has any consumer group committed offsets at the end of every partition of topic?"""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        metadata = admin.list_topics(topic, timeout=5).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return False
        partitions = [TopicPartition(topic, p) for p in metadata.partitions]
        ends = {
            tp.partition: future.result().offset
            for tp, future in admin.list_offsets(
                {tp: OffsetSpec.latest() for tp in partitions}, request_timeout=5
            ).items()
        }
        groups = admin.list_consumer_groups(request_timeout=5).result().valid
        for group in groups:
            if group.group_id.startswith(OWN_GROUP_PREFIX):
                continue
            request = [ConsumerGroupTopicPartitions(group.group_id, partitions)]
            result = admin.list_consumer_group_offsets(request, request_timeout=5)
            committed = result[group.group_id].result().topic_partitions
            if committed and all(
                tp.offset >= ends.get(tp.partition, 0) and tp.error is None for tp in committed
            ):
                return True
    except KafkaException:
        return False
    return False


def _read(path: Path, offset: int, size: int) -> bytes:
    try:
        with open(path, "rb") as file:
            file.seek(offset)
            return file.read(size)
    except OSError:
        return b""


def groups_committed_on(bootstrap: str, topics: list[str]) -> list[str]:
    """The consumer groups with committed offsets on any of ``topics``."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    groups = []
    for listing in admin.list_consumer_groups(request_timeout=10).result().valid:
        request = [ConsumerGroupTopicPartitions(listing.group_id)]
        offsets = admin.list_consumer_group_offsets(request, request_timeout=10)
        committed = offsets[listing.group_id].result().topic_partitions or []
        if any(tp.topic in topics for tp in committed):
            groups.append(listing.group_id)
    return groups
