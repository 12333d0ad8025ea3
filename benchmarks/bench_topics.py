"""Topics for the benchmarks (they run as scripts, so this folder is on ``sys.path``)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def create_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    """Create the topics and wait until metadata shows all their partitions."""
    names = list(names)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    for name in names:
        while True:
            meta = admin.list_topics(name, timeout=10).topics.get(name)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name} did not appear")
            time.sleep(0.1)


def delete_topics(bootstrap: str, names: Iterable[str]) -> None:
    """Delete the topics; a failure is ignored (the broker goes away with the run)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for future in admin.delete_topics(list(names)).values():
            future.result(30)
    except KafkaException:
        pass
