"""ACL bindings, durable in ``<data-dir>/acls.json`` (replaced atomically, fsynced)."""

from __future__ import annotations

import json
from pathlib import Path

from onceflow.broker.security.acl_model import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from onceflow.log.durability import write_atomically

FILE_NAME = "acls.json"


class AclStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self._acls: list[AclBinding] = []
        self.version = 0  # bumped on every change (the authorizer's cache key)
        if self.path.exists():
            self._acls = [_decode(entry) for entry in json.loads(self.path.read_text())]

    def all(self) -> list[AclBinding]:
        return list(self._acls)

    def of_type(self, resource_type: ResourceType) -> list[AclBinding]:
        return [acl for acl in self._acls if acl.resource_type == resource_type]

    def add(self, bindings: list[AclBinding]) -> None:
        new = [b for b in dict.fromkeys(bindings) if b not in self._acls]
        if new:
            self._save([*self._acls, *new])

    def remove(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Delete every binding matching any filter; the bindings each filter matched."""
        matched = [[acl for acl in self._acls if f.matches(acl)] for f in filters]
        gone = {acl for bindings in matched for acl in bindings}
        if gone:
            self._save([acl for acl in self._acls if acl not in gone])
        return matched

    def _save(self, acls: list[AclBinding]) -> None:
        write_atomically(self.path, json.dumps([_encode(a) for a in acls], indent=1).encode())
        self._acls = acls
        self.version += 1


def _encode(acl: AclBinding) -> dict:
    return {
        "resource_type": acl.resource_type.name,
        "resource_name": acl.resource_name,
        "pattern_type": acl.pattern_type.name,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation.name,
        "permission": acl.permission.name,
    }


def _decode(entry: dict) -> AclBinding:
    return AclBinding(
        resource_type=ResourceType[entry["resource_type"]],
        resource_name=entry["resource_name"],
        pattern_type=PatternType[entry["pattern_type"]],
        principal=entry["principal"],
        host=entry["host"],
        operation=Operation[entry["operation"]],
        permission=Permission[entry["permission"]],
    )
