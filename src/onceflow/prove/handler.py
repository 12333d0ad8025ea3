"""Import ``MODULE:HANDLER`` the way the Runner host will, with one-line errors."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onceflow.prove.errors import ProveError
from onceflow.prove.reachable import reachable_source


def load_handler(spec: str, directories: list[Path], what: str = "handler") -> Callable[..., Any]:
    """The handler (or another function of the user's: ``what``), its module imported from
    ``directories`` (the config's, then the working directory) or sys.path."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ProveError(f"bad {what} {spec!r}: expected MODULE:FUNCTION")
    for directory in reversed(directories):
        if str(directory) not in sys.path:
            sys.path.insert(0, str(directory))
    try:
        module = importlib.import_module(module_name)
    except BaseException as error:  # the user's module: any error is theirs to read
        raise ProveError(f"cannot import {what} module {module_name!r}: "
                         f"{type(error).__name__}: {error}") from None  # fmt: skip
    handler = getattr(module, attribute, None)
    if not callable(handler):
        raise ProveError(f"{module_name!r} has no function {attribute!r}")
    return handler


def module_source(spec: str, handler: Callable[..., Any]) -> str:
    """The code of the handler's module that runs in a Runner ('' when it cannot be
    found): its import-time statements and what the handler reaches (for explain.py)."""
    module = sys.modules.get(spec.partition(":")[0])
    try:
        text = inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):
        return ""
    return reachable_source(text, getattr(handler, "__name__", None))
