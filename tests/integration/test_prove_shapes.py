"""``onceflow prove`` on the pipelines users have: a plain confluent-kafka consumer in every
group shape, with Kafka's default settings, run the way a user runs it (the installed
``onceflow`` script, the pipeline's own command line).

The shapes (examples/prove/shapes/consumer.py): subscribe() with the classic protocol and
the default 45 s session timeout, cooperative-sticky, KIP-848 (``group.protocol=consumer``),
static membership and assign(); and one subscribe() pipeline of three processes
(``--workers 3``) rebalancing while they are killed. Each broken one (offsets committed to
Kafka after the database commit) must be found, each fixed one (offsets in the rows'
transaction) must hold with every planned fault landed. The issue's own command, shrinking
on, must be found, shrunk to one kill, and its replay line must break it again.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.integration.console_script import onceflow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "prove"
SHAPES = {
    "subscribe": [],
    "cooperative-sticky": ["--cooperative"],
    "kip-848": ["--protocol", "consumer"],
    "static-membership": ["--instance-id", "orders-{worker}"],
    "assign": ["--assign"],
}
PROVE = ["prove", "command", "--input", "orders", "--output", "table:orders"]


def prove(directory: Path, *args: str, timeout: float = 300):
    result = onceflow(*args, timeout=timeout, cwd=directory)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def shape(name: str, *args: str, fixed: bool, tmp_path: Path):
    command = [sys.executable, "consumer.py", *SHAPES[name], *(["--fixed"] if fixed else [])]
    return prove(EXAMPLES / "shapes", *PROVE, "--schema", "schema.sql", "--work-dir",
                 str(tmp_path), *args, "--", *command)  # fmt: skip


@pytest.mark.parametrize("name", SHAPES)
def test_a_consumer_committing_after_its_database_is_caught_in_every_shape(
    name: str, tmp_path: Path
) -> None:
    result = shape(name, "--kills", "request_sent:2", fixed=False, tmp_path=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "exactly-once BROKEN: " in result.stdout and " duplicated after 1 kill" in result.stdout


@pytest.mark.parametrize("name", SHAPES)
def test_a_consumer_keeping_its_offsets_with_its_rows_holds_in_every_shape(
    name: str, tmp_path: Path
) -> None:
    result = shape(name, "--quick", "--seed", "5", fixed=True, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "exactly-once held: 4 kills" in result.stdout, result.stdout  # one per trigger


@pytest.mark.parametrize(("fixed", "code"), [(False, 1), (True, 0)], ids=["broken", "fixed"])
def test_three_subscribed_workers_killed_one_by_one(fixed: bool, code: int, tmp_path: Path):
    result = shape("subscribe", "--quick", "--seed", "6", "--workers", "3", fixed=fixed,
                   tmp_path=tmp_path)  # fmt: skip
    assert result.returncode == code, result.stdout + result.stderr
    assert ("BROKEN" in result.stdout) is not fixed, result.stdout


def test_the_ordinary_consumer_is_caught_shrunk_and_its_replay_breaks_it_again(tmp_path: Path):
    def run(*args: str, mode: str, work: str):
        command = [sys.executable, "subscribe_consumer.py", "--mode", mode, "--input",
                   "{input_topic}", "--db", "{database_path}"]  # fmt: skip
        return prove(EXAMPLES / "command", *args, "--work-dir", str(tmp_path / work), "--",
                     *command)  # fmt: skip

    broken = run(*PROVE, "--quick", "--seed", "11", mode="broken", work="proof")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "duplicated after 1 kill" in broken.stdout  # shrunk to one kill
    (replay,) = [line for line in broken.stdout.splitlines() if line.startswith("replay: ")]
    words = shlex.split(replay.removeprefix("replay: "))
    assert words[:2] == ["onceflow", "prove"] and "--kills" in words
    kills = words[words.index("--kills") + 1]
    again = run(*PROVE, "--quick", "--seed", "11", "--kills", kills, mode="broken", work="again")
    assert again.returncode == 1 and "duplicated" in again.stdout, again.stdout + again.stderr
    fixed = run(*PROVE, "--quick", "--seed", "11", mode="fixed", work="fixed")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
