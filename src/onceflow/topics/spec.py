"""The topics file: loading, per-environment overrides and strict validation.

A spec is YAML (a file or text) or a dict of the same shape::

    defaults:                      # optional, applies to every topic
      replication_factor: 1
    topics:
      orders:
        partitions: 6
        keyed_by: store            # optional: documents the key, enables the repartition warning
        config:
          retention.ms: 604800000
          cleanup.policy: delete
    environments:                  # optional, one chosen with --env
      production:
        defaults:
          replication_factor: 3
          config: {min.insync.replicas: 2}
        topics:
          orders: {partitions: 12}

Every problem is reported with its file and line before anything touches a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from onceflow.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigKey, parse_value, render_value
from onceflow.protocol.errors import KafkaError

# The broker models every topic config of Kafka 3.9, so a spec accepts exactly those.
KNOWN_TOPIC_CONFIGS: dict[str, ConfigKey] = TOPIC_CONFIGS

INT_MAX = 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
LEGAL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")

TOP_KEYS = ("version", "defaults", "topics", "environments")
TOPIC_KEYS = ("partitions", "replication_factor", "config", "keyed_by", "description")
DEFAULTS_KEYS = ("partitions", "replication_factor", "config")
ENV_KEYS = ("defaults", "topics")
ENV_TOPIC_KEYS = ("partitions", "replication_factor", "config")

Path_ = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    source: str
    line: int | None
    path: Path_
    message: str

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        dotted = ".".join(self.path)
        return f"{where}: {dotted}: {self.message}" if dotted else f"{where}: {self.message}"


class SpecError(ValueError):
    """The topics file is invalid; ``problems`` lists every issue with its location."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int | None  # None: the cluster's default.replication.factor
    # Kafka-rendered values; None means "no override: return to the cluster default".
    config: dict[str, str | None] = field(default_factory=dict)
    keyed_by: str | None = None
    description: str | None = None

    @property
    def set_configs(self) -> dict[str, str]:
        return {name: value for name, value in self.config.items() if value is not None}


@dataclass(frozen=True)
class Spec:
    topics: dict[str, TopicSpec]
    source: str = "<dict>"
    env: str | None = None
    environments: tuple[str, ...] = ()

    def __iter__(self):
        return iter(self.topics.values())


def normalize_config(name: str, value: Any) -> str:
    """Kafka's string form of a config value, for sending and for comparing."""
    key = KNOWN_TOPIC_CONFIGS.get(name)
    if key is None:
        return render_value(value)
    return render_value(parse_value(key, value))


# --------------------------------------------------------------------------- YAML loading


class _Positions:
    """Line numbers (1-based) of keys and values in the loaded document, by path."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: dict[Path_, int] = {}

    def line(self, path: Path_) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)


def _construct(
    loader: yaml.SafeLoader, node: yaml.Node, path: Path_, pos: _Positions, problems: list[Problem]
) -> Any:
    pos.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) or key is None:
                problems.append(
                    Problem(
                        pos.source,
                        key_node.start_mark.line + 1,
                        path,
                        "mapping keys must be plain names",
                    )
                )
                continue
            key = str(key) if not isinstance(key, str) else key
            child = (*path, key)
            if key in result:
                problems.append(
                    Problem(pos.source, key_node.start_mark.line + 1, child, "duplicate key")
                )
            pos.lines[child] = key_node.start_mark.line + 1
            result[key] = _construct(loader, value_node, child, pos, problems)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [
            _construct(loader, item, (*path, str(index)), pos, problems)
            for index, item in enumerate(node.value)
        ]
    return loader.construct_object(node, deep=True)


def _load_yaml(text: str, source: str) -> tuple[Any, _Positions]:
    pos = _Positions(source)
    problems: list[Problem] = []
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = None if node is None else _construct(loader, node, (), pos, problems)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        raise SpecError([Problem(source, line, (), f"invalid YAML: {error.problem}")]) from None
    except yaml.YAMLError as error:
        raise SpecError([Problem(source, None, (), f"invalid YAML: {error}")]) from None
    finally:
        loader.dispose()
    if problems:
        raise SpecError(problems)
    return data, pos


def _read(spec: Any) -> tuple[Any, _Positions]:
    if isinstance(spec, Mapping):
        return spec, _Positions("<dict>")
    if isinstance(spec, Path):
        try:
            return _load_yaml(spec.read_text(), str(spec))
        except OSError as error:
            problem = Problem(str(spec), None, (), f"cannot read: {error.strerror}")
            raise SpecError([problem]) from None
    if isinstance(spec, str):
        looks_like_path = "\n" not in spec and (
            spec.endswith((".yaml", ".yml")) or Path(spec).is_file()
        )
        if looks_like_path:
            return _read(Path(spec))
        return _load_yaml(spec, "<yaml>")
    raise TypeError(f"a topics spec is a path, YAML text or a dict, not {type(spec).__name__}")


# --------------------------------------------------------------------------- validation


class _Checker:
    def __init__(self, pos: _Positions) -> None:
        self.pos = pos
        self.problems: list[Problem] = []

    def fail(self, path: Path_, message: str) -> None:
        self.problems.append(Problem(self.pos.source, self.pos.line(path), path, message))

    def mapping(self, value: Any, path: Path_, allowed: Iterable[str] | None) -> dict:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(path, f"expected a mapping, got {_kind(value)}")
            return {}
        if allowed is not None:
            allowed = tuple(allowed)
            for key in value:
                if key not in allowed:
                    self.fail(
                        (*path, str(key)), f"unknown key {key!r} (allowed: {', '.join(allowed)})"
                    )
        return dict(value)

    def count(self, value: Any, path: Path_, what: str) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"{what} must be an integer, got {_kind(value)} {value!r}")
            return None
        if value < 1:
            self.fail(path, f"{what} must be at least 1, got {value}")
            return None
        if value > INT_MAX:
            self.fail(path, f"{what} is too large: {value}")
            return None
        return value

    def text(self, value: Any, path: Path_) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail(path, f"expected a string, got {_kind(value)}")
            return None
        return value

    def config(self, value: Any, path: Path_) -> dict[str, str | None]:
        configs = self.mapping(value, path, None)
        result: dict[str, str | None] = {}
        for name, raw in configs.items():
            where = (*path, name)
            key = KNOWN_TOPIC_CONFIGS.get(name)
            if key is None:
                if name in BROKER_CONFIGS or name.startswith("log."):
                    hint = " (a broker setting, not a topic config)"
                else:
                    close = _close_names(name)
                    hint = f" (did you mean {close}?)" if close else ""
                self.fail(where, f"unknown topic config {name!r}{hint}")
                continue
            if raw is None:
                result[name] = None
                continue
            message = _type_problem(key, raw)
            if message:
                self.fail(where, message)
                continue
            try:
                result[name] = render_value(parse_value(key, raw))
            except KafkaError as error:
                self.fail(where, error.message)
        return result


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        dict: "mapping",
    }.get(type(value), type(value).__name__)


def _type_problem(key: ConfigKey, raw: Any) -> str | None:
    """Reject values of the wrong YAML type (strings of digits pass for numbers)."""
    wanted = {
        "int": "an integer",
        "long": "an integer",
        "double": "a number",
        "bool": "true or false",
        "string": "a string",
        "list": "a list or string",
    }
    if key.kind in ("int", "long"):
        ok = (isinstance(raw, int) and not isinstance(raw, bool)) or (
            isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()) is not None
        )
        if ok:
            number = int(raw)
            low, high = (-(2**31), INT_MAX) if key.kind == "int" else (LONG_MIN, LONG_MAX)
            if not low <= number <= high:
                return f"{number} is out of range for {key.name}"
    elif key.kind == "double":
        ok = isinstance(raw, int | float) and not isinstance(raw, bool)
        if isinstance(raw, str):
            try:
                float(raw)
                ok = True
            except ValueError:
                ok = False
    elif key.kind == "bool":
        ok = isinstance(raw, bool) or (isinstance(raw, str) and raw.lower() in ("true", "false"))
    elif key.kind == "list":
        ok = isinstance(raw, str) or (
            isinstance(raw, list) and all(isinstance(item, str) for item in raw)
        )
    else:
        ok = isinstance(raw, str)
    if ok:
        return None
    return f"{key.name} must be {wanted[key.kind]}, got {_kind(raw)} {raw!r}"


def _close_names(name: str) -> str | None:
    import difflib

    matches = difflib.get_close_matches(name, list(KNOWN_TOPIC_CONFIGS), n=1, cutoff=0.75)
    return matches[0] if matches else None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if key == "config":
            merged["config"] = {**merged.get("config", {}), **value}
        else:
            merged[key] = value
    return merged


def load(spec: Any, env: str | None = None) -> Spec:
    """Load and validate a spec (path, YAML text or dict); apply the ``env`` overrides."""
    if isinstance(spec, Spec):
        if env is not None and env != spec.env:
            raise ValueError(f"spec was loaded for env {spec.env!r}, not {env!r}")
        return spec
    data, pos = _read(spec)
    check = _Checker(pos)
    top = check.mapping(data, (), TOP_KEYS)
    if data is None or (isinstance(data, Mapping) and "topics" not in data):
        check.fail((), "the file declares no 'topics' mapping")
    version = top.get("version", 1)
    if version != 1:
        check.fail(("version",), f"unsupported version {version!r} (only 1)")

    def section(value: Any, path: Path_, allowed: tuple[str, ...]) -> dict[str, Any]:
        """Validate one partial topic description; return it with typed values."""
        raw = check.mapping(value, path, allowed)
        typed: dict[str, Any] = {}
        if "partitions" in raw:
            typed["partitions"] = check.count(
                raw["partitions"], (*path, "partitions"), "partitions"
            )
        if "replication_factor" in raw:
            typed["replication_factor"] = check.count(
                raw["replication_factor"], (*path, "replication_factor"), "replication_factor"
            )
        if "config" in raw:
            typed["config"] = check.config(raw["config"], (*path, "config"))
        for key in ("keyed_by", "description"):
            if key in raw:
                typed[key] = check.text(raw[key], (*path, key))
        return typed

    defaults = section(top.get("defaults"), ("defaults",), DEFAULTS_KEYS)
    for name, value in defaults.get("config", {}).items():
        if value is None:
            check.fail(("defaults", "config", name), "null is only meaningful in a topic")
    topics_raw = check.mapping(top.get("topics"), ("topics",), None)
    topics: dict[str, dict[str, Any]] = {}
    for name, value in topics_raw.items():
        path = ("topics", name)
        if not LEGAL_NAME.match(name) or name in (".", ".."):
            check.fail(
                path, "topic names are 1-249 characters of ASCII letters, digits, '.', '_' and '-'"
            )
        if value is None:
            check.fail(path, "a topic needs at least 'partitions'")
            continue
        topics[name] = section(value, path, TOPIC_KEYS)

    envs_raw = check.mapping(top.get("environments"), ("environments",), None)
    env_sections: dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]] = {}
    for env_name, value in envs_raw.items():
        path = ("environments", env_name)
        body = check.mapping(value, path, ENV_KEYS)
        env_defaults = section(body.get("defaults"), (*path, "defaults"), DEFAULTS_KEYS)
        env_topics_raw = check.mapping(body.get("topics"), (*path, "topics"), None)
        env_topics = {}
        for topic_name, topic_value in env_topics_raw.items():
            topic_path = (*path, "topics", topic_name)
            if topic_name not in topics_raw:
                check.fail(topic_path, f"topic {topic_name!r} is not declared under 'topics'")
            env_topics[topic_name] = section(topic_value, topic_path, ENV_TOPIC_KEYS)
        env_sections[env_name] = (env_defaults, env_topics)

    if env is not None and env not in env_sections:
        known = ", ".join(sorted(env_sections)) or "none declared"
        check.fail(("environments",), f"unknown environment {env!r} (known: {known})")

    resolved: dict[str, TopicSpec] = {}
    for name, declared in topics.items():
        merged = _merge(defaults, declared)
        if env in env_sections:
            env_defaults, env_topics = env_sections[env]
            merged = _merge(merged, env_defaults)
            merged = _merge(merged, env_topics.get(name, {}))
        path = ("topics", name)
        if "partitions" not in merged:
            check.fail(path, "partitions is required (here or under defaults)")
            continue
        if merged["partitions"] is None or merged.get("replication_factor", 0) is None:
            continue  # already reported
        config = merged.get("config", {})
        replication = merged.get("replication_factor")
        min_isr = config.get("min.insync.replicas")
        if replication is not None and min_isr is not None and int(min_isr) > replication:
            check.fail(
                (*path, "config", "min.insync.replicas"),
                f"min.insync.replicas={min_isr} is larger than the replication factor "
                f"{replication}" + (f" in environment {env!r}" if env else ""),
            )
        resolved[name] = TopicSpec(
            name=name,
            partitions=merged["partitions"],
            replication_factor=replication,
            config=config,
            keyed_by=merged.get("keyed_by"),
            description=merged.get("description"),
        )
    if check.problems:
        raise SpecError(check.problems)
    return Spec(resolved, pos.source, env, tuple(sorted(env_sections)))
