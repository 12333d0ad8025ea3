"""SASL PLAIN (RFC 4616): ``authzid NUL authcid NUL password`` in one message."""

from __future__ import annotations


class PlainFailure(Exception):
    """The PLAIN message is malformed; the message is for the broker's log only."""


def parse_plain(message: bytes) -> tuple[str, str]:
    """(username, password) of a PLAIN message."""
    parts = message.split(b"\0")
    if len(parts) != 3:
        raise PlainFailure("PLAIN message is not authzid NUL authcid NUL password")
    try:
        authzid, username, password = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError:
        raise PlainFailure("PLAIN message is not UTF-8") from None
    if not username or not password:
        raise PlainFailure("PLAIN message has an empty username or password")
    if authzid and authzid != username:
        raise PlainFailure("PLAIN authorization id differs from the username")
    return username, password


def plain_message(username: str, password: str) -> bytes:
    return b"\0" + username.encode() + b"\0" + password.encode()
