"""Diff a spec against a cluster's topics, and print the result as a readable plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape

from onceflow.topics.spec import Spec, TopicSpec, normalize_config

COMMANDS = ("plan", "migrate", "create", "delete", "repartition", "reset", "align")

KEYED_WARNING = (
    "{topic} holds keyed data ({records} records): adding partitions changes "
    "hash(key) % partitions, so keys move to other partitions and per-key order across "
    "the change is not kept (records already written stay where they are)"
)


# --------------------------------------------------------------------------- cluster state


@dataclass(frozen=True)
class ActualConfig:
    value: str | None
    override: bool  # set on the topic (DYNAMIC_TOPIC_CONFIG) rather than a default


@dataclass(frozen=True)
class ActualTopic:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, ActualConfig] = field(default_factory=dict)
    records: int | None = None  # sum over partitions of high - low watermark, if sampled
    keyed: bool | None = None  # a sampled record carried a key


@dataclass(frozen=True)
class ClusterState:
    topics: dict[str, ActualTopic]
    brokers: int | None = None  # brokers in the cluster's metadata (None: not known)


# --------------------------------------------------------------------------- plan items


@dataclass(frozen=True)
class ConfigChange:
    name: str
    current: str | None
    wanted: str | None  # None: remove the topic override, back to the cluster default
    current_is_override: bool = False


@dataclass(frozen=True)
class CreateTopic:
    topic: TopicSpec


@dataclass(frozen=True)
class DeleteTopic:
    name: str
    partitions: int


@dataclass(frozen=True)
class AddPartitions:
    name: str
    current: int
    wanted: int


@dataclass(frozen=True)
class AlterConfigs:
    name: str
    changes: tuple[ConfigChange, ...]


Change = CreateTopic | DeleteTopic | AddPartitions | AlterConfigs


@dataclass
class Plan:
    command: str
    source: str = "<dict>"
    env: str | None = None
    bootstrap: str | None = None
    changes: list[Change] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # impossible changes, strict drift
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    undeclared: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    hint: str | None = None  # with errors: what would avoid them (an environment to choose)
    applied: bool = False

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)

    @property
    def ok(self) -> bool:
        return not self.errors

    def exit_code(self, detailed: bool = False) -> int:
        """Terraform's convention: 0 no changes, 1 errors, 2 changes (with ``detailed``)."""
        if self.errors:
            return 1
        return 2 if detailed and self.changes else 0

    def of(self, kind: type) -> list:
        return [change for change in self.changes if isinstance(change, kind)]

    def summary(self) -> str:
        counts = [
            (len(self.of(DeleteTopic)), "to delete"),
            (len(self.of(CreateTopic)), "to create"),
            (len(self.of(AddPartitions)), "to repartition"),
            (len(self.of(AlterConfigs)), "to reconfigure"),
        ]
        parts = [f"{count} {what}" for count, what in counts if count]
        if self.errors:
            parts.append(f"{len(self.errors)} error{'s' if len(self.errors) != 1 else ''}")
        if not parts:
            return "No changes: the cluster matches the spec."
        return ("Applied: " if self.applied else "Plan: ") + ", ".join(parts) + "."


# --------------------------------------------------------------------------- diff


def _config_changes(topic: TopicSpec, actual: ActualTopic) -> tuple[ConfigChange, ...]:
    changes = []
    for name, wanted in sorted(topic.config.items()):
        have = actual.configs.get(name)
        if wanted is None:
            if have is not None and have.override:
                changes.append(ConfigChange(name, have.value, None, True))
            continue
        if have is None or have.value is None:
            changes.append(ConfigChange(name, None, wanted))
            continue
        try:
            current = normalize_config(name, have.value)
        except Exception:  # the cluster's rendering is not ours: compare the text
            current = have.value
        if current != wanted:
            changes.append(ConfigChange(name, have.value, wanted, have.override))
    return tuple(changes)


def _check_creatable(plan: Plan, topic: TopicSpec, state: ClusterState) -> bool:
    """False, with an error in the plan, when the cluster has too few brokers for the
    declared replication factor: caught before anything changes (``reset`` would
    otherwise delete the topic and then have its creation refused)."""
    wanted, brokers = topic.replication_factor, state.brokers
    if wanted is None or brokers is None or wanted <= brokers:
        return True
    plan.errors.append(
        f"{topic.name}: replication factor {wanted} needs {wanted} brokers, the cluster "
        f"has {brokers}; Kafka refuses to create it (INVALID_REPLICATION_FACTOR)."
    )
    return False


def diff(
    spec: Spec,
    state: ClusterState,
    command: str = "migrate",
    strict: bool = False,
    bootstrap: str | None = None,
) -> Plan:
    """What ``command`` would do to bring the cluster to ``spec``."""
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}")
    effective = "migrate" if command == "plan" else command
    plan = Plan(command, spec.source, spec.env, bootstrap)
    for topic in spec:
        actual = state.topics.get(topic.name)
        if effective == "delete":
            if actual is None:
                plan.notes.append(f"{topic.name}: does not exist")
            else:
                plan.changes.append(DeleteTopic(topic.name, actual.partitions))
            continue
        if effective == "reset":
            if _check_creatable(plan, topic, state):
                if actual is not None:
                    plan.changes.append(DeleteTopic(topic.name, actual.partitions))
                plan.changes.append(CreateTopic(topic))
            continue
        if actual is None:
            if effective in ("migrate", "create"):
                if _check_creatable(plan, topic, state):
                    plan.changes.append(CreateTopic(topic))
            else:
                plan.notes.append(f"{topic.name}: does not exist (create it with migrate)")
            continue
        before = len(plan.changes) + len(plan.errors)
        if effective in ("migrate", "repartition"):
            if topic.partitions > actual.partitions:
                plan.changes.append(AddPartitions(topic.name, actual.partitions, topic.partitions))
                # the sample reads only the newest records of each partition: a declared
                # key counts as much as a sampled one
                keyed = actual.keyed or topic.keyed_by is not None
                if keyed and actual.records:
                    plan.warnings.append(
                        KEYED_WARNING.format(topic=topic.name, records=actual.records)
                    )
            elif topic.partitions < actual.partitions:
                plan.errors.append(
                    f"{topic.name}: cannot shrink from {actual.partitions} to "
                    f"{topic.partitions} partitions; Kafka cannot remove partitions (their "
                    "records and the key-to-partition mapping would be lost). Keep "
                    f"partitions: {actual.partitions}, or recreate the topic with reset "
                    "(deletes its data)."
                )
        if effective == "migrate" and topic.replication_factor not in (
            None,
            actual.replication_factor,
        ):
            plan.errors.append(
                f"{topic.name}: replication factor is {actual.replication_factor}, spec "
                f"says {topic.replication_factor}; it cannot be changed through the topic "
                "APIs. Use a partition reassignment (kafka-reassign-partitions) or "
                "recreate the topic with reset (deletes its data)."
            )
        if effective in ("migrate", "align"):
            changes = _config_changes(topic, actual)
            if changes:
                plan.changes.append(AlterConfigs(topic.name, changes))
        if effective == "create":
            plan.notes.append(f"{topic.name}: exists (create leaves existing topics alone)")
        elif len(plan.changes) + len(plan.errors) == before:
            plan.unchanged.append(topic.name)
    if strict:
        declared = {topic.name for topic in spec}
        for name in sorted(state.topics):
            if name not in declared and not name.startswith("__"):
                plan.undeclared.append(name)
                plan.errors.append(f"{name}: exists on the cluster but is not declared (--strict)")
    return plan


# --------------------------------------------------------------------------- rendering


def _config_line(change: ConfigChange) -> str:
    name = escape(change.name)
    if change.wanted is None:
        return f"      [red]- {name}[/red] = {escape(str(change.current))} (back to the default)"
    if change.current is None:
        return f"      [green]+ {name}[/green] = {escape(change.wanted)}"
    return (
        f"      [yellow]~ {name}[/yellow]: {escape(change.current)} → "
        f"[bold]{escape(change.wanted)}[/bold]"
    )


def render(plan: Plan, console: Console | None = None) -> None:
    """Print the plan as a diff: + create, - delete, ~ change, ! warning, x error."""
    console = console or Console(soft_wrap=True)
    where = f" on {plan.bootstrap}" if plan.bootstrap else ""
    env = f" (env {plan.env})" if plan.env else ""
    console.print(f"[bold]{plan.command}[/bold] {escape(plan.source)}{env}{escape(where)}")
    for change in plan.changes:
        if isinstance(change, CreateTopic):
            topic = change.topic
            replication = (
                "cluster default"
                if topic.replication_factor is None
                else str(topic.replication_factor)
            )
            console.print(
                f"  [green]+ {escape(topic.name)}[/green]  create: partitions={topic.partitions} "
                f"replication_factor={replication}"
            )
            for name, value in sorted(topic.set_configs.items()):
                console.print(f"      [green]+ {escape(name)}[/green] = {escape(value)}")
        elif isinstance(change, DeleteTopic):
            console.print(
                f"  [red]- {escape(change.name)}[/red]  delete ({change.partitions} partitions, "
                "all records lost)"
            )
        elif isinstance(change, AddPartitions):
            console.print(
                f"  [yellow]~ {escape(change.name)}[/yellow]  partitions: {change.current} → "
                f"[bold]{change.wanted}[/bold]"
            )
        elif isinstance(change, AlterConfigs):
            console.print(f"  [yellow]~ {escape(change.name)}[/yellow]  config:")
            for config_change in change.changes:
                console.print(_config_line(config_change))
    for name in plan.unchanged:
        console.print(f"  [dim]= {escape(name)}  up to date[/dim]")
    for note in plan.notes:
        console.print(f"  [dim]· {escape(note)}[/dim]")
    for warning in plan.warnings:
        console.print(f"  [bold yellow]! warning:[/bold yellow] {escape(warning)}")
    for error in plan.errors:
        console.print(f"  [bold red]x error:[/bold red] {escape(error)}")
    if plan.hint:
        console.print(f"  [bold]hint:[/bold] {escape(plan.hint)}")
    console.print(plan.summary())
