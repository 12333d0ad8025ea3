"""The test kit: the one way the tests make topics, produce, consume, wait, build and read
record batches, speak the wire protocol and choose an engine.

* ``clients``: topics (``create_topic``, ``new_topic``), ``produce`` and ``consume`` with
  confluent-kafka against any broker, onceflow's or an Apache Kafka cluster;
* ``wait``: ``wait_until``;
* ``batches``: ``record_batch`` (a v2 batch as a producer sends it), ``decode`` and
  ``decode_batches`` (fetched record sets);
* ``wire``: single requests over ``onceflow.protocol.client.WireClient``;
* ``engines``: ``Engine`` and the ``engine`` fixture (onceflow's broker or the session's
  Apache Kafka cluster) for cross-engine tests.

Brokers come from the pytest plugin (``onceflow.testing``): ``kafka_broker``,
``kafka_module_broker`` and ``kafka_session_broker`` run in the test process;
``kafka_broker_process`` is a child process to kill.
"""
