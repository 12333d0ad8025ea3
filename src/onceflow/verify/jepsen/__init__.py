"""A Jepsen-style check of a broker's transactions: history, workload and checker.

The workload runs concurrent transactional producers (distinct ``transactional.id``s)
writing unique values to a multi-partition topic, aborting some transactions on purpose,
while read_committed consumers poll and the broker is SIGKILLed and restarted. Every
operation is recorded in a ``History``:

* ``Txn`` — one transaction: the (partition, value) pairs it produced, in order, and its
  outcome: ``committed`` (``commit_transaction`` returned), ``aborted`` (the producer
  chose to abort, or failed before asking to commit: no commit was ever requested), or
  ``indeterminate`` (the commit was requested but the call failed, e.g. the broker died).
* ``Read`` — one record a consumer received: consumer, partition, offset, value.
* ``final`` — the read_committed content of the topic after the run, once every
  transaction is decided (the last stable offset has reached the high watermark).

``check`` is pure: it takes a history and returns every violation of these rules:

* ``aborted_read``: no value of an aborted transaction is ever read.
* ``lost_write``: every value of a committed transaction is in the final read.
* ``duplicate``: a value is in the final read at most once, and a consumer reads a value
  at one offset only.
* ``nonmonotonic_offset``: each consumer's offsets increase strictly per partition.
* ``order``: in each partition, each producer's committed values keep the order in which
  they were produced.
* ``partial_indeterminate``: an indeterminate transaction is entirely visible or entirely
  invisible.
* ``unstable_read``: a record a consumer read is at the same offset in the final read
  (reading data that a crash later loses is a violation).
* ``wrong_partition`` / ``unknown_value``: values appear only where they were written.
* ``stuck``: the last stable offset never reached the high watermark (a transaction that
  was never decided).
"""

from __future__ import annotations

from onceflow.verify.jepsen.checker import VIOLATIONS, CheckResult, check
from onceflow.verify.jepsen.history import ABORTED, COMMITTED, INDETERMINATE, History, Read, Txn
from onceflow.verify.jepsen.workload import WorkloadConfig, run_workload

__all__ = [
    "ABORTED",
    "COMMITTED",
    "INDETERMINATE",
    "VIOLATIONS",
    "CheckResult",
    "History",
    "Read",
    "Txn",
    "WorkloadConfig",
    "check",
    "run_workload",
]
