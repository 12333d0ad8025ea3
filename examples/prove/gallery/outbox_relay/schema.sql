-- One row per order; the order id is the key, so a redelivered order changes nothing.
CREATE TABLE orders (id TEXT PRIMARY KEY, key TEXT NOT NULL, seq INTEGER NOT NULL);
-- The transactional outbox: events to publish, written in the orders' transaction.
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    key TEXT NOT NULL,
    payload TEXT NOT NULL,
    published_at TEXT
);
