"""Every difference from Apache Kafka the differential tests know about. Each has an entry
in docs/compatibility.md ("Differences found by the differential tests") under its id in
bold. A scenario lists the ids it shows (and fails if one no longer happens); the
generated runs accept any of them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Known:
    id: str
    apis: tuple[int, ...]
    paths: str  # a regex over the flattened response paths that may differ
    when: str | None = None  # applies only to a response where a path matching this differs
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.paths))

    def applies(self, paths: list[str]) -> bool:
        return self.when is None or any(re.search(self.when, path) for path in paths)


TOPIC_CONFIGS_39 = (
    r"configs\[name=(errors\.deadletterqueue\.group\.enable|max\.decompressed\.message\.bytes"
    r"|remote\.copy\.lag\.bytes|remote\.copy\.lag\.ms|message\.downconversion\.enable"
    r"|message\.format\.version|message\.timestamp\.difference\.max\.ms)\]"
    r"|configs\[name=message\.timestamp\.after\.max\.ms\]\.value"
    r"|configs\[name=min\.insync\.replicas\]\.config_source"
)

ENTRIES: list[Known] = [
    Known("topic-configs-3.9", (19, 32), TOPIC_CONFIGS_39),
    Known(
        "fetch-negative-max-bytes",
        (1,),
        r"^responses\[[^\]]*\]\.partitions\[[^\]]*\]\.",
        when=r"\.error_code$",
    ),
    Known("fetch-partial-batch", (1,), r"\.records\[\d+\]\.partial_bytes$"),
    Known("produce-null-records", (0,), r".", when=r"^connection$"),
    Known("duplicate-log-append-time", (0,), r"\.log_append_time$"),
    Known(
        "transactional-batch-without-producer-id",
        (0,),
        r"\.(error_code|base_offset|log_start_offset)$",
    ),
    Known("transaction-abortable-v11", (0,), r"partition_responses\[index=\d+\]\.error_code$"),
    Known(
        "kip848-epochs-and-assignment",
        (68, 69),
        r"member_epoch|group_epoch|assignment_epoch|assignment|group_state|heartbeat_interval",
    ),
    Known(
        "classic-consumer-group-conversion",
        (11, 68),
        r"^(error_code|member_id|member_epoch|heartbeat_interval|assignment.*)$",
    ),
    Known("static-member-leader", (11,), r"^(leader|skip_assignment|members.*)$"),
    Known("create-topics-validate-only", (19,), r"\.(topic_id|configs.*)$"),
    Known("metadata-invalid-topic-names", (3,), r"^topics\[name=[^\]]*\]\.error_code$"),
    Known(
        "metadata-auto-create", (3,), r"^topics\[name=[^\]]*\]\.(error_code|topic_id|partitions.*)$"
    ),
    Known(
        "describe-configs-synonyms-and-broker",
        (32,),
        r"\.synonyms|configs\[name=log\.retention\.ms\]\.value|^results\[resource_name=\]\.configs",
    ),
    Known(
        "describe-producers-epoch-after-reinit",
        (61,),
        r"active_producers\[[^\]]*\]\.producer_epoch$",
    ),
    Known(
        "incremental-unknown-operation", (44,), r"^responses\[resource_name=[^\]]*\]\.error_code$"
    ),
]

KNOWN: dict[str, Known] = {entry.id: entry for entry in ENTRIES}
