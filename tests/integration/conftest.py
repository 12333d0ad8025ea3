"""Fixtures shared by the integration tests."""

from tests.integration.engines import engine

__all__ = ["engine"]
