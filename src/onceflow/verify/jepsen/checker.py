"""The checker: every violation of the rules in the package docstring, from a history."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from onceflow.verify.jepsen.history import ABORTED, COMMITTED, INDETERMINATE, History, Txn

VIOLATIONS = (
    "aborted_read",
    "lost_write",
    "duplicate",
    "nonmonotonic_offset",
    "order",
    "partial_indeterminate",
    "unstable_read",
    "wrong_partition",
    "unknown_value",
    "stuck",
    "invalid_run",
)


@dataclass(slots=True)
class CheckResult:
    violations: dict[str, list[dict[str, Any]]]
    stats: dict[str, Any]

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def summary(self, limit: int = 5) -> str:
        lines = [json.dumps(self.stats, sort_keys=True)]
        for kind in VIOLATIONS:
            found = self.violations.get(kind, [])
            if found:
                lines.append(f"{kind}: {len(found)}, e.g. {found[:limit]}")
        return "\n".join(lines)


def _sequence(value: str) -> int:
    return int(value.rsplit(":", 1)[1])


def check(history: History) -> CheckResult:
    """Every violation of the rules in the module docstring (empty lists: none)."""
    violations: dict[str, list[dict[str, Any]]] = {kind: [] for kind in VIOLATIONS}
    written: dict[str, tuple[Txn, int]] = {}  # value -> (txn, partition)
    for txn in history.txns:
        for partition, value in txn.writes:
            written[value] = (txn, partition)

    for event in history.events:
        if event.get("kind") == "worker_failed":
            violations["invalid_run"].append(event)
    if not history.final_complete:
        violations["stuck"].append({"detail": "last stable offset never reached the end"})

    # Final read: duplicates, placement, aborted data.
    final_at: dict[tuple[int, int], str] = {}
    final_count: Counter[str] = Counter()
    for record in history.final:
        final_at[(record.partition, record.offset)] = record.value
        final_count[record.value] += 1
    for value, count in final_count.items():
        if count > 1:
            violations["duplicate"].append({"value": value, "copies": count, "where": "final"})

    all_reads = [*history.reads, *history.final]
    for record in all_reads:
        origin = written.get(record.value)
        if origin is None:
            violations["unknown_value"].append(asdict(record))
            continue
        txn, partition = origin
        if partition != record.partition:
            violations["wrong_partition"].append({**asdict(record), "written_to": partition})
        if txn.outcome == ABORTED:
            violations["aborted_read"].append(
                {**asdict(record), "txn": f"{txn.producer}#{txn.index}"}
            )

    # Committed values are all there; indeterminate ones all or nothing.
    for txn in history.txns:
        visible = [value for _, value in txn.writes if final_count[value]]
        if txn.outcome == COMMITTED and len(visible) < len(txn.writes):
            for partition, value in txn.writes:
                if not final_count[value]:
                    violations["lost_write"].append(
                        {
                            "value": value,
                            "partition": partition,
                            "txn": f"{txn.producer}#{txn.index}",
                        }
                    )
        elif txn.outcome == INDETERMINATE and 0 < len(visible) < len(txn.writes):
            violations["partial_indeterminate"].append(
                {
                    "txn": f"{txn.producer}#{txn.index}",
                    "visible": len(visible),
                    "written": len(txn.writes),
                    "error": txn.error,
                }
            )

    # Consumers: monotonic offsets, one offset per value, reads that stay true.
    last_offset: dict[tuple[str, int], int] = {}
    seen_at: dict[tuple[str, str], int] = {}
    for record in history.reads:
        position = (record.consumer, record.partition)
        previous = last_offset.get(position)
        if previous is not None and record.offset <= previous:
            violations["nonmonotonic_offset"].append({**asdict(record), "previous": previous})
        last_offset[position] = record.offset
        where = seen_at.setdefault((record.consumer, record.value), record.offset)
        if where != record.offset:
            violations["duplicate"].append(
                {**asdict(record), "first_offset": where, "where": "consumer"}
            )
        if history.final_complete:
            final_value = final_at.get((record.partition, record.offset))
            if final_value != record.value:
                violations["unstable_read"].append({**asdict(record), "final": final_value})

    # Per-partition order of each producer's values in the final log.
    last_sequence: dict[tuple[str, int], tuple[int, str]] = {}
    for record in sorted(history.final, key=lambda r: (r.partition, r.offset)):
        origin = written.get(record.value)
        if origin is None:
            continue
        key = (origin[0].producer, record.partition)
        sequence = _sequence(record.value)
        before = last_sequence.get(key)
        if before is not None and sequence <= before[0]:
            violations["order"].append({**asdict(record), "after": before[1]})
        else:
            last_sequence[key] = (sequence, record.value)

    outcomes = Counter(txn.outcome for txn in history.txns)
    indeterminate_visible = sum(
        1
        for txn in history.txns
        if txn.outcome == INDETERMINATE and any(final_count[v] for _, v in txn.writes)
    )
    stats = {
        "txns": len(history.txns),
        COMMITTED: outcomes[COMMITTED],
        ABORTED: outcomes[ABORTED],
        INDETERMINATE: outcomes[INDETERMINATE],
        "indeterminate_visible": indeterminate_visible,
        "values_written": len(written),
        "consumer_reads": len(history.reads),
        "final_records": len(history.final),
        "events": [event["kind"] for event in history.events if "kind" in event],
    }
    return CheckResult(violations, stats)
