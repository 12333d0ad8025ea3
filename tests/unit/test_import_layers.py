"""The import graph of src/onceflow: no cycles, and the broker's layers point one way.

Every ``import``/``from ... import`` in every module counts, including those under
``if TYPE_CHECKING:`` and inside functions: a type-only import still ties two modules
together for a reader. The layers (docs/architecture.md), lowest first:

    protocol (with security, config, clock) <- log <- coordinator <- broker <- cli

A module may import its own layer and the layers below it, never one above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "onceflow"

LAYERS = [
    ("onceflow.protocol", "onceflow.security", "onceflow.config", "onceflow.clock"),
    ("onceflow.log",),
    ("onceflow.coordinator",),
    ("onceflow.broker",),
    ("onceflow.cli",),
]


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


def layer_of(module: str) -> int | None:
    for rank, packages in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in packages):
            return rank
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    violations = []
    for module, targets in sorted(graph.items()):
        rank = layer_of(module)
        if rank is None:
            continue
        for target in sorted(targets):
            target_rank = layer_of(target)
            if target_rank is not None and target_rank > rank:
                violations.append(f"{module} imports {target} (a higher layer)")
    return violations


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_no_import_cycle(graph: dict[str, set[str]]) -> None:
    found = [sorted(c) for c in cycles(graph)]
    assert not found, f"import cycles in src/onceflow: {found}"


def test_layers_point_one_way(graph: dict[str, set[str]]) -> None:
    assert not layer_violations(graph)


def test_every_layer_is_in_the_graph(graph: dict[str, set[str]]) -> None:
    for packages in LAYERS:
        for package in packages:
            assert package in graph, f"{package} is gone: update LAYERS"


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
