"""PLAIN users from the file named by ``sasl.plain.users.file``: ``name=password`` lines.

Blank lines and lines starting with ``#`` are ignored. The file plays the part of the
``user_NAME="password"`` entries in a Kafka broker's JAAS configuration.
"""

from __future__ import annotations

from pathlib import Path


def load_plain_users(path: str) -> dict[str, str]:
    if not path:
        return {}
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ValueError(f"sasl.plain.users.file: cannot read {path!r}: {error.strerror}") from None
    users = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, separator, password = line.partition("=")
        if not separator or not name.strip() or not password:
            raise ValueError(f"sasl.plain.users.file: line {number} is not name=password")
        users[name.strip()] = password
    return users
