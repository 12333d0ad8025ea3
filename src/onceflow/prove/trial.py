"""One trial: a fresh broker and database, the input written, the pipeline run through one
kill schedule until its input is drained, then audited with ``onceflow.verify``."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.broker.process import BrokerProcess
from onceflow.prove.errors import ProveError, WrongMapping
from onceflow.prove.expect import Expectation, expectations, read_rows
from onceflow.prove.generator import InputFeeder, input_values, produce_input
from onceflow.prove.lives import Life, LifeResult, Limits
from onceflow.prove.options import ProofOptions
from onceflow.prove.outputs import Output, read_sinks
from onceflow.prove.probe import OutputProbe, group_committed_to_end
from onceflow.prove.schedule import Kill, Schedule
from onceflow.prove.target import Target
from onceflow.verify.extract import Extractor
from onceflow.verify.report import AuditReport
from onceflow.verify.sources import SourceError, read_dead_letters, read_input

INPUT_EXTRACTOR = Extractor("id", "key")
FEED_SECONDS_PER_KILL = 3.0  # command mode: the input stream lasts about this per kill


@dataclass(slots=True)
class TrialResult:
    number: int
    schedule: Schedule
    lives: list[LifeResult]
    report: AuditReport
    seconds: float
    directory: Path
    distinct_outputs: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def landed(self) -> list[Kill]:
        return [life.kill for life in self.lives if life.landed and life.kill is not None]

    @property
    def mid_processing(self) -> int:
        """Landed kills that interrupted unfinished work: the pipeline had input left
        and wrote more outputs after its restart."""
        return sum(
            1
            for life, after in zip(self.lives, self.lives[1:], strict=False)
            if life.landed and after.outputs_after > after.outputs_before
        )

    @property
    def ok(self) -> bool:
        return self.report.ok

    @property
    def outcome(self) -> str:
        """ok, lost, duplicated, lost+duplicated, or the first other anomaly kind."""
        counts = {kind: n for kind, n in self.report.counts.items() if n}
        if not counts:
            return "ok"
        lost, duplicated = "missing" in counts, "duplicated" in counts
        if lost and duplicated:
            return "lost+duplicated"
        if lost or duplicated:
            return "lost" if lost else "duplicated"
        return next(iter(counts))


class Trials:
    """Runs trials one after another on one broker (the embedded one, started on first
    use, or ``--bootstrap``): each trial deletes and creates the pipeline's topics again,
    deletes the groups that committed offsets on them, and gets its own directory and
    database. ``close()`` stops the embedded broker."""

    def __init__(
        self, target: Target, options: ProofOptions, work: Path,
        on_life: Callable[[int, LifeResult], None] | None = None,
    ) -> None:  # fmt: skip
        self.target = target
        self.options = options
        self.work = work
        self.on_life = on_life
        self.count = 0
        self.broker: BrokerProcess | None = None
        self.expectations: list[Expectation] = []
        if target.expect is not None:  # the input is the same in every trial
            values = [v for _, v in input_values(options.record_count, options.keys,
                                                 target.generator)]  # fmt: skip
            self.expectations = expectations(target.expect, values, target.outputs)
        expected = {e.output for e in self.expectations}
        self.id_outputs: list[Output] = [o for o in target.outputs if o not in expected]
        self.input_extractor = target.mapping.extractor() if target.generator else INPUT_EXTRACTOR

    def bootstrap(self) -> str:
        if self.options.bootstrap:
            return self.options.bootstrap
        if self.broker is None:
            self.broker = BrokerProcess(self.work / "broker", log_path=self.work / "broker.log")
            try:
                self.broker.start()
            except RuntimeError as error:
                self.broker = None
                raise ProveError(f"the embedded broker did not start: {error}") from None
        return self.broker.bootstrap

    def close(self) -> None:
        if self.broker is not None:
            self.broker.kill()  # nothing in it is kept
            self.broker = None

    def run(self, schedule: Schedule) -> TrialResult:
        self.count += 1
        directory = self.work / f"trial-{self.count}"
        directory.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        bootstrap = self.bootstrap()
        _reset(bootstrap, self._topics())
        return self._run(schedule, bootstrap, directory, started)

    def _topics(self) -> list[str]:
        t = self.target
        names = [t.input_topic, *t.other_inputs]
        names += [o.name for o in t.outputs if o.kind == "topic"]
        if t.dead_letter_topic:
            names.append(t.dead_letter_topic)
        return list(dict.fromkeys(names))

    def _run(
        self, schedule: Schedule, bootstrap: str, directory: Path, started: float
    ) -> TrialResult:
        target, options = self.target, self.options
        _create_topics(bootstrap, self._topics(), options.partitions, target.topics_file)
        database = directory / target.database_name if target.database_name else None
        if database is not None and target.schema is not None:
            _apply_schema(database, target.schema)
        records = options.record_count
        feeder = None
        if target.mode != "runner":  # a stream, spread over the lives
            rate = records / (FEED_SECONDS_PER_KILL * max(1, len(schedule)))
            feeder = InputFeeder(bootstrap, target.input_topic, records, options.keys, rate,
                                 target.generator)  # fmt: skip
        else:  # all at once: crash points count batches, whatever the timing
            produce_input(bootstrap, target.input_topic, records, options.keys,
                          factory=target.generator)  # fmt: skip
        progress = {e.output.name: p for e in self.expectations if (p := e.progress(records))}
        probe = OutputProbe(target.outputs, bootstrap, database, progress)
        database_url = f"sqlite:///{database}" if database is not None else None

        def drained() -> bool:
            if feeder is not None and not feeder.done.is_set():
                return False
            if group_committed_to_end(bootstrap, target.input_topic):
                return True
            try:
                sinks = read_sinks(self.id_outputs, target.mapping, bootstrap, database_url)
            except WrongMapping:
                raise
            except ProveError:
                return False
            if not all(len({r.id for r in sink.records}) >= records for sink in sinks):
                return False
            for expectation in self.expectations:
                rows = read_rows(database, expectation)
                if rows is None or expectation.compare(rows):
                    return False
            return True

        lives: list[LifeResult] = []
        try:
            for kill in [*schedule, None]:
                env = target.environment(kill, bootstrap, database, directory)
                life = Life(
                    target.command_line(env),
                    env,
                    target.directory,
                    directory / "pipeline.log",
                    probe,
                    drained,
                    Limits(stall_s=options.stall_s, start_s=options.stall_s),
                )
                result = life.run(kill)
                lives.append(result)
                if self.on_life is not None:
                    self.on_life(self.count, result)
                if kill is not None and not result.landed:
                    break  # drained before this kill: the rest of the schedule cannot land
        finally:
            probe.close()
            if feeder is not None:
                feeder.stop()
        report = self._audit(bootstrap, database)
        return TrialResult(self.count, schedule, lives, report, time.monotonic() - started,
                           directory)  # fmt: skip

    def _audit(self, bootstrap: str, database: Path | None) -> AuditReport:
        target, extractor = self.target, self.input_extractor
        database_url = f"sqlite:///{database}" if database is not None else None
        try:
            source = read_input(bootstrap, target.input_topic, extractor, 30)
            dead: set[str] = set()
            if target.dead_letter_topic:
                dead, _ = read_dead_letters(bootstrap, target.dead_letter_topic, extractor)
        except SourceError as error:
            raise ProveError(f"cannot read the input back: {error}") from None
        sinks = read_sinks(self.id_outputs, target.mapping, bootstrap, database_url)
        report = source.audit(sinks, {"input_topic": target.input_topic}, dead)
        for expectation in self.expectations:
            rows = read_rows(database, expectation) or []
            found = expectation.compare(rows)
            report.anomalies.extend(found)
            report.sinks.append(expectation.summary(rows, found))
        return report


def _create_topics(
    bootstrap: str, names: list[str], partitions: int, topics_file: Path | None
) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    if topics_file is not None:
        from onceflow.topics import migrate

        try:
            migrate(str(topics_file), bootstrap)
        except Exception as error:  # SpecError, PlanError, TopicsError: one line each
            raise ProveError(f"{topics_file}: {error}") from None
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    existing = admin.list_topics(timeout=10).topics
    wanted = [NewTopic(n, partitions, 1) for n in names if n not in existing]
    for name, future in admin.create_topics(wanted).items() if wanted else ():
        try:
            future.result(30)
        except KafkaException as error:
            raise ProveError(f"cannot create topic {name!r}: {error}") from None


def _reset(bootstrap: str, names: list[str]) -> None:
    """Delete the pipeline's topics and the groups with offsets on them: each trial
    starts from empty topics and no committed offsets."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        existing = admin.list_topics(timeout=10).topics
        doomed = [n for n in names if n in existing]
        if not doomed:
            return
        groups = []
        for listing in admin.list_consumer_groups(request_timeout=10).result().valid:
            request = [ConsumerGroupTopicPartitions(listing.group_id)]
            offsets = admin.list_consumer_group_offsets(request, request_timeout=10)
            committed = offsets[listing.group_id].result().topic_partitions or []
            if any(tp.topic in doomed for tp in committed):
                groups.append(listing.group_id)
        for future in admin.delete_consumer_groups(groups).values() if groups else ():
            future.result(30)
        for future in admin.delete_topics(doomed).values():
            future.result(30)
    except KafkaException as error:
        raise ProveError(f"cannot reset the pipeline's topics and groups: {error}") from None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not set(doomed) & set(admin.list_topics(timeout=10).topics):
            return
        time.sleep(0.2)
    raise ProveError(f"topics {doomed} were not deleted within 30 s")


def _apply_schema(database: Path, schema: Path) -> None:
    try:
        script = schema.read_text()
    except OSError as error:
        raise ProveError(f"cannot read the schema {schema}: {error.strerror}") from None
    try:
        with closing(sqlite3.connect(database)) as db:
            db.executescript(script)
    except sqlite3.Error as error:
        raise ProveError(f"{schema}: {error}") from None
