"""Audit pipeline outputs against their inputs, and Jepsen-style checks of the broker.

``audit`` is pure logic over ``InputEvent``/``Sink`` values; ``sources`` reads topics and
tables into them; ``run.run_verify`` does both (what ``onceflow verify`` and the chaos
harness call); ``jepsen`` checks the broker's transactions under concurrent clients and
crashes.
"""

from onceflow.verify.audit import InputEvent, OutputRecord, Sink, Unreadable, audit
from onceflow.verify.report import Anomaly, AuditReport

__all__ = [
    "Anomaly",
    "AuditReport",
    "InputEvent",
    "OutputRecord",
    "Sink",
    "Unreadable",
    "audit",
]
