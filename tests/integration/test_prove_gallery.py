"""The gallery of real bugs (examples/prove/gallery): each pipeline written the way people
write them (Kafka's defaults, ``subscribe()`` with a group id), proved as a user proves it.

Every case runs the installed console script, ``onceflow prove command --quick --seed N
... -- COMMAND`` in the example's directory, with the virtualenv's ``bin`` first on
``PATH`` (``python`` is the one onceflow is installed in, as in an activated virtualenv).
A broken pipeline must be found (exit 1) with the anomaly its seed-003 failure predicts,
in the output where it happens; its fixed twin must hold with every planned fault landed
(exit 0). Each proof starts its own brokers, so the cases run in parallel (``-n``).

The Java example is compiled once per test session with javac against the Apache Kafka
jars the suite fetches (tests/integration/java_tools.py); the Node example's kafkajs is
installed with npm into its directory (node_modules is not in git).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.console_script import ENV, SCRIPT
from tests.integration.java_tools import JVM_OPTIONS, kafka_classpath

GALLERY = Path(__file__).resolve().parents[2] / "examples" / "prove" / "gallery"
BIN = Path(sys.executable).parent  # the virtualenv's bin: its python, its onceflow
PROOF_TIMEOUT_S = 900


@dataclass(frozen=True)
class Example:
    name: str
    options: tuple[str, ...]  # prove's options before `--`, {variant} for broken/fixed
    command: tuple[str, ...]  # the pipeline, {variant} for broken/fixed
    anomaly: str  # what the broken twin must show ...
    sink: str  # ... and where
    seed: int = 1

    def argv(self, variant: str, command: list[str]) -> list[str]:
        options = [word.format(variant=variant) for word in self.options]
        return [str(SCRIPT), "prove", "command", *options, "--quick", "--seed", str(self.seed),
                "--", *command]  # fmt: skip


def python(script: str = "{variant}.py") -> tuple[str, ...]:
    return ("python", script)


TABLE = ("--input", "orders", "--output", "table:orders")
EXAMPLES = [
    Example("commit_before_process", (*TABLE, "--schema", "{variant}.sql"), python(),
            "missing", "table:orders"),
    Example("auto_commit", (*TABLE, "--schema", "{variant}.sql"), python(),
            "duplicated", "table:orders"),
    Example("process_then_commit", (*TABLE, "--schema", "{variant}.sql"), python(),
            "duplicated", "table:orders"),
    Example("producer_outside_transaction",
            ("--input", "orders", "--output", "topic:order-events",
             "--output", "topic:order-notifications"), python(),
            "duplicated", "topic:order-notifications"),
    Example("separate_transactions", (*TABLE, "--schema", "schema.sql"), python(),
            "duplicated", "table:orders"),
    Example("rest_without_idempotency_key",
            ("--input", "orders", "--output", "table:payments", "--schema", "schema.sql"),
            python(), "duplicated", "table:payments"),
    Example("outbox_relay",
            (*TABLE, "--output", "topic:order-events", "--schema", "schema.sql"), python(),
            "duplicated", "topic:order-events"),
    Example("read_uncommitted_copier",
            ("--input", "orders", "--output", "topic:priced-orders",
             "--output", "topic:order-copies"),
            ("sh", "-c", "python pricing.py & exec python {variant}.py"),
            "duplicated", "topic:order-copies"),
    Example("revoke_callback", (*TABLE, "--schema", "schema.sql", "--workers", "3"),
            python(), "missing", "table:orders"),
    Example("java_consumer", ("--input", "orders", "--output", "topic:order-events"),
            ("java", "{variant}"), "duplicated", "topic:order-events"),
    Example("node_consumer", ("--input", "orders", "--output", "topic:order-events"),
            ("node", "{variant}.js"), "duplicated", "topic:order-events"),
    Example("inbox_with_kafka_transactions",
            (*TABLE, "--output", "topic:order-events", "--schema", "schema.sql"), python(),
            "missing", "topic:order-events"),
    Example("check_then_insert",
            (*TABLE, "--schema", "{variant}.sql", "--workers", "2",
             "--faults", "pause"),
            python(), "duplicated", "table:orders"),
]  # fmt: skip
BY_NAME = {example.name: example for example in EXAMPLES}


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Broken.java and Fixed.java compiled against kafka-clients; the classpath to run them."""
    classpath = kafka_classpath()
    classes = tmp_path_factory.mktemp("gallery-java")
    sources = [str(GALLERY / "java_consumer" / f"{name}.java") for name in ("Broken", "Fixed")]
    result = subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(classes), *sources],
                            capture_output=True, text=True, check=False)  # fmt: skip
    if result.returncode != 0:
        pytest.fail(f"javac failed: {result.stderr.strip()}", pytrace=False)
    return f"{classes}:{classpath}"


def kafkajs_installed() -> None:
    """kafkajs (package.json's version) in examples/prove/gallery/node_consumer/node_modules,
    installed by npm once; a lock keeps parallel test workers from installing together."""
    directory = GALLERY / "node_consumer"
    if shutil.which("npm") is None:
        pytest.fail("npm not found: the Node example needs Node.js and npm", pytrace=False)
    with open(Path(tempfile.gettempdir()) / "onceflow-gallery-npm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (directory / "node_modules" / "kafkajs" / "package.json").exists():
            return
        npm = ["npm", "install", "--no-audit", "--no-fund"]
        result = subprocess.run(npm, cwd=directory, capture_output=True, text=True, timeout=300,
                                check=False)  # fmt: skip
        if result.returncode != 0:
            pytest.fail(f"npm install failed: {result.stderr.strip()}", pytrace=False)


def command_of(example: Example, variant: str, request: pytest.FixtureRequest) -> list[str]:
    words = [word.format(variant=variant) for word in example.command]
    if example.name == "java_consumer":
        classpath = request.getfixturevalue("java_classes")
        return ["java", *JVM_OPTIONS, "-cp", classpath, variant.capitalize()]
    if example.name == "node_consumer":
        kafkajs_installed()
    return words


def prove(example: Example, variant: str, work: Path, request: pytest.FixtureRequest):
    """Run the proof as a user does; (exit code, the JSON report, what it printed)."""
    report = work / f"{example.name}-{variant}.json"
    argv = example.argv(variant, command_of(example, variant, request))
    argv[3:3] = ["--work-dir", str(work / "trials"), "--json", str(report)]
    env = {**ENV, "PATH": f"{BIN}:{ENV.get('PATH', '')}"}
    result = subprocess.run(argv, cwd=GALLERY / example.name, env=env, capture_output=True,
                            text=True, timeout=PROOF_TIMEOUT_S, check=False)  # fmt: skip
    printed = f"$ {' '.join(argv)}\n{result.stdout}\n{result.stderr}"
    data = json.loads(report.read_text()) if report.exists() else None
    return result.returncode, data, printed


NAMES = [example.name for example in EXAMPLES]


@pytest.mark.parametrize("name", NAMES)
def test_broken_pipeline_is_found(name: str, tmp_path: Path, request: pytest.FixtureRequest):
    example = BY_NAME[name]
    code, report, printed = prove(example, "broken", tmp_path, request)
    assert code == 1, printed
    assert report is not None and report["failure"] is not None, printed
    found = {(a["kind"], a["sink"]) for a in report["failure"]["anomalies"]}
    assert (example.anomaly, example.sink) in found, printed
    assert f"--seed {example.seed} --kills " in report["failure"]["replay"], printed


@pytest.mark.parametrize("name", NAMES)
def test_fixed_pipeline_holds(name: str, tmp_path: Path, request: pytest.FixtureRequest):
    example = BY_NAME[name]
    code, report, printed = prove(example, "fixed", tmp_path, request)
    assert code == 0, printed
    assert report is not None and report["held"] and report["complete"], printed
    assert report["kills"] == report["kills_planned"] > 0, printed
