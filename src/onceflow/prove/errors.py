"""How ``onceflow prove`` ends when it cannot give a verdict, and its exit codes.

``ProveError`` is the user's input (handler, command, mapping, outputs, a pipeline that
exits at once or never drains): one line, exit 2. ``ProveFailure`` is prove itself (its
embedded broker, the cluster or database server it was pointed at, a bug): one line that
says what to do, exit 5. Neither is ever an anomaly: those are results.
"""

from __future__ import annotations

EXIT_HELD = 0
EXIT_BROKEN = 1
EXIT_BAD_INPUT = 2
EXIT_INCOMPLETE = 4  # held, but not every planned fault landed
EXIT_PROVE_FAILED = 5


class ProveError(RuntimeError):
    """The proof cannot run because of its input: bad input, or a pipeline that exits at
    once or never drains."""


class WrongMapping(ProveError):
    """No output record carries the input's id where the mapping says."""


class ProveFailure(RuntimeError):
    """prove itself could not run the proof (not the pipeline's fault); the message says
    what to do."""
