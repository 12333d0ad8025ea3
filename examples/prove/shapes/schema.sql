-- One row per processed input event (no unique key: a second delivery is a second row).
CREATE TABLE IF NOT EXISTS orders (id TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL);
