"""``onceflow console``'s pages over HTTP (Starlette's test client on the real app, a real
broker): what each page shows of the exactly-once machinery, and that bad input, a
missing permission or an unreachable cluster is one line on the page, never a trace, and
that nothing is written without --allow-writes and the page's form token."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from starlette.testclient import TestClient

from onceflow.admin.connect import ClusterSession
from onceflow.console.app import ConsoleSettings, create_app
from onceflow.ports import free_port
from onceflow.testing import unique_name
from tests.integration.console_script import assert_one_line_error, onceflow
from tests.kit.clients import consume, create_topic, produce
from tests.kit.hanging import leave_hanging


def console(bootstrap: str, **options) -> TestClient:
    """The console's app on ``bootstrap``; ``.form_token`` is what its forms carry."""
    session = ClusterSession({"bootstrap.servers": bootstrap, "log_level": 0}, 10)
    settings = ConsoleSettings(session, **options)
    client = TestClient(create_app(settings), follow_redirects=False)
    client.form_token = settings.form_token  # type: ignore[attr-defined]
    return client


@pytest.fixture
def broker(kafka_module_broker):
    return kafka_module_broker


def one_line_error(response, status: int, words: str) -> None:
    assert response.status_code == status, response.text[:500]
    assert "Traceback" not in response.text
    assert words in response.text, response.text[:2000]


def test_every_page_renders(broker, tmp_path):
    topic = unique_name("orders")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce(broker.bootstrap, topic, [b"a", b"b"], partitions=2)
    group = unique_name("readers")
    consume(broker.bootstrap, topic, 2, **{"group.id": group})
    client = console(broker.bootstrap, reports=tmp_path)
    for path in (
        "/",
        f"/topics/{topic}",
        f"/topics/{topic}/messages",
        "/groups",
        "/transactions",
        "/dead-letters",
        "/reports",
        "/health",
    ):
        response = client.get(path)
        assert response.status_code == 200, (path, response.text[:500])
        assert "Traceback" not in response.text
    assert topic in client.get("/").text


def test_control_records_and_aborted_batches_are_marked(broker):
    topic = unique_name("txns")
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
    producer.init_transactions(10)
    for outcome in ("committed", "aborted"):
        producer.begin_transaction()
        producer.produce(topic, f"{outcome} value".encode(), partition=0)
        producer.flush(10)
        (producer.commit_transaction if outcome == "committed" else producer.abort_transaction)(10)
    producer.begin_transaction()
    producer.produce(topic, b"open value", partition=0)
    producer.flush(10)
    client = console(broker.bootstrap)
    everything = client.get(f"/topics/{topic}/messages?isolation=read_uncommitted").text
    assert 'class="record committed"' in everything and "committed value" in everything
    assert 'class="record aborted"' in everything and "aborted value" in everything
    assert 'class="record open"' in everything and "open value" in everything
    assert everything.count('class="control') == 2  # a commit and an abort marker
    assert "commit marker" in everything and "abort marker" in everything
    committed = client.get(f"/topics/{topic}/messages?isolation=read_committed").text
    assert "open value" not in committed  # the fetch stops at the LSO
    assert 'class="record aborted"' in committed  # served, marked: consumers skip it
    page = client.get(f"/topics/{topic}").text
    assert 'aria-label="4 readable, 1 past the LSO"' in page
    producer.abort_transaction(10)


def test_a_group_page_names_the_transaction_its_partition_waits_on(broker):
    topic, group = unique_name("held"), unique_name("held-readers")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"before"], partition=0)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"pending", partition=0)
    producer.flush(10)
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(topic, 0, 0)])
    got = [m for m in reader.consume(10, 3) if m.error() is None]
    assert [m.value() for m in got] == [b"before"]
    reader.commit(asynchronous=False)
    reader.close()
    page = console(broker.bootstrap).get(f"/groups/{group}").text
    assert f"{topic}:0 is held at its last stable offset 1" in page
    assert f"transactional.id <b>{topic}</b>" in page and "(Ongoing, open " in page
    producer.abort_transaction(10)


def test_a_hanging_transaction_is_found_and_aborted(broker):
    topic = unique_name("hanging")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"before"], partition=0)
    start = leave_hanging(broker.bootstrap, topic, 0, f"{topic}-txn")
    produce(broker.bootstrap, topic, [b"after"], partition=0)
    writer = console(broker.bootstrap, allow_writes=True, max_transaction_timeout_min=0)
    page = writer.get("/transactions").text
    assert f"blocks read_committed readers of {topic}:0" in page
    form = {
        "topic": topic,
        "partition": "0",
        "start_offset": str(start),
        "form_token": writer.form_token,
    }
    answer = writer.post("/transactions/abort", data=form)
    assert answer.status_code == 303, answer.text[:500]
    assert "aborted the transaction" in writer.get(answer.headers["location"]).text
    values = [m.value() for m in consume(broker.bootstrap, topic, 2, isolation="read_committed")]
    assert values == [b"before", b"after"]


def test_nothing_is_written_without_allow_writes_or_the_form_token(broker):
    read_only = console(broker.bootstrap)
    refused = read_only.post(
        "/transactions/abort", data={"topic": "t", "partition": "0", "start_offset": "0"}
    )
    one_line_error(refused, 403, "read-only: start it with --allow-writes")
    writer = console(broker.bootstrap, allow_writes=True)
    forged = writer.post(
        "/transactions/abort",
        data={"topic": "t", "partition": "0", "start_offset": "0", "form_token": "x"},
    )
    one_line_error(forged, 403, "the form is stale or from another site")


def test_bad_input_is_one_line_on_the_page(broker):
    topic = unique_name("typed")
    create_topic(broker.bootstrap, topic)
    client = console(broker.bootstrap)
    cases = [
        (f"/topics/{topic}/messages?offset=abc", 400, "offset must be a whole number"),
        (f"/topics/{topic}/messages?offset=-5", 400, "offset must be at least 0"),
        (f"/topics/{topic}/messages?partition=7", 404, f"partition {topic}:7 does not exist"),
        (f"/topics/{topic}/messages?timestamp=yesterday", 400, "expected YYYY-MM-DDTHH:MM"),
        (f"/topics/{topic}/messages?isolation=dirty", 400, "isolation must be read_committed"),
        (f"/topics/{topic}/messages?offset=99", 400, "is outside"),
        ("/topics/no-such-topic", 404, "does not exist"),
        ("/groups/no-such-group", 404, "does not exist"),
        ("/reports/../../etc/passwd", 404, ""),
    ]
    for path, status, words in cases:
        one_line_error(client.get(path), status, words)


def test_an_unreachable_cluster_is_said_on_every_page():
    client = console(f"127.0.0.1:{free_port()}")
    for path in ("/", "/groups", "/transactions"):
        one_line_error(client.get(path), 503, "cannot reach 127.0.0.1:")


def test_a_token_guards_every_page(broker):
    client = console(broker.bootstrap, token="s3cret")
    assert client.get("/").status_code == 401
    assert client.get("/groups?token=wrong").status_code == 401
    entered = client.get("/groups?token=s3cret")
    assert entered.status_code == 303 and "token" not in entered.headers["location"]
    assert client.get("/groups").status_code == 200  # the cookie carries it now
    bearer = console(broker.bootstrap, token="s3cret")
    assert bearer.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert bearer.get("/health").status_code == 200


def test_dead_letters_are_replayed_to_their_source_once(broker):
    source = unique_name("payments")
    dead = f"{source}.dlq"
    create_topic(broker.bootstrap, source, partitions=3)
    create_topic(broker.bootstrap, dead)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for n, partition in enumerate((2, 0, 2)):
        headers = [
            ("onceflow-error", b"ValueError: bad amount"),
            ("onceflow-source", f"{source}/{partition}/{n}".encode()),
            ("trace", b"t1"),
        ]
        producer.produce(dead, f"payment-{n}".encode(), f"k{n}".encode(), headers=headers)
    producer.flush(10)
    writer = console(broker.bootstrap, allow_writes=True)
    listing = writer.get("/dead-letters").text
    assert dead in listing
    page = writer.get(f"/dead-letters/{dead}").text
    assert "ValueError: bad amount" in page and f"{source}:2 @0" in page
    token = {"form_token": writer.form_token}
    first = writer.post(f"/dead-letters/{dead}/replay", data=token)
    assert "replayed 3 records" in writer.get(first.headers["location"]).text
    second = writer.post(f"/dead-letters/{dead}/replay", data=token)
    assert "nothing to replay" in writer.get(second.headers["location"]).text
    replayed = consume(broker.bootstrap, source, 3, isolation="read_committed")
    assert sorted((m.partition(), m.value()) for m in replayed) == [
        (0, b"payment-1"),
        (2, b"payment-0"),
        (2, b"payment-2"),
    ]
    assert all(dict(m.headers()) == {"trace": b"t1"} for m in replayed)  # the errors dropped


def test_reports_are_rendered(broker, tmp_path):
    (tmp_path / "prove.md").write_text("# Proof\n\n| trial | outcome |\n|---|---|\n| 1 | ok |\n")
    (tmp_path / "prove.json").write_text(json.dumps({"verdict": "exactly-once held: 3 kills"}))
    (tmp_path / "heat.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    client = console(broker.bootstrap, reports=tmp_path)
    listing = client.get("/reports").text
    assert "prove.md" in listing and "prove.json" in listing and "heat.png" in listing
    assert "<table>" in client.get("/reports/prove.md").text
    assert "exactly-once held: 3 kills" in client.get("/reports/prove.json").text
    assert client.get("/reports/heat.png").content.startswith(b"\x89PNG")
    assert client.get("/reports/nothing.md").status_code == 404
    assert Path(tmp_path / "prove.md").exists()


def test_a_taken_port_is_one_line_and_exit_1(broker):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = onceflow("console", "--bootstrap", broker.bootstrap, "--port", str(port))
    line = assert_one_line_error(result, 1)
    assert line == f"error: cannot serve on 127.0.0.1:{port}: Address already in use"
