"""Transactional outbox: outgoing events written as rows in the business transaction.

``Outbox.add(tx, topic, key, value)`` inserts a row in the caller's transaction, so the
event exists if and only if the business change committed. A relay (``relay.py``,
``onceflow relay``) publishes the rows later and marks them published.

Per-key order: every row gets a ``shard`` derived from its key (CRC-32 modulo
``shards``). A relay publishes a shard's rows in id order and only one relay holds a shard at
a time, so the events of one key (one aggregate) leave in the order their transactions
inserted them. Writers of one aggregate must be serialized (they normally are: they lock
or update the aggregate's row), otherwise "order" is not defined anyway.

Each published record carries the header ``onceflow-outbox-id`` (the row id): a consumer's
inbox uses it to remove the duplicates a relay crash can cause.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from onceflow.db import Database, Transaction

DEFAULT_TABLE = "onceflow_outbox"
DEFAULT_SHARDS = 16
ID_HEADER = "onceflow-outbox-id"

Headers = Sequence[tuple[str, bytes | str | None]]


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    shard: int
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _bytes(value: bytes | str | memoryview | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def shard_of(key: bytes | None, shards: int) -> int:
    return 0 if key is None else zlib.crc32(key) % shards


def encode_headers(headers: Headers | None) -> str | None:
    if not headers:
        return None
    encoded = []
    for name, value in headers:
        raw = _bytes(value)
        encoded.append([name, None if raw is None else base64.b64encode(raw).decode()])
    return json.dumps(encoded)


def decode_headers(text: str | None) -> list[tuple[str, bytes | None]]:
    if not text:
        return []
    return [(name, None if v is None else base64.b64decode(v)) for name, v in json.loads(text)]


class Outbox:
    """The outbox table (and the relay's coordination tables)."""

    def __init__(
        self, db: Database, table: str = DEFAULT_TABLE, shards: int = DEFAULT_SHARDS
    ) -> None:
        if shards < 1:
            raise ValueError("shards must be >= 1")
        self.db = db
        self.table = table
        self.shards = shards
        self.shard_table = f"{table}_shards"
        self.lease_table = f"{table}_lease"

    def create_schema(self) -> None:
        db = self.db
        statements = [
            f"CREATE TABLE IF NOT EXISTS {self.table} ("
            f" id {db.dialect.autoincrement_pk},"
            " shard INTEGER NOT NULL,"
            " topic TEXT NOT NULL,"
            f" msg_key {db.dialect.blob},"
            f" value {db.dialect.blob},"
            " headers TEXT,"
            f" created_at_ms BIGINT NOT NULL DEFAULT ({db.dialect.now_ms}),"
            " published_at_ms BIGINT)",
            f"CREATE INDEX IF NOT EXISTS {self.table}_pending ON {self.table} (shard, id)"
            " WHERE published_at_ms IS NULL",
            f"CREATE TABLE IF NOT EXISTS {self.shard_table} (shard INTEGER PRIMARY KEY)",
            f"CREATE TABLE IF NOT EXISTS {self.lease_table} ("
            " name TEXT PRIMARY KEY, holder TEXT, epoch BIGINT NOT NULL DEFAULT 0,"
            " expires_at_ms BIGINT NOT NULL DEFAULT 0)",
        ]
        db.script(statements)
        with db.transaction() as tx:
            tx.executemany(
                f"INSERT INTO {self.shard_table} (shard) VALUES (?) ON CONFLICT DO NOTHING",
                [(shard,) for shard in range(self.shards)],
            )
            tx.execute(
                f"INSERT INTO {self.lease_table} (name) VALUES (?) ON CONFLICT DO NOTHING",
                ("relay",),
            )

    def add(
        self,
        tx: Transaction,
        topic: str,
        key: bytes | str | None,
        value: bytes | str | None,
        headers: Headers | None = None,
    ) -> None:
        """Insert an outgoing event in the caller's (business) transaction."""
        raw_key = _bytes(key)
        tx.execute(
            f"INSERT INTO {self.table} (shard, topic, msg_key, value, headers)"
            " VALUES (?, ?, ?, ?, ?)",
            (shard_of(raw_key, self.shards), topic, raw_key, _bytes(value),
             encode_headers(headers)),
        )  # fmt: skip

    def pending(
        self, tx: Transaction, limit: int, shards: Sequence[int] | None = None
    ) -> list[OutboxRow]:
        """Unpublished rows in id order (of the given shards), at most ``limit``."""
        sql = (
            f"SELECT id, shard, topic, msg_key, value, headers FROM {self.table}"
            " WHERE published_at_ms IS NULL"
        )
        params: list = []
        if shards is not None:
            if not shards:
                return []
            sql += f" AND shard IN ({', '.join('?' for _ in shards)})"
            params += list(shards)
        sql += " ORDER BY id LIMIT ?"
        params.append(limit)
        return [
            OutboxRow(int(i), int(s), t, _bytes(k), _bytes(v), decode_headers(h))
            for i, s, t, k, v, h in tx.fetchall(sql, params)
        ]

    def mark_published(self, tx: Transaction, ids: Sequence[int]) -> None:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            tx.execute(
                f"UPDATE {self.table} SET published_at_ms = {self.db.dialect.now_ms}"
                f" WHERE id IN ({', '.join('?' for _ in chunk)})",
                chunk,
            )

    def delete_published(self, older_than_ms: int) -> int:
        with self.db.transaction() as tx:
            cursor = tx.execute(
                f"DELETE FROM {self.table} WHERE published_at_ms IS NOT NULL"
                f" AND published_at_ms < {self.db.dialect.now_ms} - ?",
                (older_than_ms,),
            )
            return max(cursor.rowcount, 0)

    def backlog(self) -> int:
        row = self.db.execute(
            f"SELECT COUNT(*) FROM {self.table} WHERE published_at_ms IS NULL"
        ).fetchone()
        return int(row[0])
