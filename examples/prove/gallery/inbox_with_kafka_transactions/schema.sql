-- One row per order; the order id is the key, so a redelivered order is not written twice.
CREATE TABLE orders (id TEXT PRIMARY KEY, key TEXT NOT NULL, seq INTEGER NOT NULL);
