"""Step builders for topic and broker configs (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, the last two followed by a metadata barrier), and the topic
config keys the admin scenarios compare."""

from __future__ import annotations

from tests.differential import topic_steps as ts
from tests.differential.driver import Step
from tests.differential.step_values import ADMIN

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def describe_configs(
    resources: list[tuple[int, str, list[str] | None]],
    synonyms: bool = False,
    version: int | None = None,
) -> Step:
    return Step(
        ADMIN,
        32,
        {
            "resources": [
                {"resource_type": t, "resource_name": n, "configuration_keys": k}
                for t, n, k in resources
            ],
            "include_synonyms": synonyms,
            "include_documentation": False,
        },
        version,
    )


def topic_configs(name: str, keys: list[str]) -> Step:
    return describe_configs([(TOPIC_RESOURCE, name, keys)])


def alter_configs(
    name: str,
    configs: dict[str, str | None],
    resource_type: int = TOPIC_RESOURCE,
    validate_only: bool = False,
) -> list[Step]:
    step = Step(
        ADMIN,
        33,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "validate_only": validate_only,
        },
    )
    return [step, *ts.metadata_barrier()]


def incremental(
    name: str,
    ops: list[tuple[str, int, str | None]],
    resource_type: int = TOPIC_RESOURCE,
    validate_only: bool = False,
) -> list[Step]:
    step = Step(
        ADMIN,
        44,
        {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [
                        {"name": k, "config_operation": op, "value": v} for k, op, v in ops
                    ],
                }
            ],
            "validate_only": validate_only,
        },
    )
    return [step, *ts.metadata_barrier()]


KEYS = [
    "retention.ms",
    "cleanup.policy",
    "max.message.bytes",
    "min.insync.replicas",
    "segment.bytes",
]
