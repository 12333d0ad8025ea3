"""A Runner's stable identity in its consumer group: ``RunnerConfig.worker_id``.

A worker killed without leaving its group (SIGKILL, a lost machine) stays a member until
its session times out (``session.timeout.ms``, 45 s by default), and its partitions wait
for it: without an identity, its restarted process is a new member and waits too. With
``worker_id`` the Runner is a static member (Kafka's KIP-345): its ``group.instance.id`` is
``f"{group_id}-{worker_id}"``, and the restarted process with the same worker_id takes the
dead one's place and partitions at once, without a rebalance.

* One worker: any constant (``worker_id="1"``). N workers: one stable id each, e.g. the
  StatefulSet pod's ordinal or a ``WORKER_ID`` set per process. Two live workers must not
  share an id: the newer one fences the older (classic protocol), or waits for the id
  (KIP-848).
* The price: a static member does not leave on a clean stop either, so the partitions of a
  worker stopped for good (scaled down) wait the session timeout before the others get
  them. Workers that are not restarted under the same name (an autoscaled fleet) are
  better without a worker_id: a clean stop hands their partitions over at once.
* ``group.protocol=consumer`` (KIP-848) has static membership too, but releases a static
  member's instance id only when it left cleanly or its session expired (the broker's
  ``group.consumer.session.timeout.ms``, 45 s by default); until then librdkafka stops
  the new member with a fatal UNRELEASED_INSTANCE_ID. The Runner joins again every few
  seconds meanwhile (``InstanceStillInGroup``), so a crash costs the session timeout as
  without an identity, and a clean restart is immediate.
* With ``assign`` the Runner is no group member: the worker_id is not used.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from onceflow.client_errors import is_fatal
from onceflow.patterns.runner_config import RunnerConfig

# librdkafka's text for UNRELEASED_INSTANCE_ID, which reaches Python as a _FATAL error
# without its own code.
UNRELEASED = "instance ID is still used by another member"
REJOIN_AFTER_S = 5.0


class InstanceStillInGroup(RuntimeError):
    """The worker's previous incarnation still holds its group.instance.id (KIP-848)."""


def group_instance_id(config: RunnerConfig) -> str | None:
    """The static member id the Runner joins its group with (None: a dynamic member):
    from the worker_id, or ``consumer_config``'s verbatim."""
    if config.worker_id is None or config.assign:
        verbatim = config.consumer_config.get("group.instance.id")
        return None if verbatim is None else str(verbatim)
    return f"{config.group_id}-{config.worker_id}"


def still_in_group(config: RunnerConfig) -> InstanceStillInGroup:
    return InstanceStillInGroup(
        f"group {config.group_id}: the previous incarnation of this worker still holds "
        f"group.instance.id {group_instance_id(config)} (a KIP-848 group releases it when "
        "its session expires: group.consumer.session.timeout.ms, 45 s by default)"
    )


def previous_incarnation_holds(error: KafkaError) -> bool:
    """The fatal error of a static member joining while its previous incarnation, killed
    without leaving, is still in a KIP-848 group."""
    return is_fatal(error) and UNRELEASED in error.str()
