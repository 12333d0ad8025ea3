-- One row per order the consumer processed.
CREATE TABLE orders (id TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL);
-- Where the consumer goes on from after a restart: the next offset of each partition.
CREATE TABLE kafka_offsets (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)
);
