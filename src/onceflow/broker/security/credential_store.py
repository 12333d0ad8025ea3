"""SCRAM credentials, durable in ``<data-dir>/scram-credentials.json``.

Only what RFC 5802 lets a server keep: salt, stored key, server key, iterations. The file
is replaced atomically (fsynced) on every change and readable by its owner only.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from onceflow.log.durability import write_atomically
from onceflow.security.scram import ScramCredential

FILE_NAME = "scram-credentials.json"


class ScramCredentialStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self._users: dict[str, dict[str, ScramCredential]] = {}
        if self.path.exists():
            self._users = _decode(json.loads(self.path.read_text()))

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(mechanisms) for user, mechanisms in self._users.items()}

    def apply(
        self,
        upserts: list[tuple[str, str, ScramCredential]],
        deletions: list[tuple[str, str]],
    ) -> None:
        """Delete and upsert in one durable write."""
        users = self.users()
        for user, mechanism in deletions:
            users.get(user, {}).pop(mechanism, None)
            if user in users and not users[user]:
                del users[user]
        for user, mechanism, credential in upserts:
            users.setdefault(user, {})[mechanism] = credential
        write_atomically(self.path, json.dumps(_encode(users), indent=1).encode(), mode=0o600)
        self._users = users


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _encode(users: dict[str, dict[str, ScramCredential]]) -> dict:
    return {
        user: {
            mechanism: {
                "salt": _b64(c.salt),
                "stored_key": _b64(c.stored_key),
                "server_key": _b64(c.server_key),
                "iterations": c.iterations,
            }
            for mechanism, c in mechanisms.items()
        }
        for user, mechanisms in users.items()
    }


def _decode(document: dict) -> dict[str, dict[str, ScramCredential]]:
    return {
        user: {
            mechanism: ScramCredential(
                salt=base64.b64decode(c["salt"]),
                stored_key=base64.b64decode(c["stored_key"]),
                server_key=base64.b64decode(c["server_key"]),
                iterations=int(c["iterations"]),
            )
            for mechanism, c in mechanisms.items()
        }
        for user, mechanisms in document.items()
    }
