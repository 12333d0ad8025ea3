"""The one error ``onceflow prove`` reports as a single line and exit 2."""

from __future__ import annotations


class ProveError(RuntimeError):
    """The proof cannot run: bad input (handler, command, mapping, outputs) or a pipeline
    that exits at once or never drains. Never an anomaly: those are results."""


class WrongMapping(ProveError):
    """No output record carries the input's id where the mapping says."""
