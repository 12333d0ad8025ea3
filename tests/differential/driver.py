"""The differential driver: one scenario's steps sent to Apache Kafka and to onceflow's
broker, request by request, each response normalised (normalise.py) and compared.

A step names a client (each client has its own connection to each broker), an API, a
version (None: the highest version both brokers advertise) and the request as plain data
(build.py). Strings starting with ``~`` are names local to the scenario: ``~`` becomes a
prefix unique to the scenario on both brokers. Values that differ per broker (producer ids
and epochs, member ids, generations) are ``Var("p1.pid")`` placeholders resolved from what
that broker answered before; record batches are ``records.Batch`` values.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader

from onceflow.admin.transaction_wire import DescribeTransactionsResponse
from onceflow.protocol.client import WireClient
from onceflow.protocol.codec import api_name, response_class
from tests.differential.build import make_request
from tests.differential.normalise import Normaliser
from tests.differential.records import Batch

CLOSED = {"connection": "closed by the broker"}
ANSWER_SECONDS = 15.0  # longer than any request here may take (produce timeouts are 10 s)
NO_ANSWER = {"connection": f"no answer within {ANSWER_SECONDS:.0f} s"}
SETTLE_SECONDS = 20.0


DESCRIBE_TRANSACTIONS = 65


@dataclass(frozen=True)
class Var:
    """A value this broker answered earlier in the scenario (``client.pid``...)."""

    name: str
    offset: int = 0


@dataclass
class Step:
    client: str
    api: int
    body: dict[str, Any]
    version: int | None = None
    label: str = ""
    send_only: bool = False  # the answer is read by a later Await step (blocking requests)
    compare: bool = True
    raw_version: int | None = None  # header version differing from the body's (bad input)
    wait_until: Callable[[Any], bool] | None = None  # repeat, uncompared, until true


@dataclass
class Await:
    client: str
    label: str = ""


@dataclass
class Pause:
    """Let time pass on both brokers (timeouts); the only sleep a scenario may take."""

    seconds: float
    label: str = ""


Action = Step | Await | Pause


@dataclass
class Difference:
    index: int
    label: str
    api: int
    version: int
    paths: list[str]
    kafka: Any
    onceflow: Any

    def render(self) -> str:
        title = f"step {self.index} ({self.label}) {api_name(self.api)} v{self.version}"
        return f"{title}\n{side_by_side(self.kafka, self.onceflow)}"


class Connection:
    """One client's connection, requests pipelined: ``send`` now, ``receive`` in order."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        self.client = WireClient(bootstrap, ANSWER_SECONDS, client_id=client_id)
        self.pending: list[tuple[int, int, int]] = []  # (api, version, correlation id)

    def send(self, request: Any, header_version: int | None = None) -> None:
        cls = type(request)
        version = cls.__version__ if header_version is None else header_version
        correlation = self.client.send(request, header_version)
        self.pending.append((cls.__api_key__, version, correlation))

    def receive(self) -> Any:
        api, version, correlation = self.pending.pop(0)
        try:
            frame = self.client.read_frame()
        except TimeoutError:
            return NO_ANSWER
        except (ConnectionError, OSError):
            return CLOSED
        assert struct.unpack_from(">i", frame, 0)[0] == correlation
        classes = [response_class(api, version)]
        if api == DESCRIBE_TRANSACTIONS:  # kio's class cannot hold Kafka's -1 start time
            classes = [DescribeTransactionsResponse]
        if api == 18:  # ApiVersions answers a version it cannot serve with a v0 body
            classes.append(response_class(api, 0))
        failure: dict[str, str] = {"undecodable": "no schema"}
        for cls in classes:
            if cls is None:
                continue
            offset = 4 + (1 if cls.__flexible__ and api != 18 else 0)
            try:
                response, _ = entity_reader(cls)(frame, offset)
            except Exception as error:  # kio cannot hold it (a negative timestamp...)
                failure = {"undecodable": f"{type(error).__name__}: {error}"}
                continue
            return response
        return failure

    def close(self) -> None:
        self.client.close()


class Side:
    """One broker's view of a scenario: its connections and the values it answered."""

    def __init__(self, name: str, bootstrap: str, prefix: str) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.connections: dict[str, Connection] = {}
        self.variables: dict[str, Any] = {}
        self.normaliser = Normaliser(prefix, self.variables)

    def connection(self, client: str) -> Connection:
        if client not in self.connections:
            self.connections[client] = Connection(self.bootstrap, f"diff-{client}")
        return self.connections[client]

    def send(self, step: Step, version: int) -> None:
        body = self.resolve(step.body)
        request = make_request(step.api, version, body)
        connection = self.connection(step.client)
        connection.send(request, step.raw_version)
        if step.api == 0 and body.get("acks") == 0:
            connection.pending.pop()  # acks=0: the broker answers nothing

    def receive(self, step: Step) -> Any:
        connection = self.connections[step.client]
        response = connection.receive()
        if response is CLOSED or response is NO_ANSWER:
            connection.close()
            del self.connections[step.client]
            return response
        if not isinstance(response, dict):
            remember(step.api, response, self.variables, step.client)
        return response

    def resolve(self, value: Any) -> Any:
        if isinstance(value, Var):
            found = self.variables.get(value.name, _missing(value.name))
            return found + value.offset if value.offset else found
        if hasattr(value, "resolve_on"):
            return value.resolve_on(self)
        if isinstance(value, Batch):
            return value.encode(self.variables)
        if isinstance(value, str) and value.startswith("~"):
            return self.prefix + value[1:]
        if isinstance(value, dict):
            return {key: self.resolve(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.resolve(item) for item in value]
        return value

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.connections.clear()


def _missing(name: str) -> Any:
    if name.endswith("member_epoch"):
        return 0
    return -1 if name.endswith(("pid", "epoch", "gen")) else ""


def remember(api: int, response: Any, variables: dict[str, Any], client: str) -> None:
    """Keep the values later steps of this client refer to."""
    get = lambda name, default=None: getattr(response, name, default)  # noqa: E731
    if api in (3, 19):  # Metadata, CreateTopics: topic ids for Fetch v13+
        for topic in get("topics", ()):
            topic_id = getattr(topic, "topic_id", None)
            if topic_id is not None and topic_id.int != 0:
                variables[f"topic_id:{topic.name}"] = topic_id
    initialised = api == 22 and int(get("error_code", 1)) == 0
    bumped = api == 26 and int(get("producer_id", -1)) >= 0  # EndTxn v5+: the new epoch
    if initialised or bumped:
        variables[f"{client}.pid"] = int(get("producer_id"))
        variables[f"{client}.epoch"] = int(get("producer_epoch"))
    elif api == 11:  # JoinGroup
        if get("member_id"):
            variables[f"{client}.member"] = get("member_id")
        variables[f"{client}.gen"] = int(get("generation_id", -1))
        variables[f"{client}.leader"] = get("leader", "")
        variables[f"{client}.members"] = [m.member_id for m in get("members", ())]
    elif api == 68:  # ConsumerGroupHeartbeat
        if get("member_id"):
            variables[f"{client}.member"] = get("member_id")
        if int(get("error_code", 1)) == 0:
            variables[f"{client}.member_epoch"] = int(get("member_epoch"))


class Pair:
    """Apache Kafka and onceflow, each a bootstrap address; ``common`` is every API's
    version range both advertise."""

    def __init__(self, kafka: str, onceflow: str, common: dict[int, tuple[int, int]]) -> None:
        self.kafka = kafka
        self.onceflow = onceflow
        self.common = common

    def run(self, prefix: str, actions: Iterable[Action]) -> list[Difference]:
        sides = [Side("kafka", self.kafka, prefix), Side("onceflow", self.onceflow, prefix)]
        pending: dict[str, list[tuple[Step, int]]] = {}
        differences: list[Difference] = []
        try:
            for index, action in enumerate(actions):
                if isinstance(action, Pause):
                    time.sleep(action.seconds)
                    continue
                if isinstance(action, Await):
                    step, version = pending[action.client].pop(0)
                    answers = [side.receive(step) for side in sides]
                    label = action.label or step.label
                elif action.wait_until is not None:
                    step, version = action, self.version_of(action)
                    answers = [settle(side, step, version) for side in sides]
                    label = step.label
                else:
                    step, version = action, self.version_of(action)
                    for side in sides:
                        side.send(step, version)
                    if step.api == 0 and step.body.get("acks") == 0:
                        continue
                    if step.send_only:
                        pending.setdefault(step.client, []).append((step, version))
                        continue
                    answers = [side.receive(step) for side in sides]
                    label = step.label
                if not step.compare:
                    continue
                whole = step.api == 3 and step.body.get("topics", 0) is None
                kafka, onceflow = (
                    side.normaliser.response(step.api, answer, whole)
                    if answer is not CLOSED
                    else answer
                    for side, answer in zip(sides, answers, strict=True)
                )
                paths = differing_paths(kafka, onceflow)
                if paths:
                    differences.append(
                        Difference(index, label, step.api, version, paths, kafka, onceflow)
                    )
        finally:
            for side in sides:
                side.close()
        return differences

    def version_of(self, step: Step) -> int:
        low, high = self.common[step.api]
        if step.version is None:
            return high
        if not low <= step.version <= high:
            raise ValueError(f"{api_name(step.api)} v{step.version} is outside {low}-{high}")
        return step.version


def settle(side: Side, step: Step, version: int) -> Any:
    """Repeat a step until its condition holds on this broker (state another request
    changes asynchronously, such as transaction markers); its last answer counts."""
    deadline = time.monotonic() + SETTLE_SECONDS
    assert step.wait_until is not None
    while True:
        side.send(step, version)
        answer = side.receive(step)
        if answer is CLOSED or isinstance(answer, dict) or step.wait_until(answer):
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{side.name}: {step.label or api_name(step.api)} never settled: {answer}"
            )
        time.sleep(0.05)


# --------------------------------------------------------------------------- comparing


KEYS = (
    "name",
    "partition_index",
    "partition",
    "topic",
    "member_id",
    "group_id",
    "transactional_id",
    "resource_name",
    "api_key",
    "index",
    "producer_id",
    "user",
)


def _key_of(items: list[Any]) -> str | None:
    """The field that names each element of a list of entities, if one does uniquely."""
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    if any("records" in item or "partial_bytes" in item for item in items):
        return None  # record batches: compared in log order
    for key in KEYS:
        values = [item.get(key, _ABSENT) for item in items]
        if _ABSENT not in values and len({repr(v) for v in values}) == len(values):
            return key
    return None


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """``{"a.b[name=x].c": value}``: list elements are keyed by their name (or partition,
    member...) when they have one, so a missing element shows as itself."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{path}.{key}" if path else key))
        return out or {path: {}}
    if isinstance(value, list):
        out = {}
        key = _key_of(value)
        for index, item in enumerate(value):
            label = f"{key}={item[key]}" if key else str(index)
            out.update(flatten(item, f"{path}[{label}]"))
        return out or {path: []}
    return {path: value}


_ABSENT = object()


def differing_paths(kafka: Any, onceflow: Any) -> list[str]:
    left, right = flatten(kafka), flatten(onceflow)
    union = list(left) + [path for path in right if path not in left]
    return [path for path in union if left.get(path, _ABSENT) != right.get(path, _ABSENT)]


def side_by_side(kafka: Any, onceflow: Any, width: int = 48, limit: int = 80) -> str:
    """Both responses, one flattened field a line: path, Kafka's value, onceflow's value;
    ``!`` marks a difference. Long responses show only the differing lines."""
    left, right = flatten(kafka), flatten(onceflow)
    union = list(left) + [path for path in right if path not in left]
    rows = []
    for path in union:
        a = _show(left.get(path, _ABSENT))
        b = _show(right.get(path, _ABSENT))
        rows.append((a != b, path, a, b))
    if len(rows) > limit:
        rows = [row for row in rows if row[0]]
    pw = min(100, max([len(r[1]) for r in rows] + [4]))
    lines = [f"  {'field':<{pw}} {'Apache Kafka':<{width}} | onceflow"]
    for differs, path, a, b in rows:
        lines.append(f"{'!' if differs else ' '} {path:<{pw}} {a:<{width}} | {b}")
    return "\n".join(lines)


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def covered(paths: list[str], pattern: str) -> bool:
    regex = re.compile(pattern)
    return all(regex.search(path) for path in paths)
