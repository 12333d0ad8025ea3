"""Helpers of the topics.yaml tests (test_topics_spec_*.py): a spec file written from
indented YAML, and the problems loading one reports."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from onceflow.topics.spec import SpecError, load


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topics.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problems(tmp_path: Path, text: str, env: str | None = None) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        load(path, env)
    return [str(problem) for problem in caught.value.problems]
