"""The JVM options of the suite's short-lived JVMs (Spark drivers, executors and daemons,
Kafka's tools, the test apps): C1 only and the serial collector. A test's JVM lives seconds
to minutes; C2's compiler threads and G1's concurrent threads were CPU that the other tests
on the two cores waited for (tests/spark/test_batch.py and test_streaming.py: 26 -> 16 CPU
seconds). ``onceflow.kafka_cluster``'s nodes run with the same two."""

SHORT_LIVED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
