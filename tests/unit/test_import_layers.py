"""The import graph of src/onceflow: no cycles, and every package in its layer.

Every ``import``/``from ... import`` in every module counts, including those under
``if TYPE_CHECKING:`` and inside functions: a type-only import still ties two modules
together for a reader. Each top-level package or module of ``onceflow`` has a layer
(``LAYERS``, lowest first; docs/architecture.md draws them). A module may import its own
package and the layers below its own, never a layer above, nor another package of its
own layer (those are independent of each other).
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "onceflow"
ROOT = "__init__"  # onceflow/__init__.py itself (the version)

LAYERS: list[tuple[str, ...]] = [
    # Leaves: import nothing of onceflow.
    (
        ROOT,
        "clock",
        "timings",
        "security",
        "children",
        "cds_archive",
        "crash_points",
        "client_errors",
        "configuration_error",
        "sql_dialect",
        "ports",
        "proc_stat",
        "tcp_proxy",
    ),
    # The broker, bottom up: the wire protocol, configuration, storage, coordinators,
    # the server (with broker/process.py, which starts one as a child process).
    ("protocol",),
    ("config",),
    ("log",),
    ("coordinator",),
    ("broker",),
    # The client side: what users run against any Kafka-compatible broker.
    ("admin", "producing", "db"),
    ("topics", "demo"),
    ("patterns", "spark"),
    ("verify",),
    # Apache Kafka as a second engine, for tests and trials.
    ("kafka_cluster",),
    # The fault engine: spawning, killing and restarting processes, fault injection;
    # used by chaos, prove and the tests.
    ("faults",),
    # The tools that kill processes and audit what survived.
    ("chaos",),
    ("prove",),
    ("testing",),
    # The web console: the admin library, the patterns' dead-letter headers, the reports.
    ("console",),
    # The command line, and python -m onceflow.
    ("cli",),
    ("__main__",),
]

RANKS = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_names(root: Path) -> dict[str, Path]:
    modules = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (a name imported from a package
    counts as its submodule when there is one)."""
    modules = module_names(root)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets.update(resolve(f"{base}.{alias.name}") for alias in node.names)
        graph[name] = {target for target in targets if target and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(component)

    for module in graph:
        if module not in index:
            visit(module)
    return found


def top_level(module: str) -> str:
    """The top-level package or module of onceflow a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    violations = []
    for module, targets in sorted(graph.items()):
        own = top_level(module)
        for target in sorted(targets):
            other = top_level(target)
            if other == own or own not in RANKS or other not in RANKS:
                continue
            if RANKS[other] > RANKS[own]:
                violations.append(f"{module} imports {target} (a higher layer)")
            elif RANKS[other] == RANKS[own]:
                violations.append(f"{module} imports {target} (a package of its own layer)")
    return violations


def unranked(graph: dict[str, set[str]]) -> list[str]:
    return sorted({top_level(module) for module in graph} - set(RANKS))


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_no_import_cycle(graph: dict[str, set[str]]) -> None:
    found = [sorted(c) for c in cycles(graph)]
    assert not found, f"import cycles in src/onceflow: {found}"


def test_layers_point_one_way(graph: dict[str, set[str]]) -> None:
    assert not layer_violations(graph)


def test_every_package_has_a_layer_and_every_layer_a_package(graph: dict[str, set[str]]) -> None:
    assert not unranked(graph), "rank these in LAYERS (and docs/architecture.md)"
    present = {top_level(module) for module in graph}
    assert not set(RANKS) - present, "gone from src/onceflow: update LAYERS"


def test_the_checks_see_a_type_only_cycle_and_an_upward_import(tmp_path: Path) -> None:
    package = tmp_path / PACKAGE
    for sub in ("log", "broker"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "log" / "segment.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from onceflow.broker.core import BrokerCore\n"
    )
    (package / "broker" / "core.py").write_text("from ..log import segment\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == [{"onceflow.log.segment", "onceflow.broker.core"}]
    assert layer_violations(graph) == [
        "onceflow.log.segment imports onceflow.broker.core (a higher layer)"
    ]


@pytest.mark.parametrize(
    ("module", "planted", "violation"),
    [
        (
            "log/segment.py",
            "from onceflow.cli.root import main\n",
            "onceflow.log.segment imports onceflow.cli.root (a higher layer)",
        ),
        (
            "coordinator/group.py",
            "def later():\n    import onceflow.broker.core\n",
            "onceflow.coordinator.group imports onceflow.broker.core (a higher layer)",
        ),
        (
            "patterns/runner.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from onceflow.spark import common\n",
            "onceflow.patterns.runner imports onceflow.spark.common (a package of its own layer)",
        ),
    ],
)
def test_a_planted_import_in_a_copy_of_the_tree_fails_the_layering(
    tmp_path: Path, module: str, planted: str, violation: str
) -> None:
    shutil.copytree(SRC / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    assert not layer_violations(import_graph(tmp_path))  # the copy is as clean as the tree
    path = tmp_path / PACKAGE / module
    path.write_text(path.read_text() + "\n" + planted)
    assert layer_violations(import_graph(tmp_path)) == [violation]


def test_a_new_package_without_a_layer_is_found(tmp_path: Path) -> None:
    shutil.copytree(SRC / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / PACKAGE / "newcomer").mkdir()
    (tmp_path / PACKAGE / "newcomer" / "__init__.py").write_text("")
    assert unranked(import_graph(tmp_path)) == ["newcomer"]
