"""``onceflow docs`` as a pip user without a clone meets it: from a built wheel.

The wheel is built from this checkout and installed (without dependencies, which the
test's environment has) into a directory of its own; its console script runs from a
directory that has no docs/ beside it, so the pages can only come from the wheel.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pip(*args: str) -> None:
    """``pip ARGS --quiet --no-deps`` with this interpreter's pip."""
    command = [sys.executable, "-m", "pip", *args, "--quiet", "--no-deps"]
    subprocess.run(command, check=True, capture_output=True, timeout=600)


def test_docs_prints_the_pages_installed_from_the_wheel(tmp_path):
    wheels = tmp_path / "wheels"
    pip("wheel", "--wheel-dir", str(wheels), str(ROOT))
    (wheel,) = wheels.glob("onceflow-*.whl")
    installed = tmp_path / "site"
    pip("install", "--target", str(installed), str(wheel))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ONCEFLOW_")},
        "PYTHONPATH": str(installed),  # ahead of the checkout the test environment has
    }
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, capture_output=True, text=True, timeout=60, env=env, cwd=elsewhere, check=False
        )

    where = run(sys.executable, "-c", "import onceflow; print(onceflow.__file__)")
    assert where.stdout.startswith(str(installed)), where.stdout + where.stderr
    script = str(installed / "bin" / "onceflow")
    page = run(script, "docs", "cli")
    assert page.returncode == 0, page.stderr
    assert page.stdout == (ROOT / "docs" / "cli.md").read_text()
    listing = run(script, "docs")
    assert listing.returncode == 0, listing.stderr
    names = [line.split()[0] for line in listing.stdout.splitlines()]
    assert names == sorted(path.stem for path in (ROOT / "docs").glob("*.md"))
    assert "verify Verifying exactly-once" in " ".join(listing.stdout.split())
    unknown = run(script, "docs", "nosuch")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("error: no page 'nosuch'; the pages: architecture, ")
