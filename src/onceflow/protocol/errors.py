"""Kafka error codes (from kio) and the exception the broker raises to answer one."""

from __future__ import annotations

from types import MappingProxyType

from kio.schema.errors import ErrorCode

__all__ = ["NO_ERROR", "ErrorCode", "ErrorOutcome", "KafkaError"]


class KafkaError(Exception):
    """An error the broker answers with a Kafka error code and an optional message."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


NO_ERROR = MappingProxyType({"error_code": ErrorCode.none, "error_message": None})


class ErrorOutcome:
    """The error code and message of one entry of a response, found by running its work in
    ``with ErrorOutcome() as outcome:``. A KafkaError raised inside is caught and becomes
    the outcome; any other exception passes through."""

    __slots__ = ("code", "message")

    def __init__(self) -> None:
        self.code = ErrorCode.none
        self.message: str | None = None

    def __enter__(self) -> ErrorOutcome:
        return self

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> bool:
        if not isinstance(error, KafkaError):
            return False
        self.code, self.message = error.code, error.message
        return True

    @property
    def fields(self) -> dict[str, object]:
        """``error_code`` and ``error_message``, to spread into an entry (``build`` drops
        the message where the schema has none)."""
        return {"error_code": self.code, "error_message": self.message}
