"""The lines ``onceflow log dump`` prints, its options and what the dumpers share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from onceflow.log.record_decoders import RecordDecoder, decode_as_text

RECORD_INDENT = "|"


class DumpError(Exception):
    """A file that cannot be dumped at all: missing, unreadable, or of an unknown kind."""


@dataclass(frozen=True, slots=True)
class DumpLine:
    text: str
    problem: bool = False  # the line reports damage in the file


@dataclass(frozen=True, slots=True)
class DumpOptions:
    print_data_log: bool = False
    decoder: RecordDecoder = decode_as_text
    max_bytes: int | None = None  # read no batch that ends past this position


def base_offset_of(path: Path) -> int | None:
    """The offset a segment file is named after (``00000000000000000042.log`` -> 42)."""
    try:
        return int(path.stem)
    except ValueError:
        return None


def read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise DumpError(f"{path}: {error.strerror or error}") from None
