"""The demo pipeline end to end over SASL_SSL with SCRAM and ACLs.

A broker with the StandardAuthorizer and ``super.users=User:admin``; every client of the
pipeline authenticates as ``alice`` (SCRAM-SHA-512 over TLS) and gets only the ACLs it
needs, granted by admin through confluent-kafka's AdminClient:

shop (idempotent producer) -> sec-raw -> patterns Runner (exactly_once, db_offsets, outbox
in SQLite) -> relay (Kafka transactions) -> sec-orders -> Spark: onceflow source ->
onceflow-database sink (revenue per store) and onceflow-kafka sink (sec-confirmations).

Each component gets the security settings through its own pass-through (RunnerConfig's
consumer_config/producer_config, RelayConfig.producer_config, Spark's ``kafka.*``
options). The outputs are audited by onceflow verify over SASL_SSL, as a library (a config
dict) and as the command line (-X settings): every order exactly once, in order per store.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from onceflow.db import connect
from onceflow.patterns.outbox import Outbox
from onceflow.patterns.relay import Relay, RelayConfig
from onceflow.patterns.runner import Runner, RunnerConfig
from onceflow.verify.run import run_verify
from tests.integration.security.secured import (
    ADMIN,
    ALICE,
    BOB,
    allow,
    client_config,
    create_acls,
    make_tls_files,
    start_authorizing_broker,
)
from tests.spark.sink_helpers import revenue_rows

pytestmark = [pytest.mark.spark]

TIMEOUT = 30
ORDERS = 120
STORES = ["s1", "s2", "s3", "s4"]
RAW, ORDERS_TOPIC, CONFIRMATIONS = "sec-raw", "sec-orders", "sec-confirmations"


def grant(resource: ResourceType, prefix: str) -> AclBinding:
    """Everything on resources named ``prefix...``, for alice."""
    return allow(
        "User:alice", resource, prefix, AclOperation.ALL, pattern=ResourcePatternType.PREFIXED
    )


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("secured-pipeline")
    tls = make_tls_files(directory / "certificates")
    broker = start_authorizing_broker(directory / "broker", tls)
    admin = AdminClient(client_config(broker, "SASL_SSL", tls, "SCRAM-SHA-512", ADMIN))
    topics = [NewTopic(name, 2, 1) for name in (RAW, ORDERS_TOPIC, CONFIRMATIONS)]
    for future in admin.create_topics(topics).values():
        future.result(TIMEOUT)
    acls = [
        grant(ResourceType.TOPIC, "sec-"),
        grant(ResourceType.TOPIC, "__onceflow_sink_markers."),  # the Kafka sink's
        grant(ResourceType.GROUP, "sec-"),
        grant(ResourceType.GROUP, "onceflow-"),  # Spark readers, marker readers
        grant(ResourceType.TRANSACTIONAL_ID, "sec-"),  # the relay
        grant(ResourceType.TRANSACTIONAL_ID, "onceflow-"),  # the Kafka sink's tasks
    ]
    create_acls(admin, acls, TIMEOUT)
    yield broker, tls
    broker.stop()


def alice(secured) -> dict[str, str]:
    broker, tls = secured
    return client_config(broker, "SASL_SSL", tls, "SCRAM-SHA-512", ALICE)


def produce_orders(conf: dict[str, str]) -> list[dict]:
    producer = Producer({**conf, "enable.idempotence": True, "linger.ms": 5})
    orders = []
    for number in range(ORDERS):
        store = STORES[number % len(STORES)]
        order = {"order_id": f"o{number}", "store": store, "amount": number % 9 + 1}
        orders.append(order)
        producer.produce(RAW, json.dumps(order).encode(), key=store.encode())
    assert producer.flush(TIMEOUT) == 0
    return orders


def run_runner(conf: dict[str, str], database_url: str) -> None:
    def handle(record, ctx) -> None:
        order = record.value
        ctx.tx.execute(
            "INSERT INTO accepted (order_id, store) VALUES (?, ?)",
            (order["order_id"], order["store"]),
        )
        ctx.produce(ORDERS_TOPIC, json.dumps(order).encode(), key=order["store"])

    database = connect(database_url)
    database.execute("CREATE TABLE IF NOT EXISTS accepted (order_id TEXT PRIMARY KEY, store TEXT)")
    database.close()
    config = RunnerConfig(
        bootstrap_servers=conf["bootstrap.servers"],
        group_id="sec-runner",
        topics=[RAW],
        processing_guarantee="exactly_once",
        pattern="db_offsets",
        database_url=database_url,
        outbox=True,
        idle_exit_s=3.0,
        consumer_config=conf,
        producer_config=conf,
    )
    stats = Runner(config, handle).run()
    assert stats.processed == ORDERS, stats


def run_relay(conf: dict[str, str], database_url: str) -> None:
    database = connect(database_url)
    try:
        relay = Relay(
            database,
            Outbox(database),
            RelayConfig(
                bootstrap_servers=conf["bootstrap.servers"],
                transactional_id="sec-relay",
                producer_config=conf,
            ),
        )
        assert relay.run(lambda: False, idle_exit_s=3.0) == ORDERS
    finally:
        database.close()


def run_spark(spark, conf: dict[str, str], database_url: str, checkpoints: Path) -> None:
    from pyspark.sql import functions as F

    kafka = {f"kafka.{key}": value for key, value in conf.items()}
    orders = (
        spark.readStream.format("onceflow")
        .options(**kafka)
        .option("subscribe", ORDERS_TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "60")  # two micro-batches
        .load()
        .select(
            F.from_json(
                F.col("value").cast("string"), "order_id STRING, store STRING, amount LONG"
            ).alias("order")
        )
        .select("order.*")
    )
    revenue = (
        revenue_rows(orders)
        .writeStream.format("onceflow-database")
        .option("url", database_url)
        .option("table", "store_revenue")
        .option("mode", "accumulate")
        .option("keyColumns", "store")
        .option("sinkId", "sec-revenue")
        .option("checkpointLocation", str(checkpoints / "revenue"))
        .trigger(availableNow=True)
        .start()
    )
    confirmations = (
        orders.select(
            F.col("store").alias("key"),
            F.to_json(F.struct("order_id", "store", F.lit("confirmed").alias("status"))).alias(
                "value"
            ),
        )
        .writeStream.format("onceflow-kafka")
        .options(**kafka)
        .option("topic", CONFIRMATIONS)
        .option("sinkId", "sec-confirmations")
        .option("checkpointLocation", str(checkpoints / "confirmations"))
        .trigger(availableNow=True)
        .start()
    )
    for query in (revenue, confirmations):
        query.awaitTermination(180)
        assert query.exception() is None, query.exception()


def test_pipeline_over_sasl_ssl_with_scram_and_acls(secured, spark, tmp_path):
    conf = alice(secured)
    app_db = f"sqlite:///{tmp_path / 'app.db'}"
    results_db = f"sqlite:///{tmp_path / 'results.db'}"

    orders = produce_orders(conf)
    run_runner(conf, app_db)
    run_relay(conf, app_db)
    run_spark(spark, conf, results_db, tmp_path / "checkpoints")

    # onceflow verify, as a library, with the same settings: every order exactly once.
    report = run_verify(
        conf,
        ORDERS_TOPIC,
        id_field="order_id",
        key_field="store",
        output_topic=CONFIRMATIONS,
    )
    assert report.ok, report.to_json()
    assert report.input.events == ORDERS and report.sinks[0].events == ORDERS
    # ... and as the command line with -X settings (it reads transaction markers with
    # onceflow's own protocol client, over SASL_SSL too).
    options = [item for key, value in conf.items() if key != "bootstrap.servers"
               for item in ("-X", f"{key}={value}")]  # fmt: skip
    verified = subprocess.run(
        [sys.executable, "-m", "onceflow", "verify", "--bootstrap", conf["bootstrap.servers"],
         *options, "--input", RAW, "--output-topic", ORDERS_TOPIC, "--id-field", "order_id",
         "--key-field", "store"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr

    with sqlite3.connect(tmp_path / "app.db") as connection:
        assert connection.execute("SELECT count(*) FROM accepted").fetchone() == (ORDERS,)
    expected: dict[str, list[int]] = {}
    for order in orders:
        expected.setdefault(order["store"], [0, 0])
        expected[order["store"]][0] += order["amount"]
        expected[order["store"]][1] += 1
    with sqlite3.connect(tmp_path / "results.db") as connection:
        rows = connection.execute("SELECT store, revenue, orders FROM store_revenue").fetchall()
    assert {store: [revenue, count] for store, revenue, count in rows} == expected


def test_a_principal_without_acls_can_neither_see_nor_write(secured):
    broker, tls = secured
    conf = client_config(broker, "SASL_SSL", tls, "SCRAM-SHA-512", BOB)
    admin = AdminClient(conf)
    metadata = admin.list_topics(ORDERS_TOPIC, timeout=TIMEOUT).topics[ORDERS_TOPIC]
    assert metadata.error is not None
    assert metadata.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert ORDERS_TOPIC not in admin.list_topics(timeout=TIMEOUT).topics
    errors = []
    producer = Producer({**conf, "message.timeout.ms": 5000})
    producer.produce(ORDERS_TOPIC, b"forged", on_delivery=lambda error, _: errors.append(error))
    producer.flush(TIMEOUT)
    assert [error.code() for error in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
