"""What the pipeline writes, and how an output record maps back to an input event.

An output is ``table:NAME`` (a table of the trial's SQLite database) or ``topic:NAME``
(read read_committed; records of aborted transactions are flagged). The mapping says
which field carries the input's event id and key: by default ``id`` and ``key`` (a
column, or a field of the JSON value; the syntax of ``onceflow verify --id-field``).
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.faults.outputs import Output, OutputError
from onceflow.prove.errors import ProveError, WrongMapping
from onceflow.verify.audit import Sink
from onceflow.verify.extract import Extractor
from onceflow.verify.sources import SourceError, read_output_topic, read_table


@dataclass(frozen=True, slots=True)
class Mapping:
    id_field: str = "id"
    key_field: str | None = "key"

    def extractor(self) -> Extractor:
        try:
            return Extractor(self.id_field, self.key_field)
        except ValueError as error:
            raise ProveError(f"wrong mapping: {error}") from None


def parse_outputs(texts: list[str] | tuple[str, ...]) -> list[Output]:
    if not texts:
        raise ProveError(
            "no outputs declared: name what the pipeline writes with --output table:NAME "
            "or --output topic:NAME (or outputs = [...] in the config's [prove] section)"
        )
    try:
        return [Output.parse(text) for text in texts]
    except OutputError as error:
        raise ProveError(str(error)) from None


def read_sinks(
    outputs: list[Output], mapping: Mapping, bootstrap: str, database_url: str | None
) -> list[Sink]:
    """Every output as an audit sink; a mapping no output record fits is an error."""
    extractor = mapping.extractor()
    sinks = []
    for output in outputs:
        try:
            if output.kind == "table":
                if database_url is None:
                    raise ProveError(f"output {output} needs a database")
                sink = read_table(database_url, extractor, table=output.name)
            else:
                sink = read_output_topic(bootstrap, output.name, extractor, timeout=30)
        except SourceError as error:
            raise ProveError(f"output {output} cannot be read: {error}") from None
        if sink.unreadable and not sink.records:
            raise WrongMapping(
                f"wrong mapping: {sink.unreadable[0].reason} in every record of {output} "
                f"(id field {mapping.id_field!r}, key field {mapping.key_field!r})"
            )
        sinks.append(sink)
    return sinks
