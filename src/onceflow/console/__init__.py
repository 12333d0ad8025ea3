"""``onceflow console``: a web console for any Kafka cluster (the embedded broker or Apache
Kafka) that shows the exactly-once machinery at work: partitions with their log start,
last stable offset and high watermark; groups with their lag to both; open and hanging
transactions; records with their control markers and aborted batches; dead-letter topics
and their replay; the reports of verify, chaos and prove (docs/console.md)."""
