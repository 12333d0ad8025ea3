"""Why a topic or table could not be read for an audit (each maps to an exit code)."""


class SourceError(RuntimeError):
    """A topic or table cannot be read completely."""


class SourceNotFound(SourceError):
    """A topic to audit does not exist (an unknown name: exit 1, like other commands)."""


class SourceNotAuthorized(SourceError):
    """The principal may not describe or read a topic to audit."""
