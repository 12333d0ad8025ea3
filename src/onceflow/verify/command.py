"""Kept for existing imports: ``run_verify`` now lives in ``onceflow.verify.run``."""

from onceflow.verify.run import run_verify

__all__ = ["run_verify"]
