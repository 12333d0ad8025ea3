"""A scenario: a name, its steps, and the documented differences it is known to show.

``check(pair, scenario)`` runs it on both brokers and fails on any difference that is not
one of the scenario's ``expect`` entries (known.py), and on an expected one that did not
happen (the documentation would no longer be true)."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from tests.differential.driver import Action, Difference, Pair
from tests.differential.known import KNOWN, Known

_counter = itertools.count()


@dataclass
class Scenario:
    name: str
    actions: list[Action]
    expect: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        flat: list[Action] = []
        for action in self.actions:
            flat.extend(action if isinstance(action, list) else [action])
        self.actions = flat


def scenarios(*items: Scenario) -> list[Scenario]:
    names = [s.name for s in items]
    assert len(names) == len(set(names)), "scenario names must be unique"
    return list(items)


def prefix_for(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40]
    return f"d{next(_counter)}-{slug}-"


def unexplained(
    differences: Iterable[Difference], allowed: Iterable[Known]
) -> tuple[list[Difference], set[str]]:
    """The differences no allowed entry explains, and the ids of the entries used."""
    allowed = list(allowed)
    left: list[Difference] = []
    used: set[str] = set()
    for difference in differences:
        rest = list(difference.paths)
        for known in allowed:
            if difference.api not in known.apis or not known.applies(difference.paths):
                continue
            matched = [path for path in rest if known.regex.search(path)]
            if matched:
                used.add(known.id)
                rest = [path for path in rest if path not in matched]
        if rest:
            difference.paths = rest
            left.append(difference)
    return left, used


def expecting(items: list[Scenario], expected: dict[str, tuple[str, ...]]) -> list[Scenario]:
    """Mark the scenarios named in ``expected`` with the known differences they show."""
    by_name = {scenario.name: scenario for scenario in items}
    for name, ids in expected.items():
        assert all(i in KNOWN for i in ids), ids
        by_name[name].expect = ids
    return items


def check(pair: Pair, scenario: Scenario) -> None:
    differences = pair.run(prefix_for(scenario.name), scenario.actions)
    survey = os.environ.get("ONCEFLOW_DIFF_SURVEY")
    if survey:  # which known differences would explain this scenario (authoring aid)
        left, used = unexplained(differences, KNOWN.values())
        with open(survey, "a") as out:
            out.write(f"{scenario.name}\t{','.join(sorted(used))}\t{len(left)}\n")
    allowed = [KNOWN[i] for i in scenario.expect]
    left, used = unexplained(differences, allowed)
    report = "\n\n".join(d.render() + f"\n(differing: {', '.join(d.paths)})" for d in left)
    assert not left, f"{scenario.name}: {len(left)} unexplained difference(s)\n{report}"
    missing = set(scenario.expect) - used
    assert not missing, (
        f"{scenario.name}: expected differences did not happen: {sorted(missing)} "
        "(update docs/compatibility.md)"
    )
