-- One row per order the consumer processed. No unique key: a second delivery is a second row.
CREATE TABLE orders (id TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL);
