"""``onceflow console`` in a real browser (Debian's Chromium, driven by Playwright), on
onceflow's broker and on the shared 3-node Apache Kafka cluster: every page loads without
a console error; a read_committed consumer stuck behind a hanging transaction is shown
with what holds it, and aborting it from the page lets the consumer go on; a dead-letter
replay from the page lands once.

The console runs as a user runs it (the installed script, ``--port 0``, its first line
naming the URL). With ``ONCEFLOW_CONSOLE_SCREENSHOTS=DIR`` the onceflow run saves a
screenshot of each page there (``make console-screenshots`` writes docs/console-*.png).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.kit.clients import consume, create_topic, produce
from tests.kit.console import running_console
from tests.kit.engines import ENGINES, ONCEFLOW, Engine
from tests.kit.hanging import leave_hanging
from tests.kit.wait import wait_until

CHROMIUM = "/usr/bin/chromium"
# As root, in a closed network: no sandbox, no background calls home.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = os.environ.get("ONCEFLOW_CONSOLE_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if shutil.which(CHROMIUM) is None:
        pytest.fail("chromium not found: make test installs Debian's package", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def writer(engine: Engine) -> tuple[str, ...]:
    return ("--bootstrap", engine.bootstrap, "--allow-writes")


class Visitor:
    """A browser tab that fails the test on any console error or page error."""

    def __init__(self, browser: object, base: str) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
        self.base = base
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def open(self, path: str, shot: str | None = None) -> str:
        response = self.page.goto(self.base + path)
        assert response is not None and response.status == 200, (path, response and response.status)
        assert not self.errors, (path, self.errors)
        if shot and SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(SHOTS) / f"console-{shot}.png"), full_page=True)
        return self.page.content()


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_every_page_loads_without_a_console_error(browser, engine: Engine, tmp_path):
    topic, dead, group = engine.input, f"{engine.input}.dlq", engine.group
    create_topic(engine.bootstrap, topic, 3)
    create_topic(engine.bootstrap, dead, 1)
    produce(engine.bootstrap, topic, [f"order-{n}".encode() for n in range(30)], partitions=3)
    dead_letter(engine.bootstrap, dead, topic, 2)
    reader = GroupReader(engine.bootstrap, topic, group)
    wait_until(lambda: len(reader.values) == 30, 60, what="the group read the topic")
    reader.stop()
    pending = Producer({"bootstrap.servers": engine.bootstrap, "transactional.id": engine.txn_id})
    pending.init_transactions(30)
    for end in (pending.commit_transaction, pending.abort_transaction):  # markers to show
        pending.begin_transaction()
        pending.produce(topic, f"in a transaction, then {end.__name__}".encode(), partition=1)
        end(30)
    pending.begin_transaction()
    pending.produce(topic, b"in an open transaction", partition=1)
    pending.flush(30)
    (tmp_path / "proof.md").write_text(
        "# exactly-once held\n\n| trial | outcome |\n|---|---|\n| 1 | ok |\n"
    )
    with running_console(*writer(engine), "--reports", str(tmp_path)) as base:
        visitor = Visitor(browser, base)
        shots = engine.name == ONCEFLOW
        pages = [
            ("/", "cluster"),
            (f"/topics/{topic}", "topic"),
            (f"/topics/{topic}/messages?partition=1&isolation=read_uncommitted", "records"),
            ("/groups", "groups"),
            (f"/groups/{group}", "group"),
            ("/transactions", "transactions"),
            ("/dead-letters", "dead-letters"),
            (f"/dead-letters/{dead}", "dead-letter"),
            ("/reports", "reports"),
            ("/reports/proof.md", None),
        ]
        for path, shot in pages:
            visitor.open(path, shot if shots else None)
        visitor.page.wait_for_timeout(3500)  # a live refresh of the last page, error-free
        assert not visitor.errors, visitor.errors
    pending.abort_transaction(30)


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_aborting_a_hanging_transaction_from_the_page_frees_a_stuck_consumer(
    browser, engine: Engine
):
    topic, group = engine.input, engine.group
    create_topic(engine.bootstrap, topic, 1)
    produce(engine.bootstrap, topic, [b"before"], partition=0)
    start = leave_hanging(engine.bootstrap, topic, 0, f"{engine.txn_id}-hanging")
    produce(engine.bootstrap, topic, [b"after"], partition=0)
    reader = GroupReader(engine.bootstrap, topic, group)
    try:
        wait_until(
            lambda: reader.values == [b"before"] and reader.committed,
            60,
            what="the reader committed what it may read",
        )
        with running_console(*writer(engine), "--max-transaction-timeout", "0") as base:
            visitor = Visitor(browser, base)
            page = visitor.open(
                f"/groups/{group}", "stuck-group" if engine.name == ONCEFLOW else None
            )
            assert f"{topic}:0 is held at its last stable offset {start}" in page
            assert "a hanging transaction" in page
            visitor.open("/transactions", "hanging" if engine.name == ONCEFLOW else None)
            row = visitor.page.locator("tr.hanging", has_text=f"{topic}:0")
            row.get_by_role("button", name="Abort").click()
            visitor.page.wait_for_load_state()
            assert "aborted the transaction" in visitor.page.content()
            assert not visitor.errors, visitor.errors
            wait_until(
                lambda: reader.values == [b"before", b"after"],
                60,
                what="the reader got past the aborted transaction",
            )
            wait_until(
                lambda: "is held at" not in visitor.open(f"/groups/{group}"),
                30,
                what="the group page no longer shows it held",
            )
    finally:
        reader.stop()


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_dead_letter_replay_from_the_page_lands_once(browser, engine: Engine):
    source, dead = engine.input, f"{engine.input}.dlq"
    create_topic(engine.bootstrap, source, 2)
    create_topic(engine.bootstrap, dead, 1)
    dead_letter(engine.bootstrap, dead, source, 4)
    with running_console(*writer(engine)) as base:
        visitor = Visitor(browser, base)
        page = visitor.open(f"/dead-letters/{dead}")
        assert page.count("ValueError: amount below zero") == 4
        for expected in ("replayed 4 records", "nothing to replay"):
            visitor.page.get_by_role("button", name="Replay to their source topics").click()
            visitor.page.wait_for_load_state()
            assert expected in visitor.page.content()
        assert not visitor.errors, visitor.errors
    replayed = consume(engine.bootstrap, source, 4, isolation="read_committed")
    assert sorted(m.value() for m in replayed) == [f"payment-{n}".encode() for n in range(4)]
    assert sorted({m.partition() for m in replayed}) == [0, 1]


def dead_letter(bootstrap: str, topic: str, source: str, count: int) -> None:
    """``count`` records as the Runner dead-letters them (error and source headers)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(count):
        headers = [
            ("onceflow-error", b"ValueError: amount below zero"),
            ("onceflow-source", f"{source}/{n % 2}/{n}".encode()),
        ]
        producer.produce(topic, f"payment-{n}".encode(), f"k{n}".encode(), headers=headers)
    assert producer.flush(30) == 0


class GroupReader:
    """A read_committed subscribe() consumer that commits after every record it gets."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.values: list[bytes] = []
        self.committed = False
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self._consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            self.values.append(message.value())
            self._consumer.commit(message, asynchronous=False)
            self.committed = True

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()
