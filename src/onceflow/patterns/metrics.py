"""The Runner's counters as Prometheus metrics (needs ``pip install onceflow[metrics]``).

::

    from prometheus_client import start_http_server
    from onceflow.patterns.metrics import expose_metrics

    runner = Runner(config, handle)
    expose_metrics(runner)  # onceflow_runner_* on the default registry
    start_http_server(9108)
    runner.run()

Counters are read from ``runner.stats`` at each scrape, labelled with the group id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from onceflow.configuration_error import ConfigurationError

if TYPE_CHECKING:
    from onceflow.patterns.runner import Runner

COUNTERS = {
    "records": "Records consumed (again after a rewind)",
    "batches": "Batches consumed",
    "processed": "Records the handler completed",
    "commits": "Batches whose offsets were committed",
    "retries": "Batches rolled back and read again",
    "dead_lettered": "Records sent to the dead-letter topic",
    "duplicates_skipped": "Records the inbox skipped as duplicates",
    "aborted": "Kafka transactions aborted",
    "commit_failures": "Offset commits that failed",
}
GAUGES = {
    "lag": "Records between the owned partitions' positions and their ends",
    "owned_partitions": "Partitions the runner owns",
}


class RunnerCollector:
    """A prometheus_client collector reading one Runner's ``stats``."""

    def __init__(self, runner: Runner, prefix: str = "onceflow_runner") -> None:
        self.runner = runner
        self.prefix = prefix

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        stats = self.runner.stats
        group = self.runner.config.group_id
        for name, help_text in COUNTERS.items():
            family = CounterMetricFamily(f"{self.prefix}_{name}", help_text, labels=["group"])
            family.add_metric([group], getattr(stats, name))
            yield family
        for name, help_text in GAUGES.items():
            value = getattr(stats, name)
            family = GaugeMetricFamily(f"{self.prefix}_{name}", help_text, labels=["group"])
            family.add_metric([group], float("nan") if value is None else value)
            yield family


def expose_metrics(
    runner: Runner, registry: Any = None, prefix: str = "onceflow_runner"
) -> RunnerCollector:
    """Register the runner's counters with ``registry`` (default: prometheus_client's)."""
    try:
        from prometheus_client import REGISTRY
    except ImportError:
        raise ConfigurationError(
            "Prometheus metrics need prometheus-client: pip install 'onceflow[metrics]'"
        ) from None
    collector = RunnerCollector(runner, prefix)
    (registry if registry is not None else REGISTRY).register(collector)
    return collector
