"""What the broker counts as it serves requests, for its Prometheus metrics.

Kept always (an increment or two per request and per partition written or read); served
only with ``metrics.port`` set (``broker/metrics_server.py``). The names the counters get
are Kafka's (``broker/metrics_families.py``).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass

from onceflow.protocol.codec import api_name
from onceflow.timings import Timings


@functools.cache
def request_name(api_key: int) -> str:
    """Kafka's name of an API, as its request metrics are tagged: ``Produce``,
    ``InitProducerId``."""
    return "".join(word.capitalize() for word in api_name(api_key).split("_"))


@dataclass(slots=True)
class TopicCounters:
    """Kafka's BrokerTopicMetrics of one topic (or of all: the ``None`` topic)."""

    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    produce_requests: int = 0
    fetch_requests: int = 0
    failed_produce_requests: int = 0
    failed_fetch_requests: int = 0


class BrokerMetrics:
    def __init__(self) -> None:
        self.topics: defaultdict[str | None, TopicCounters] = defaultdict(TopicCounters)
        self.requests: defaultdict[tuple[str, int], int] = defaultdict(int)  # (api, version)
        self.request_times: defaultdict[str, Timings] = defaultdict(Timings)  # api -> seconds

    def request(self, api_key: int, version: int, seconds: float) -> None:
        """A request answered (or, without an answer, handled) ``seconds`` after it was
        read: Kafka's RequestsPerSec and TotalTimeMs."""
        name = request_name(api_key)
        self.requests[name, version] += 1
        self.request_times[name].observe(seconds)

    def _of(self, topic: str | None) -> tuple[TopicCounters, ...]:
        """The counters of ``topic`` and of all topics (None: a topic that does not exist,
        counted for all topics only, so that made-up names make no series)."""
        every = self.topics[None]
        return (every,) if topic is None else (self.topics[topic], every)

    def produced(self, topic: str, records: int, size: int) -> None:
        for counters in self._of(topic):
            counters.messages_in += records
            counters.bytes_in += size
            counters.produce_requests += 1

    def produce_failed(self, topic: str | None) -> None:
        for counters in self._of(topic):
            counters.produce_requests += 1
            counters.failed_produce_requests += 1

    def fetched(self, topic: str | None, size: int, failed: bool) -> None:
        """A topic's share of a fetch response."""
        for counters in self._of(topic):
            counters.bytes_out += size
            counters.fetch_requests += 1
            counters.failed_fetch_requests += failed

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's series end (Kafka removes its per-topic MBeans)."""
        self.topics.pop(topic, None)
