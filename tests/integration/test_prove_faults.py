"""``onceflow prove --faults broker|network|coordinator-cut|delay`` on the embedded broker:
each finds a pipeline that pipeline kills never break, and its fixed twin holds; the
files' faults (power-loss, disk-full, db-lock) land and a correct pipeline holds.

* broker, network: a copier that resumes from its own output with a non-idempotent
  producer (examples/prove/faults/output_copier.py) writes a batch twice when the broker
  dies after writing it, or the answer is lost on a dropped connection, and the producer
  retries; with ``--idempotent`` the broker drops the retry;
* coordinator-cut: two workers keeping their offsets in SQLite without fencing
  (unfenced_consumer.py) both write what one of them lost to the other; ``--fenced``
  (compare-and-set on the stored offset) holds;
* delay: the same copier, idempotent, that sends again what a ``flush(1)`` left
  unacknowledged (``--flush-timeout 1``) duplicates it when the network is slow (the
  copies sent again are new records); waiting for every delivery report holds. Kills
  alone leave its resending dormant only while every answer comes within the timeout, so
  that case gives it 30 s: with 1 s, a fresh-clone make test once failed with no fault
  injected: one trial's answers came late for about 10 s while the disk stalled (beside
  it, a module broker's stop took 17 s and another's start 19 s, the CPU mostly idle).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.integration.console_script import onceflow

FAULTS = Path(__file__).resolve().parents[2] / "examples" / "prove" / "faults"
COPIER = ("--input", "orders", "--output", "topic:orders-copy")
UNFENCED = ("--input", "orders", "--output", "table:orders", "--schema", "schema.sql",
            "--workers", "2")  # fmt: skip
RESENDING = ("output_copier.py", "--idempotent", "--flush-timeout", "1")
CASES = [  # (what, options, script and its flags, exit code)
    ("broker finds the retry", (*COPIER, "--faults", "broker"), ["output_copier.py"], 1),
    ("broker, idempotent", (*COPIER, "--faults", "broker"),
     ["output_copier.py", "--idempotent"], 0),
    ("network finds the retry", (*COPIER, "--faults", "network"), ["output_copier.py"], 1),
    ("kills never break the copier", COPIER, ["output_copier.py"], 0),
    ("coordinator-cut finds the zombie", (*UNFENCED, "--faults", "coordinator-cut"),
     ["unfenced_consumer.py"], 1),
    ("coordinator-cut, fenced", (*UNFENCED, "--faults", "coordinator-cut"),
     ["unfenced_consumer.py", "--fenced"], 0),
    ("kills never break the unfenced", UNFENCED, ["unfenced_consumer.py"], 0),
    ("delay finds the resend", (*COPIER, "--faults", "delay"), [*RESENDING], 1),
    ("delay, waits for every report", (*COPIER, "--faults", "delay"),
     ["output_copier.py", "--idempotent"], 0),
    ("kills never break the resend", COPIER,
     ["output_copier.py", "--idempotent", "--flush-timeout", "30"], 0),
    # The files' faults land, and what the broker acknowledged survives them.
    ("power-loss, idempotent", (*COPIER, "--faults", "power-loss"),
     ["output_copier.py", "--idempotent"], 0),
    ("disk-full, idempotent", (*COPIER, "--faults", "disk-full"),
     ["output_copier.py", "--idempotent"], 0),
    ("db-lock, fenced", (*UNFENCED, "--faults", "db-lock"),
     ["unfenced_consumer.py", "--fenced"], 0),
]  # fmt: skip


@pytest.mark.parametrize(("what", "options", "script", "code"), CASES, ids=[c[0] for c in CASES])
def test_each_fault_kind_finds_what_only_it_breaks(
    what: str, options: tuple[str, ...], script: list[str], code: int, tmp_path: Path
) -> None:
    result = onceflow(
        "prove", "command", *options, "--quick", "--seed", "3", "--work-dir", str(tmp_path),
        "--", sys.executable, *script, cwd=FAULTS, timeout=600,
    )  # fmt: skip
    assert result.returncode == code, result.stdout + result.stderr
    if code == 1:  # the verdict and its replay line name the fault kind that broke it
        kind = options[options.index("--faults") + 1]
        lines = result.stdout.splitlines()
        verdict = [line for line in lines if "exactly-once BROKEN: " in line]
        assert len(verdict) == 1, result.stdout
        assert "duplicated after " in verdict[0] and f"{kind}/" in verdict[0], result.stdout
        replay = [line for line in lines if line.lstrip().startswith("replay:")]
        assert len(replay) == 1, result.stdout
        assert f"--kills {kind}/" in replay[0] or f",{kind}/" in replay[0], result.stdout
    else:
        assert "exactly-once held: " in result.stdout and "INCOMPLETE" not in result.stdout
