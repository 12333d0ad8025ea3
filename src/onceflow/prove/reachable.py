"""The part of a Python source file a pipeline runs, for the cheap cause hints.

A hint read from code that never runs (a ``sqlite3.connect`` under
``if __name__ == "__main__":`` of a handler's module, a helper nobody calls) blames the
wrong line. ``reachable_source`` keeps the module's top-level statements (which run when it
is imported or run), minus the ``__main__`` block unless the file is run as a script, plus
every module-level function and class those statements or the entry function reach by
name, transitively.
"""

from __future__ import annotations

import ast

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def reachable_source(text: str, entry: str | None = None) -> str:
    """The code that runs: as a script (``entry`` None) or as the module of ``entry``."""
    try:
        module = ast.parse(text)
    except SyntaxError:
        return text  # cannot tell: keep it all
    definitions: dict[str, Definition] = {}
    top: list[ast.stmt] = []
    for statement in module.body:
        if isinstance(statement, Definition):
            definitions[statement.name] = statement
        elif entry is not None and _is_main_block(statement):
            continue  # not run when the module is imported
        else:
            top.append(statement)
    kept: dict[str, Definition] = {}
    pending = _names(top) | ({entry} if entry else set())
    while pending:
        name = pending.pop()
        definition = definitions.get(name)
        if definition is None or name in kept:
            continue
        kept[name] = definition
        pending |= _names([definition]) - kept.keys()
    order = {id(node): n for n, node in enumerate(module.body)}
    nodes = sorted([*top, *kept.values()], key=lambda node: order[id(node)])
    return "\n".join(ast.get_source_segment(text, node) or ast.unparse(node) for node in nodes)


def _is_main_block(statement: ast.stmt) -> bool:
    if not isinstance(statement, ast.If):
        return False
    test = statement.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _names(nodes: list) -> set[str]:
    return {
        node.id
        for tree in nodes
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
