"""Database commit traps inside a Python pipeline under proof (``onceflow.faults``).

prove puts this directory first on the pipeline's PYTHONPATH. Python imports
``sitecustomize`` at start-up: this one first runs the pipeline's own sitecustomize, if
it has one, then, only when ``ONCEFLOW_COMMIT_TRAPS`` names a directory, wraps
``sqlite3.connect`` so that the pipeline's connections note which tables each transaction
writes. After a commit that wrote one of ``ONCEFLOW_COMMIT_TRAP_TABLES`` (its outputs),
an armed trap counts it; at the N-th it writes ``sprung-<worker>`` and stops the process
(SIGSTOP) right there, after its commit and before its next step, for the fault engine to
kill it. The files, as the broker's request traps use them: ``arm-<worker>`` holds
``<generation> <N>``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import signal
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    """Run the sitecustomize this one hides, if there is one."""
    path = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


WRITES = re.compile(
    r"^\s*(?:insert|replace)\s+(?:or\s+\w+\s+)?into\s+[\"`\[]?(\w+)|^\s*update\s+(?:or\s+\w+\s+)?"
    r"[\"`\[]?(\w+)|^\s*delete\s+from\s+[\"`\[]?(\w+)",
    re.IGNORECASE,
)


class _Trap:
    def __init__(self, directory: str, tables: set[str], worker: str) -> None:
        self.directory = directory
        self.tables = tables
        self.worker = worker
        self.generation = ""
        self.count = 0
        self.seen = False

    def committed(self, wrote: set[str]) -> None:
        if not wrote & self.tables:
            return
        # the fault engine learns that this pipeline makes such commits, and when this
        # worker last made one (the file's time)
        seen = os.path.join(self.directory, f"seen-{self.worker}")
        if not self.seen:
            self.seen = True
            open(seen, "a").close()
        else:
            os.utime(seen)
        try:
            with open(os.path.join(self.directory, f"arm-{self.worker}")) as file:
                generation, occurrence = file.read().split()
        except (OSError, ValueError):
            return
        if generation != self.generation:
            self.generation, self.count = generation, 0
        self.count += 1
        if self.count != int(occurrence):
            return
        sprung = os.path.join(self.directory, f"sprung-{self.worker}")
        with open(sprung + ".part", "w") as file:
            file.write(f"{generation}\n")
        os.replace(sprung + ".part", sprung)
        os.kill(os.getpid(), signal.SIGSTOP)  # the fault engine kills it here


def _install(trap: _Trap) -> None:
    import sqlite3

    class Cursor(sqlite3.Cursor):
        def execute(self, sql, *args):  # type: ignore[no-untyped-def,override]
            self.connection._note(sql)
            return super().execute(sql, *args)

        def executemany(self, sql, *args):  # type: ignore[no-untyped-def,override]
            self.connection._note(sql)
            return super().executemany(sql, *args)

    class Connection(sqlite3.Connection):
        def _note(self, sql: object) -> None:
            match = WRITES.match(sql) if isinstance(sql, str) else None
            if match:
                wrote = getattr(self, "_onceflow_wrote", set())
                wrote.add(next(g for g in match.groups() if g).lower())
                self._onceflow_wrote = wrote

        def cursor(self, factory=Cursor):  # type: ignore[no-untyped-def,override]
            return super().cursor(factory)

        def execute(self, sql, *args):  # type: ignore[no-untyped-def,override]
            return self.cursor().execute(sql, *args)

        def executemany(self, sql, *args):  # type: ignore[no-untyped-def,override]
            return self.cursor().executemany(sql, *args)

        def commit(self) -> None:
            super().commit()
            self._committed()

        def __exit__(self, kind, value, traceback):  # type: ignore[no-untyped-def]
            result = super().__exit__(kind, value, traceback)
            if kind is None:
                self._committed()
            return result

        def _committed(self) -> None:
            wrote = getattr(self, "_onceflow_wrote", set())
            self._onceflow_wrote = set()
            trap.committed(wrote)

    original = sqlite3.connect

    def connect(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("factory", Connection)
        return original(*args, **kwargs)

    sqlite3.connect = connect  # type: ignore[assignment]


_chain()
_directory = os.environ.get("ONCEFLOW_COMMIT_TRAPS")
if _directory:
    _tables = {t.lower() for t in os.environ.get("ONCEFLOW_COMMIT_TRAP_TABLES", "").split(",") if t}
    _install(_Trap(_directory, _tables, os.environ.get("ONCEFLOW_WORKER", "1")))
