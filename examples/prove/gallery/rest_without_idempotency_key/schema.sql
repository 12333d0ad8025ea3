-- The payment service's own table: one row per payment it accepted. A request with an
-- Idempotency-Key it has seen already is answered from its row instead of paying again.
CREATE TABLE payments (
    payment_id INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,        -- the order paid for
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    amount INTEGER NOT NULL,
    idempotency_key TEXT UNIQUE
);
