"""Declarative topics as code: a topics.yaml applied to onceflow's broker or any Kafka.

``migrate(spec, bootstrap)`` creates missing topics, adds partitions and aligns configs
(idempotent, under a cluster-side lock); ``plan(spec, bootstrap)`` shows what it would do.
A spec is a path, YAML text or a dict; see docs/topics.md for the format.
"""

from onceflow.topics.apply import ConfirmationRequired, PlanError, migrate, plan, run
from onceflow.topics.cluster import ClusterUnreachable, TopicsError
from onceflow.topics.lock import ClusterLock, LockTimeout
from onceflow.topics.plan import Plan
from onceflow.topics.spec import Spec, SpecError, TopicSpec, load

__all__ = [
    "ClusterLock",
    "ClusterUnreachable",
    "ConfirmationRequired",
    "LockTimeout",
    "Plan",
    "PlanError",
    "Spec",
    "SpecError",
    "TopicSpec",
    "TopicsError",
    "load",
    "migrate",
    "plan",
    "run",
]
