-- One row per order the consumer processed (no unique key of their own, as in broken.sql).
CREATE TABLE orders (id TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL);
-- The inbox: the id of every event processed, written in the same transaction as its rows.
CREATE TABLE processed_events (event_id TEXT PRIMARY KEY);
