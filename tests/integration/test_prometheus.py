"""A real Prometheus server (Debian's ``prometheus``) scrapes the broker's ``metrics.port``
and answers queries by Kafka's metric names; every panel of docs/grafana-dashboard.json
returns data."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from onceflow.ports import free_port
from onceflow.testing import unique_name
from tests.kit.clients import consume, create_topic, produce
from tests.kit.wait import wait_until

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
SCRAPE = "1s"


@pytest.fixture(scope="module")
def kafka_module_broker_config() -> dict[str, str]:
    # Chosen when the broker starts, not when the module is imported: every xdist worker
    # imports it at collection, and a port chosen then is no longer reserved
    # (onceflow.ports.RESERVED_S) when this module runs minutes later.
    return {"metrics.port": str(free_port())}


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, kafka_module_broker_config: dict[str, str]
) -> Iterator[str]:
    """Prometheus scraping the broker every second; its HTTP API's base URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus not found: make test installs Debian's package", pytrace=False)
    home = tmp_path_factory.mktemp("prometheus")
    metrics_port = kafka_module_broker_config["metrics.port"]
    (home / "prometheus.yml").write_text(
        f"global:\n  scrape_interval: {SCRAPE}\n  evaluation_interval: {SCRAPE}\n"
        f"scrape_configs:\n  - job_name: onceflow\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(home / "prometheus.log", "w") as log:
        server = subprocess.Popen(
            [binary, f"--config.file={home / 'prometheus.yml'}",
             f"--storage.tsdb.path={home / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        try:
            wait_until(lambda: _ready(url), 60, what="Prometheus ready")
            yield url
        finally:
            server.terminate()
            server.wait(30)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def query(url: str, expression: str) -> list[dict]:
    address = f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(address, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def scraped_since(url: str, seconds: int) -> bool:
    """The broker was scraped successfully at least ``seconds`` times in the last minute."""
    found = query(url, 'count_over_time(up{job="onceflow"}[1m])')
    return bool(found) and float(found[0]["value"][1]) >= seconds


@pytest.fixture(scope="module")
def traffic(kafka_module_broker, prometheus) -> dict[str, str]:
    """Records produced and read, a transaction left open: something for every panel."""
    bootstrap = kafka_module_broker.bootstrap
    topic, pending = unique_name("scraped"), unique_name("pending")
    create_topic(bootstrap, topic, partitions=2)
    create_topic(bootstrap, pending)
    produce(bootstrap, topic, [b"r" * 50] * 40, partitions=2)
    consume(bootstrap, topic, 40, **{"group.id": unique_name("reader")})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": pending})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(pending, b"open", partition=0)
    producer.flush(10)
    committed = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    committed.init_transactions(10)
    committed.begin_transaction()
    committed.produce(topic, b"done", partition=0)
    committed.commit_transaction(10)
    # rates need two samples after the traffic in their window
    wait_until(lambda: scraped_since(prometheus, 5), 60, what="five scrapes")
    return {"topic": topic, "pending": pending, "producer": producer}  # type: ignore[dict-item]


def test_prometheus_answers_by_kafka_names(prometheus, traffic):
    topic = traffic["topic"]
    messages = query(
        prometheus, f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}}'
    )
    assert float(messages[0]["value"][1]) == 41  # 40 plain, 1 in a committed transaction
    ends = query(prometheus, f'kafka_log_log_logendoffset{{topic="{topic}"}}')
    assert sorted(float(series["value"][1]) for series in ends) == [20, 22]  # + commit marker
    unstable = query(
        prometheus, f'onceflow_log_partition_unstable_records{{topic="{traffic["pending"]}"}}'
    )
    assert float(unstable[0]["value"][1]) == 1
    produce_p99 = query(
        prometheus, 'kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}'
    )
    assert produce_p99 and float(produce_p99[0]["value"][1]) > 0


def test_every_dashboard_panel_returns_data(prometheus, traffic):
    dashboard = json.loads(DASHBOARD.read_text())
    empty = [
        f"{panel['title']}: {target['expr']}"
        for panel in dashboard["panels"]
        for target in panel["targets"]
        if not query(prometheus, target["expr"])
    ]
    assert not empty, "panels without data:\n" + "\n".join(empty)
    assert len(dashboard["panels"]) >= 12
