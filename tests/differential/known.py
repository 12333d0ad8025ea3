"""Every difference from Apache Kafka the differential tests know about, each with the
docs/compatibility.md entry that explains it ("Differences found by the differential
tests"). A scenario lists the ids it shows; the generated runs accept any of them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Known:
    id: str
    apis: tuple[int, ...]
    paths: str  # a regex over the flattened response paths that may differ
    doc: str  # the anchor of the entry in docs/compatibility.md
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.paths))


TOPIC_CONFIGS_39 = (
    r"configs\[name=(errors\.deadletterqueue\.group\.enable|max\.decompressed\.message\.bytes"
    r"|remote\.copy\.lag\.bytes|remote\.copy\.lag\.ms|message\.downconversion\.enable"
    r"|message\.format\.version|message\.timestamp\.difference\.max\.ms)\]"
    r"|configs\[name=message\.timestamp\.after\.max\.ms\]\.value"
    r"|configs\[name=min\.insync\.replicas\]\.config_source"
)

ENTRIES: list[Known] = [
    Known("topic-configs-3.9", (19, 32), TOPIC_CONFIGS_39, "topic-configs-are-kafka-39s"),
]

KNOWN: dict[str, Known] = {entry.id: entry for entry in ENTRIES}
