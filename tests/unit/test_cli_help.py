"""Every ``--help`` of every command names only what a pip installation has.

A user who ran ``pip install onceflow`` has no clone: no docs/, examples/, scripts/ or
Makefile. Help that sends them to ``docs/topics.md`` or ``make demo`` sends them nowhere;
``onceflow docs TOPIC`` prints the installed page instead. The walk covers click's whole
command tree, every command's text and every option's help.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import click

from onceflow.cli import main
from onceflow.cli.docs import installed_docs

ROOT = Path(__file__).resolve().parents[2]


def commands(group: click.Command = main, path: tuple[str, ...] = ("onceflow",)) -> Iterator[
    tuple[str, click.Command]
]:  # fmt: skip
    """(``onceflow topics create``, its command) for every command, groups included."""
    yield " ".join(path), group
    if isinstance(group, click.Group):
        context = click.Context(group, info_name=path[-1])
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            assert command is not None, name
            yield from commands(command, (*path, name))


def help_text(name: str, command: click.Command) -> str:
    """What ``NAME --help`` prints, without wrapping (a path is never cut in two)."""
    context = click.Context(command, info_name=name, max_content_width=10_000)
    formatter = context.make_formatter()
    formatter.width = 10_000
    command.format_help(context, formatter)
    return formatter.getvalue()


def repository_only_paths() -> re.Pattern[str]:
    """What only a clone has: its top-level folders and files, and its make targets."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    tops = {name.split("/")[0] for name in tracked} - {"src"}
    folders = sorted(top for top in tops if any(n.startswith(f"{top}/") for n in tracked))
    files = sorted(tops - set(folders))
    makefile = (ROOT / "Makefile").read_text()
    targets = sorted(set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.MULTILINE)))
    alternatives = [
        *(rf"(?<![\w./-]){re.escape(folder)}/" for folder in folders),
        r"(?<![\w./-])src/onceflow/",
        *(rf"(?<![\w./-]){re.escape(file)}\b" for file in files),
        rf"\bmake ({'|'.join(targets)})\b",
    ]
    return re.compile("|".join(alternatives))


def test_the_walk_sees_every_command():
    names = {name for name, _ in commands()}
    assert {"onceflow topics create", "onceflow groups list", "onceflow docs"} <= names
    assert len(names) > 40


def test_no_help_names_a_path_a_pip_installation_lacks():
    pattern = repository_only_paths()
    found = []
    for name, command in commands():
        for line in help_text(name, command).splitlines():
            for match in pattern.finditer(line):
                found.append(f"{name}: {match.group(0)!r} in {line.strip()!r}")
    assert not found, "help texts name what only a clone has:\n" + "\n".join(found)


def test_every_page_a_help_names_is_installed():
    pages = installed_docs()
    named = []
    for name, command in commands():
        for page in re.findall(r"onceflow docs ([a-z-]+)", help_text(name, command)):
            if page not in pages:
                named.append(f"{name}: onceflow docs {page}")
    assert not named, f"no such page (onceflow docs lists {', '.join(pages)}):\n" + "\n".join(named)


def test_every_option_says_what_it_does():
    silent = [
        f"{name} {param.opts[0]}"
        for name, command in commands()
        for param in command.params
        if isinstance(param, click.Option) and not (param.help or "").strip()
    ]
    assert not silent, "options without a help text:\n" + "\n".join(silent)
