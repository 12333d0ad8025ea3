"""``onceflow docs``: print the documentation installed with onceflow.

The repository's ``docs/`` is the package's ``onceflow/docs`` (``src/onceflow/docs`` links
to it, and the wheel carries its Markdown files), so a pip installation without a clone
reads the same pages the repository shows.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

import click

from onceflow.cli.options import EXIT_UNAVAILABLE

SUFFIX = ".md"


def installed_docs() -> dict[str, Traversable]:
    """Topic name (the file name without .md) -> the installed page, by name."""
    folder = files("onceflow") / "docs"
    if not folder.is_dir():
        return {}
    pages = {
        page.name.removesuffix(SUFFIX): page
        for page in folder.iterdir()
        if page.name.endswith(SUFFIX)
    }
    return dict(sorted(pages.items()))


def title_of(page: Traversable) -> str:
    """The page's first heading, without the #s."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip().replace("`", "")
    return ""


@click.command("docs")
@click.argument("topic", required=False)
def docs_command(topic: str | None) -> None:
    """Print a page of onceflow's documentation (Markdown), e.g. onceflow docs cli.

    Without TOPIC, list the pages. On a terminal the page goes through a pager
    ($PAGER); into a pipe or a file it is printed as it is.
    """
    pages = installed_docs()
    if topic is None:
        width = max((len(name) for name in pages), default=0)
        for name, page in pages.items():
            click.echo(f"{name:{width}}  {title_of(page)}")
        return
    page = pages.get(topic.removesuffix(SUFFIX).lower())
    if page is None:
        click.echo(f"error: no page {topic!r}; the pages: {', '.join(pages)}", err=True)
        raise SystemExit(EXIT_UNAVAILABLE)
    click.echo_via_pager(page.read_text(encoding="utf-8").rstrip("\n"))  # the pager adds one
