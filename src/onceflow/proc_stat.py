"""A process's fields in ``/proc/<pid>/stat`` (Linux), as proc(5) numbers them.

The second field, the command name, is in parentheses and may itself hold spaces and
parentheses: the fields after it start after the last ``)``.
"""

from __future__ import annotations

from pathlib import Path

STATE = 3
PARENT = 4  # the parent's pid
FLAGS = 9
NICE = 19
START_TIME = 22  # clock ticks after boot


def stat_fields(pid: int) -> dict[int, str]:
    """Field number (proc(5)'s, from 3) -> value (of a thread too: ``/proc/<tid>`` is there
    for every thread id); OSError if there is no such process
    (FileNotFoundError) or no ``/proc``."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return dict(enumerate(stat[stat.rindex(")") + 2 :].split(), start=3))
