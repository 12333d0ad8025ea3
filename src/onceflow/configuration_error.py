"""The error every part of onceflow raises for settings that cannot work."""

from __future__ import annotations


class ConfigurationError(ValueError):
    """onceflow was configured in a way that cannot work (or is unsafe): raised before
    anything connects, naming the setting and why."""
