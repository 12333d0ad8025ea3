"""Every API the broker serves, at every version Kafka 3.9 serves it (the reference of
docs/compatibility.md), but for the listed versions Kafka 4.0 removed."""

from __future__ import annotations

from kio.schema.index import api_key_map

from onceflow.broker.apis import supported_apis
from tests.kafka_39_apis import KAFKA_39_VERSIONS, REMOVED_NOT_SERVED


def served() -> dict[int, tuple[int, int]]:
    return {key: (low, high) for key, _, low, high in supported_apis()}


def test_every_kafka_39_version_of_a_served_api_is_served_but_the_listed_removed_ones():
    missing = {}
    for key, (low, high) in served().items():
        if key not in KAFKA_39_VERSIONS:
            continue
        kafka_low, kafka_high = KAFKA_39_VERSIONS[key]
        absent = [v for v in range(kafka_low, kafka_high + 1) if not low <= v <= high]
        if absent:
            missing[key] = absent
    expected = {key: list(versions) for key, versions in REMOVED_NOT_SERVED.items()}
    assert missing == expected


def test_served_apis_are_kafka_apis_and_newer_versions_only_extend_kafka_39():
    for key, (_, high) in served().items():
        assert key in api_key_map
        if key in KAFKA_39_VERSIONS:
            assert high >= KAFKA_39_VERSIONS[key][1], api_key_map[key]


def test_list_offsets_serves_v8_and_v9():
    assert served()[2] == (0, 9)
