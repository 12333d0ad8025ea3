-- One row per order the consumer processed.
CREATE TABLE orders (id TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL, score INTEGER NOT NULL);
