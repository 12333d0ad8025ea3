"""Streaming reads: spark.readStream.format("onceflow")."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from tests.spark.conftest import add_partitions, create_topic, produce, wait_until

pytestmark = [pytest.mark.spark]


def stream(spark, bootstrap: str, **options: str):
    reader = spark.readStream.format("onceflow").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows_of(spark, name: str) -> list[tuple[int, int, bytes]]:
    return sorted(
        (r.partition, r.offset, r.value)
        for r in spark.sql(f"SELECT partition, offset, value FROM {name}").collect()
    )


def batch_sizes(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def test_available_now_respects_max_offsets_per_trigger(spark, kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"p0-%d" % i for i in range(15)], partition=0)
    produce(bootstrap, topic, [b"p1-%d" % i for i in range(10)], partition=1)
    seen: list[int] = []

    def record(df, batch_id):
        seen.append(df.count())
        if batch_id == 0:  # data that arrives after the query started is not read
            produce(bootstrap, topic, [b"late-%d" % i for i in range(5)], partition=0)

    df = stream(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="10"
    )
    query = (
        df.writeStream.foreachBatch(record)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert seen == [10, 10, 5]

    # A second AvailableNow run on the same checkpoint reads exactly the late records.
    out = []
    query = (
        stream(spark, bootstrap, subscribe=topic, maxOffsetsPerTrigger="10")
        .writeStream.foreachBatch(lambda df, _id: out.extend(r.value for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(out) == [b"late-%d" % i for i in range(5)]


def test_stream_picks_up_new_partitions_and_resumes_from_checkpoint(
    spark, kafka_broker, topic, tmp_path
):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, [b"a", b"b", b"c"], partition=0)
    checkpoint = str(tmp_path / "cp")
    seen: list[tuple[int, int, bytes]] = []

    def collect(df, _batch_id):
        seen.extend((r.partition, r.offset, r.value) for r in df.collect())

    def start():
        return (
            stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest")
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    query = start()
    try:
        wait_until(lambda: len(seen) == 3)
        add_partitions(bootstrap, topic, 3)
        produce(bootstrap, topic, [b"d"], partition=1)
        produce(bootstrap, topic, [b"e", b"f"], partition=2)
        wait_until(lambda: len(seen) == 6)
        # foreachBatch is at-least-once: a batch whose commit Spark has not yet logged
        # when the query stops runs again after the restart. Let it log the commit.
        query.processAllAvailable()
        assert sorted(seen) == [
            (0, 0, b"a"),
            (0, 1, b"b"),
            (0, 2, b"c"),
            (1, 0, b"d"),
            (2, 0, b"e"),
            (2, 1, b"f"),
        ]
    finally:
        query.stop()
    assert query.exception() is None

    # Restart from the checkpoint: only new records, none twice.
    seen.clear()
    produce(bootstrap, topic, [b"g"], partition=1)
    query = start()
    try:
        wait_until(lambda: len(seen) >= 1)
        query.processAllAvailable()
        assert seen == [(1, 1, b"g")]
    finally:
        query.stop()


def test_stream_starting_offsets_latest_and_json(spark, kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"old"] * 4, partition=0)
    produce(bootstrap, topic, [b"old"] * 4, partition=1)
    name = "q_" + uuid.uuid4().hex[:8]
    query = (
        stream(
            spark,
            bootstrap,
            subscribe=topic,
            startingOffsets=json.dumps({topic: {"0": 2, "1": -1}}),
        )
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.processAllAvailable()
        produce(bootstrap, topic, [b"new"], partition=1)
        wait_until(lambda: len(rows_of(spark, name)) == 3)
        assert rows_of(spark, name) == [(0, 2, b"old"), (0, 3, b"old"), (1, 4, b"new")]
    finally:
        query.stop()


def test_deleted_topic_fails_the_query_when_fail_on_data_loss(spark, kafka_broker, topic, tmp_path):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [b"x"], partition=0)
    name = "q_" + uuid.uuid4().hex[:8]
    query = (
        stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_until(lambda: len(rows_of(spark, name)) == 1)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.delete_topics([topic]).values():
            future.result(15)
        with pytest.raises(Exception, match="failOnDataLoss") as failure:
            query.awaitTermination(60)
        assert f"Partition {topic}-0 is gone" in str(failure.value)
    finally:
        query.stop()


def test_stream_bad_option_fails_at_start(spark):
    with pytest.raises(Exception, match="only for batch queries"):
        stream(spark, "127.0.0.1:1", subscribe="x", endingOffsets="latest").writeStream.format(
            "memory"
        ).queryName("never").start().awaitTermination(30)


class LiveProducer:
    """A producer writing keyed records to every partition of a topic until stopped, as a
    topic being written while a query starts is."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        import threading

        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        n = 0
        while not self.stopped.is_set():
            for _ in range(100):
                self.producer.produce(self.topic, value=b"v%d" % n, key=b"k%d" % (n % 50))
                n += 1
            self.producer.poll(0)
            self.stopped.wait(0.02)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(10)
        assert self.producer.flush(30) == 0


def test_the_default_starting_offsets_on_a_topic_being_written(
    spark, kafka_broker, topic, tmp_path
):
    """No startingOffsets (streaming's default, latest) while a producer writes: every
    record after the first micro-batch's end is read once, none fails the query. Spark asks
    the source for its initial offsets when it plans the first batch and again when it runs
    it: "latest" must not move between the two."""
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=6)
    seen: list[tuple[int, int]] = []
    producer = LiveProducer(bootstrap, topic)
    query = (
        stream(spark, bootstrap, subscribe=topic)
        .writeStream.foreachBatch(
            lambda df, _id: seen.extend(
                (r.partition, r.offset) for r in df.select("partition", "offset").collect()
            )
        )
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_until(
            lambda: query.exception() is not None or len(batch_sizes(query)) >= 3,
            120, 0.2, what="three micro-batches with records",
        )  # fmt: skip
        producer.stop()
        if query.exception() is None:
            query.processAllAvailable()
    finally:
        producer.stop()
        query.stop()
    assert query.exception() is None, query.exception()
    ends = [json.loads(p["sources"][0]["endOffset"])[topic] for p in query.recentProgress]
    first_end = {int(p): offset for p, offset in ends[0].items()}
    last_end = {int(p): offset for p, offset in ends[-1].items()}
    assert len(seen) == len(set(seen)), "a record read twice"
    assert sorted(seen) == sorted(
        (p, o) for p in range(6) for o in range(first_end[p], last_end[p])
    )
    assert sum(last_end.values()) - sum(first_end.values()) > 0


@pytest.mark.parametrize(
    "starting", ["latest", None, "json"], ids=["latest", "default", "json-with-minus-one"]
)
def test_a_first_batch_from_latest_is_the_same_every_time_spark_asks(kafka_broker, topic, starting):
    """What Spark asks the source about a query's first micro-batch, asked again after
    more records arrived, as Spark does when it runs the batch and when it runs it again
    after a crash: the same initial offsets, the same (empty) ranges."""
    from onceflow.spark.kafka_source.options import parse_options
    from onceflow.spark.kafka_source.stream_reader import OnceflowStreamReader

    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"old"] * 5, partition=0)
    produce(bootstrap, topic, [b"old"] * 3, partition=1)
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
    if starting == "json":
        options["startingOffsets"] = json.dumps({topic: {"0": -1, "1": 1}})
    elif starting is not None:
        options["startingOffsets"] = starting
    reader = OnceflowStreamReader(parse_options(options, batch=False))
    try:
        initial = reader.initialOffset()
        end = reader.latestOffset(initial, reader.getDefaultReadLimit())
        ranges = [p.range for p in reader.partitions(initial, end)]
        produce(bootstrap, topic, [b"new"] * 4, partition=0)
        produce(bootstrap, topic, [b"new"] * 2, partition=1)
        assert reader.initialOffset() == initial
        again = OnceflowStreamReader(parse_options(options, batch=False))  # after a restart
        assert again.initialOffset() == initial
        assert [p.range for p in again.partitions(again.initialOffset(), end)] == ranges
        again.stop()
    finally:
        reader.stop()
    assert end == {topic: {"0": 5, "1": 3}}
    if starting == "json":  # partition 1 starts at the offset given
        assert [(r.partition, r.start, r.end) for r in ranges] == [(1, 1, 3)]
    else:
        assert ranges == []


def test_available_now_from_latest_reads_nothing_written_before_or_after(kafka_broker, topic):
    """Trigger.AvailableNow with startingOffsets=latest and maxOffsetsPerTrigger: the
    first batch ends at the target (the latest offsets when the query started), reads
    nothing, and nothing follows it, whatever arrives meanwhile."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from onceflow.spark.kafka_source.options import parse_options
    from onceflow.spark.kafka_source.stream_reader import OnceflowStreamReader

    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, [b"old"] * 5, partition=0)
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
               "startingOffsets": "latest", "maxOffsetsPerTrigger": "2"}  # fmt: skip
    reader = OnceflowStreamReader(parse_options(options, batch=False))
    try:
        reader.prepareForTriggerAvailableNow()
        produce(bootstrap, topic, [b"new"] * 3, partition=0)
        initial = reader.initialOffset()
        end = reader.latestOffset(initial, ReadMaxRows(2))
        assert end == {topic: {"0": 5, "1": 0}}
        assert list(reader.partitions(initial, end)) == []
        assert reader.latestOffset(end, ReadMaxRows(2)) == end
    finally:
        reader.stop()
