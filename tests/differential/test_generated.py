"""Generated sequences against both brokers: a fixed set of seeds in ``make test``; a
long run (``ONCEFLOW_DIFF_SECONDS``, ``make stress``) from fresh seeds that prints the
sequences run per second and every divergence found, shrunk."""

from __future__ import annotations

import os
import random
import time

import pytest

from tests.differential.generator import generate

pytestmark = pytest.mark.xdist_group("differential")

BOUNDED_SEEDS = range(int(os.environ.get("ONCEFLOW_DIFF_SEEDS", "30")))
LENGTH = 16


@pytest.mark.parametrize(
    "seed", [BOUNDED_SEEDS[i::6] for i in range(6)], ids=lambda s: f"seeds{s.start}"
)
def test_generated_sequences(pair, seed) -> None:
    failures = [
        outcome for outcome in (generate(pair, one, LENGTH) for one in seed) if outcome.differences
    ]
    assert not failures, "\n\n".join(outcome.render() for outcome in failures)


@pytest.mark.skipif(not os.environ.get("ONCEFLOW_DIFF_SECONDS"), reason="long run: make stress")
def test_generated_long_run(pair) -> None:
    seconds = float(os.environ["ONCEFLOW_DIFF_SECONDS"])
    first = random.SystemRandom().randrange(1 << 30)
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    runs, failures = 0, []
    seed = first
    while time.monotonic() < deadline:
        outcome = generate(pair, seed, LENGTH)
        runs += 1
        if outcome.differences:
            failures.append(outcome)
            print(f"\nDIVERGENCE (shrunk)\n{outcome.render()}", flush=True)
        if runs % 50 == 0:
            rate = runs / (time.monotonic() - started)
            print(f"{runs} sequences, {rate:.1f}/s, {len(failures)} diverging", flush=True)
        seed += 1
    rate = runs / (time.monotonic() - started)
    print(
        f"\ngenerated run: seeds {first}..{seed - 1}: {runs} sequences, "
        f"{rate:.2f} sequences/s, {len(failures)} diverging"
    )
    assert not failures, "\n\n".join(outcome.render() for outcome in failures)
