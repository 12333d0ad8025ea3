"""A local driver's scratch folder is named after its process, and a later session removes
the folders of processes that have ended (``onceflow.spark.scratch``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from onceflow.spark import scratch

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def test_sweep_removes_the_folders_of_ended_processes_only(tmp_path: Path) -> None:
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    try:
        alive_name = scratch.owner_name(alive.pid)
        assert alive_name is not None and alive_name.startswith(f"{alive.pid}-")
        assert scratch.owner_name(ended.pid) is None
        kept = tmp_path / alive_name
        gone = tmp_path / f"{ended.pid}-12345"
        reused = tmp_path / f"{alive.pid}-1"  # the same pid, an earlier process
        other = tmp_path / "not-a-driver"
        for folder in (kept, gone, reused, other):
            (folder / "blockmgr-1").mkdir(parents=True)
        removed = scratch.sweep(tmp_path)
        assert sorted(removed) == sorted([gone, reused])
        assert kept.is_dir() and other.is_dir()
    finally:
        alive.kill()
        alive.wait()
    assert scratch.sweep(tmp_path) == [kept]


def test_scratch_dir_is_this_process_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(scratch.tempfile, "gettempdir", lambda: str(tmp_path))
    folder = scratch.scratch_dir()
    assert folder == tmp_path / f"onceflow-spark-{os.getuid()}" / scratch.owner_name(os.getpid())
    assert folder.is_dir() and scratch.scratch_dir() == folder
