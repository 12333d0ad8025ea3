-- One row per order: the order id is the key, so a second delivery changes nothing.
CREATE TABLE orders (id TEXT PRIMARY KEY, key TEXT NOT NULL, seq INTEGER NOT NULL);
