"""``run_verify``: read the inputs, the outputs and the dead letters, then audit.

What ``onceflow verify``, the chaos harness and the tests call.
"""

from __future__ import annotations

from collections.abc import Sequence

from onceflow.verify.extract import Extractor
from onceflow.verify.report import AuditReport
from onceflow.verify.sources import (
    Cluster,
    SourceError,
    SourceNotFound,
    matching_topics,
    read_dead_letters,
    read_input,
    read_output_topic,
    read_table,
)


def input_topics(bootstrap: Cluster, inputs: str | Sequence[str]) -> list[str]:
    """Topic names; one starting with ``^`` is a regular expression (like subscribe())."""
    names: list[str] = []
    for name in [inputs] if isinstance(inputs, str) else inputs:
        if name.startswith("^"):
            found = matching_topics(bootstrap, name)
            if not found:
                raise SourceNotFound(f"no topic matches the input pattern {name!r}")
            names += found
        else:
            names.append(name)
    return list(dict.fromkeys(names))


def run_verify(
    bootstrap: Cluster,
    input_topic: str | Sequence[str],
    *,
    id_field: str,
    key_field: str | None = None,
    output_topic: str | None = None,
    database_url: str | None = None,
    table: str | None = None,
    query: str | None = None,
    order_by: str | None = None,
    output_id_field: str | None = None,
    output_key_field: str | None = None,
    abort_marker: str | None = None,
    dead_letter_topic: str | None = None,
    timeout: float = 60.0,
) -> AuditReport:
    """Audit the outputs against one or several input topics.

    ``bootstrap`` is the bootstrap servers or a whole librdkafka client config. Events in
    ``dead_letter_topic`` count as accounted for (and are reported as dead-lettered).
    """
    if output_topic is None and database_url is None:
        raise SourceError("nothing to verify: give an output topic and/or a database")
    if database_url is not None and (table is None) == (query is None):
        raise SourceError("with a database give exactly one of a table or a query")
    topics = input_topics(bootstrap, input_topic)
    extractor = Extractor(id_field, key_field)
    out_extractor = Extractor(output_id_field or id_field, output_key_field or key_field)
    source = read_input(bootstrap, topics, extractor, timeout)
    sinks = []
    if database_url is not None:
        sinks.append(
            read_table(
                database_url,
                out_extractor,
                table=table,
                query=query,
                order_by=order_by,
                check_columns=True,
            )
        )
    if output_topic is not None:
        sinks.append(
            read_output_topic(
                bootstrap, output_topic, out_extractor, abort_marker=abort_marker, timeout=timeout
            )
        )
    dead_lettered: set[str] = set()
    dead_unreadable = []
    if dead_letter_topic is not None:
        dead_lettered, dead_unreadable = read_dead_letters(
            bootstrap, dead_letter_topic, extractor, timeout
        )
    context = {
        "bootstrap": bootstrap if isinstance(bootstrap, str) else bootstrap["bootstrap.servers"],
        "input_topic": topics[0] if len(topics) == 1 else topics,
        "output_topic": output_topic,
        "dead_letter_topic": dead_letter_topic,
        "table": table,
        "query": query,
        "id_field": id_field,
        "key_field": key_field,
        "input_end_offsets": {
            (str(p) if len(topics) == 1 else f"{topic}:{p}"): r.stable
            for topic, ranges in source.ranges_by_topic.items()
            for p, r in sorted(ranges.items())
        },
        "order_checked": {sink.name: sink.check_order for sink in sinks},
    }
    return source.audit(sinks, context, dead_lettered, dead_unreadable)
