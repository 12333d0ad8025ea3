"""Every known difference the differential tests accept is documented in
docs/compatibility.md under its id (no broker needed)."""

from __future__ import annotations

from pathlib import Path

from tests.differential.known import KNOWN

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"


def test_every_known_difference_is_documented() -> None:
    text = DOC.read_text()
    section = text[text.index("## Differences found by the differential tests") :]
    missing = [known for known in KNOWN if f"**{known}**" not in section]
    assert not missing, f"not in docs/compatibility.md: {missing}"
