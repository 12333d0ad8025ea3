"""Run a topics command: load the spec, take the lock, plan against the cluster, apply."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from onceflow.topics.cluster import Cluster, TopicsError
from onceflow.topics.lock import ClusterLock
from onceflow.topics.plan import (
    COMMANDS,
    AddPartitions,
    AlterConfigs,
    ClusterState,
    CreateTopic,
    DeleteTopic,
    Plan,
    diff,
)
from onceflow.topics.spec import Spec, SpecError, load

log = logging.getLogger("onceflow.topics")

DESTRUCTIVE = ("delete", "reset")
# The CLI's --env reads it when the option is not given (the Python API does not).
ENV_VARIABLE = "ONCEFLOW_ENV"


class PlanError(TopicsError):
    """The plan contains changes that cannot be made; nothing was applied.

    Its message is one line: the file (and environment), every error of the plan, and
    the plan's hint when it has one (an environment of the file that would match).
    """

    def __init__(self, plan: Plan) -> None:
        where = plan.source + (f" (env {plan.env})" if plan.env else "")
        errors = "; ".join(error.rstrip(".") for error in plan.errors)
        hint = f". {plan.hint}" if plan.hint else ""
        super().__init__(f"{where}: refused, nothing was changed: {errors}{hint}")
        self.plan = plan


def _matching_environments(
    spec: Any, loaded: Spec, state: ClusterState, command: str, strict: bool
) -> list[str]:
    """The file's environments under which ``command`` would plan no errors on ``state``
    (for a plan without an environment that has errors)."""
    found = []
    for name in loaded.environments:
        try:
            candidate = load(spec, name)
        except (SpecError, ValueError):
            continue
        if not diff(candidate, state, command, strict).errors:
            found.append(name)
    return found


def _environment_hint(
    plan: Plan, spec: Any, loaded: Spec, state: ClusterState, strict: bool
) -> None:
    """A plan with errors and no environment: name the file's environments that match."""
    if not plan.errors or loaded.env is not None or not loaded.environments:
        return
    matching = _matching_environments(spec, loaded, state, plan.command, strict)
    if matching:
        name = matching[0]
        plan.hint = (
            f"the file's environment {name!r} matches the cluster: choose it "
            f"(--env {name}, {ENV_VARIABLE}={name}, env={name!r})"
        )
    else:
        declared = ", ".join(repr(name) for name in loaded.environments)
        plan.hint = f"no environment was chosen (the file declares {declared})"


class ConfirmationRequired(TopicsError):
    """delete and reset destroy data and need ``yes=True`` (``--yes``)."""


def execute(cluster: Cluster, plan: Plan, lock: ClusterLock | None = None) -> None:
    """Apply a plan's changes in a safe order: delete, create, add partitions, configs."""

    def check() -> None:
        if lock is not None:
            lock.check()

    deletes = [change.name for change in plan.of(DeleteTopic)]
    if deletes:
        check()
        cluster.delete(deletes)
    creates = [change.topic for change in plan.of(CreateTopic)]
    if creates:
        check()
        cluster.create(creates, retry_for=cluster.timeout if deletes else 0.0)
    totals = {change.name: change.wanted for change in plan.of(AddPartitions)}
    if totals:
        check()
        cluster.add_partitions(totals)
    configs = {change.name: change.changes for change in plan.of(AlterConfigs)}
    if configs:
        check()
        cluster.alter_configs(configs)
    plan.applied = True


def run(
    command: str,
    spec: Any,
    bootstrap: str,
    *,
    env: str | None = None,
    strict: bool = False,
    yes: bool = False,
    lock_timeout: float = 30.0,
    client_config: dict[str, str] | None = None,
    request_timeout: float = 30.0,
    on_plan: Callable[[Plan], None] | None = None,
    on_lock_wait: Callable[[dict[str, Any] | None], None] | None = None,
) -> Plan:
    """Run ``command`` (one of COMMANDS) and return its plan (``applied`` once done).

    The spec is validated before anything touches the cluster (SpecError). Every command
    but ``plan`` holds the cluster lock while it plans and applies; ``request_timeout``
    bounds each call to the cluster (an unreachable cluster is a TopicsError); a plan with errors
    (shrinking partitions, changing the replication factor, undeclared topics under
    ``strict``) raises PlanError (one line, naming a matching environment of the file
    when there is one) and changes nothing.
    """
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
    loaded = load(spec, env)
    if command in DESTRUCTIVE and not yes:
        raise ConfirmationRequired(f"{command} deletes topics and their data; confirm with --yes")
    cluster = Cluster(bootstrap, client_config, timeout=request_timeout)
    if command == "plan":
        state = cluster.state(loaded)
        plan = diff(loaded, state, command, strict, bootstrap)
        _environment_hint(plan, spec, loaded, state, strict)
        if on_plan is not None:
            on_plan(plan)
        return plan
    cluster.topic_partitions()  # an unreachable cluster is reported before the lock waits
    lock = ClusterLock(
        cluster.client_config,
        timeout=lock_timeout,
        command=f"onceflow topics {command} {loaded.source}",
        on_wait=on_lock_wait,
        request_timeout=request_timeout,
    )
    with lock:
        state = cluster.state(loaded)
        plan = diff(loaded, state, command, strict, bootstrap)
        _environment_hint(plan, spec, loaded, state, strict)
        if on_plan is not None:
            on_plan(plan)
        if on_plan is None:  # the caller does not show the plan: at least log warnings
            for warning in plan.warnings:
                log.warning("%s", warning)
        if plan.errors:
            raise PlanError(plan)
        execute(cluster, plan, lock)
    return plan


def plan(spec: Any, bootstrap: str, **options: Any) -> Plan:
    """What ``migrate`` would change; changes nothing."""
    return run("plan", spec, bootstrap, **options)


def migrate(spec: Any, bootstrap: str, **options: Any) -> Plan:
    """Create missing topics, add partitions and align configs; idempotent."""
    return run("migrate", spec, bootstrap, **options)
