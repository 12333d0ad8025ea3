"""The reports page: what ``onceflow verify --json``, ``chaos --out`` and ``prove --json /
--markdown`` wrote into the folder given with ``--reports``, shown as HTML (Markdown
rendered with markdown-it, which rich already brings; a JSON report's verdict on top of
its pretty-printed body; a heat map as the image it is)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from onceflow.admin.errors import NotFound

SHOWN = (".md", ".json")
FILES = (".md", ".json", ".png", ".svg")


@dataclass(frozen=True, slots=True)
class Listed:
    path: str  # relative to the reports folder
    kind: str
    size: int
    modified: float


@dataclass(frozen=True, slots=True)
class Rendered:
    path: str
    html: str  # already escaped or rendered
    verdict: str | None


def listing(folder: Path | None) -> list[Listed]:
    if folder is None or not folder.is_dir():
        return []
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in FILES:
            info = path.stat()
            found.append(
                Listed(str(path.relative_to(folder)), path.suffix[1:], info.st_size, info.st_mtime)
            )
    return sorted(found, key=lambda item: -item.modified)


def resolve(folder: Path | None, relative: str) -> Path | None:
    """The file under ``folder`` (never outside it), or None."""
    if folder is None:
        return None
    root = folder.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root) or not path.is_file() or path.suffix not in FILES:
        return None
    return path


def render(folder: Path | None, relative: str) -> Rendered:
    from markdown_it import MarkdownIt

    path = resolve(folder, relative)
    if path is None or path.suffix not in SHOWN:
        raise NotFound(f"no report {relative!r} in the reports folder")
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".md":
        return Rendered(
            relative, MarkdownIt("commonmark", {"html": False}).enable("table").render(text), None
        )
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotFound(f"{relative} is not JSON: {error}") from None
    verdict = document.get("verdict") if isinstance(document, dict) else None
    if verdict is None and isinstance(document, dict) and "ok" in document:
        verdict = "no anomalies" if document["ok"] else "anomalies found"
    from html import escape

    return Rendered(relative, f"<pre>{escape(json.dumps(document, indent=2))}</pre>", verdict)
