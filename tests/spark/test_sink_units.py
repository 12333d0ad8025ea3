"""Pure logic of the sinks: replay decisions, offset log parsing, SQL, options."""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from onceflow.crash_points import spark_step_armed
from onceflow.spark.database_sink.checkpoint import CheckpointError, batch_offsets, local_path
from onceflow.spark.database_sink.commit import OffsetConflict, plan_batch
from onceflow.spark.database_sink.direct import prepare_rows
from onceflow.spark.database_sink.ledger import LastCommit, TaskWrite, task_write
from onceflow.spark.database_sink.options import DatabaseSinkError, parse_database_options
from onceflow.spark.database_sink.tables import SinkTable, SinkTableError
from onceflow.spark.kafka_sink.options import KafkaSinkError, parse_kafka_options
from onceflow.sql_dialect import Dialect

A0, A1 = ("a", 0), ("a", 1)


def test_plan_batch_commits_new_offsets():
    assert plan_batch({}, None, {A0: 10})
    assert plan_batch({A0: 10}, {A0: 10}, {A0: 20})
    assert plan_batch({A0: 10, A1: 5}, {A0: 10, A1: 5}, {A0: 10, A1: 9})  # one grows


def test_plan_batch_replay_is_a_no_op():
    assert not plan_batch({A0: 20}, {A0: 10}, {A0: 20})  # same batch again
    assert not plan_batch({A0: 20, A1: 7}, None, {A0: 10, A1: 7})  # deleted checkpoint
    assert not plan_batch({A0: 20}, {A1: 0}, {A0: 20, A1: 0})  # new empty partition


def test_plan_batch_refuses_overlaps():
    with pytest.raises(OffsetConflict, match="a-0"):
        plan_batch({A0: 20}, {A0: 10}, {A0: 30})  # straddles the stored offset
    with pytest.raises(OffsetConflict):
        plan_batch({A0: 20, A1: 5}, None, {A0: 10, A1: 9})  # behind on one, ahead on other


def test_offset_log_parsing(tmp_path):
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    (offsets / "3").write_text('v1\n{"batchWatermarkMs":0}\n{"t":{"0":5,"1":7}}\n-\n')
    (offsets / "4").write_text('v1\n{"batchWatermarkMs":0}\n12\n')
    assert batch_offsets(str(tmp_path), 3) == {("t", 0): 5, ("t", 1): 7}
    assert batch_offsets(f"file://{tmp_path}", 4) is None  # not a Kafka source
    with pytest.raises(CheckpointError):
        batch_offsets(str(tmp_path), 5)
    with pytest.raises(CheckpointError, match="local"):
        local_path("s3a://bucket/cp")


def test_crash_point_matching():
    armed = spark_step_armed
    assert armed("database.after_commit@2", "database.after_commit", 2, 0)
    assert not armed("database.after_commit@2", "database.after_commit", 1, 0)
    assert armed("x@1/0,kafka.after_task_commit@2/1", "kafka.after_task_commit", 2, 1)
    assert not armed("kafka.after_task_commit@2/1", "kafka.after_task_commit", 2, 0)


SCHEMA = StructType(
    [
        StructField("store", StringType()),
        StructField("revenue", LongType()),
        StructField("orders", LongType()),
    ]
)


def test_sink_table_modes():
    table = SinkTable.build("store_revenue", SCHEMA, "accumulate", ("store",), Dialect.POSTGRESQL)
    sql = table.promote_sql(2)
    assert "SUM(" in sql and "ON CONFLICT" in sql and "COALESCE(onceflow_target" in sql
    assert "ROW_NUMBER()" in SinkTable.build(
        "t", SCHEMA, "upsert", ("store",), Dialect.SQLITE
    ).promote_sql(1)
    with pytest.raises(SinkTableError, match="keyColumns"):
        SinkTable.build("t", SCHEMA, "upsert", (), Dialect.SQLITE)
    with pytest.raises(SinkTableError, match="accumulate"):
        SinkTable.build("t", SCHEMA, "accumulate", ("revenue",), Dialect.SQLITE)  # store is text
    with pytest.raises(SinkTableError):
        SinkTable.build("x; drop table y", SCHEMA, "append", (), Dialect.SQLITE)


def test_options():
    with pytest.raises(DatabaseSinkError, match="checkpointLocation"):
        parse_database_options({"url": "sqlite:///x", "table": "t", "sinkid": "s"}, True)
    with pytest.raises(DatabaseSinkError, match="unknown"):
        parse_database_options({"url": "sqlite:///x", "table": "t", "tabel": "t"}, False)
    with pytest.raises(KafkaSinkError, match=r"transactional\.id"):
        parse_kafka_options(
            {"kafka.bootstrap.servers": "h:1", "sinkid": "s", "kafka.transactional.id": "x"}, True
        )
    options = parse_kafka_options({"kafka.bootstrap.servers": "h:1", "sinkId": "s"}, True)
    assert options.producer_config["partitioner"] == "murmur2_random"


def test_query_name_reaches_the_sinks_as_an_option_and_is_accepted():
    # DataStreamWriter.queryName(...) arrives in the sink's options as "queryName".
    common = {"sinkId": "s", "checkpointLocation": "/cp", "queryName": "orders"}
    parse_database_options({"url": "sqlite:///x", "table": "t", **common}, True)
    parse_kafka_options({"kafka.bootstrap.servers": "h:1", **common}, True)


def test_strategy_and_lock_timeout_options():
    base = {"url": "sqlite:///x", "table": "t", "sinkId": "s", "checkpointLocation": "/cp"}
    assert parse_database_options(base, True).strategy == "direct"
    assert parse_database_options({**base, "STRATEGY": "Staged"}, True).strategy == "staged"
    with pytest.raises(DatabaseSinkError, match=r"^strategy 'atomic': use direct .* or staged"):
        parse_database_options({**base, "strategy": "atomic"}, True)
    with pytest.raises(DatabaseSinkError, match=r"^lockTimeoutMs must be positive"):
        parse_database_options({**base, "lockTimeoutMs": "0"}, True)


def test_task_write_decision():
    last = LastCommit("q1", 4)
    assert task_write(None, "q1", 0, new_sink=True) is TaskWrite.DIRECT  # nothing stored yet
    assert task_write(None, "q1", 3) is TaskWrite.STAGE  # offsets of no batch of a query
    assert task_write(last, "q2", 5) is TaskWrite.STAGE  # another query (new checkpoint)
    assert task_write(last, "q1", 5) is TaskWrite.DIRECT  # the next batch of the same query
    assert task_write(last, "q1", 4) is TaskWrite.SKIP  # a replay of a committed batch
    assert task_write(last, "q1", 7) is TaskWrite.STAGE  # not where the database ends


def _batch(rows: list[tuple]):
    import pyarrow as pa

    store, revenue, orders = zip(*rows, strict=True)
    return pa.record_batch(
        [pa.array(store), pa.array(revenue, pa.int64()), pa.array(orders, pa.int64())],
        names=["store", "revenue", "orders"],
    )


def test_direct_rows_are_merged_per_task_and_sorted_by_key():
    batches = [_batch([("b", 5, 1), ("a", 1, 1)]), _batch([("b", 2, 1), ("c", None, 1)])]
    accumulate = SinkTable.build("t", SCHEMA, "accumulate", ("store",), Dialect.SQLITE)
    assert prepare_rows(accumulate, iter(batches)) == (
        4,
        [("a", 1, 1), ("b", 7, 2), ("c", None, 1)],
    )
    upsert = SinkTable.build("t", SCHEMA, "upsert", ("store",), Dialect.POSTGRESQL)
    assert prepare_rows(upsert, iter(batches))[1] == [("a", 1, 1), ("b", 2, 1), ("c", None, 1)]
    append = SinkTable.build("t", SCHEMA, "append", (), Dialect.SQLITE)
    assert prepare_rows(append, iter(batches))[1] == [
        ("b", 5, 1), ("a", 1, 1), ("b", 2, 1), ("c", None, 1)
    ]  # fmt: skip
    assert prepare_rows(append, iter([])) == (0, [])


def test_direct_insert_sql():
    accumulate = SinkTable.build("t", SCHEMA, "accumulate", ("store",), Dialect.SQLITE)
    sql = accumulate.insert_sql()
    assert 'ON CONFLICT ("store") DO UPDATE SET' in sql
    assert '"revenue" = COALESCE(onceflow_target."revenue", 0) + COALESCE(excluded' in sql
    upsert = SinkTable.build("t", SCHEMA, "upsert", ("store",), Dialect.SQLITE).insert_sql()
    assert '"revenue" = excluded."revenue"' in upsert
    assert (
        "ON CONFLICT" not in SinkTable.build("t", SCHEMA, "append", (), Dialect.SQLITE).insert_sql()
    )
