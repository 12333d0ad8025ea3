"""One trial: a fresh broker (or the cluster, reset) and a fresh database, the input paced
by the pipeline's progress, the pipeline run through one fault schedule by the fault
engine until its input is drained, then audited with ``onceflow.verify``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.faults.actions import LAG_S, FaultActions
from onceflow.faults.commit_traps import CommitTrapControl, pipeline_environment
from onceflow.faults.databases import CellDatabases
from onceflow.faults.probe import OutputProbe, group_committed_to_end
from onceflow.faults.process import ProcessGroup, StartError
from onceflow.faults.results import Landing, Limits, RunError, RunResult
from onceflow.faults.run import FaultRun
from onceflow.faults.schedule import NODE_ACTIONS, Fault, Schedule
from onceflow.faults.workers import Life
from onceflow.prove.brokers import TrialCluster, create_topics, embedded_broker, reset
from onceflow.prove.database import TrialDatabase
from onceflow.prove.errors import ProveError, WrongMapping
from onceflow.prove.expect import Expectation, expectations, read_rows
from onceflow.prove.generator import InputFeeder, input_values
from onceflow.prove.options import ProofOptions
from onceflow.prove.outputs import Output, read_sinks
from onceflow.prove.runner_host import RUNNER_DATABASE_VAR
from onceflow.prove.target import Target
from onceflow.prove.victims import victim_finder
from onceflow.verify.audit import InputEvent, Sink
from onceflow.verify.extract import Extractor
from onceflow.verify.report import AuditReport
from onceflow.verify.sources import SourceError, read_dead_letters, read_input

INPUT_EXTRACTOR = Extractor("id", "key")
STALLED_S = 60.0  # under node faults, a pipeline without progress this long is restarted
# (a transactional producer waits out its coordinator's failover and the abort of the
# transaction it had open: 46 s seen after a SIGKILLed transaction coordinator)
# its group committed everything and nothing happened for this many of its usual times
# between two writes, within these bounds: what is missing is missing
COMMITTED_QUIET_GAPS = 3.0
COMMITTED_QUIET_S = (4.0, 10.0)
NODE_DOWN_S = 8.0  # a killed node comes back after the cluster fenced it (6 s) and moved on


@dataclass(slots=True)
class TrialResult:
    number: int
    schedule: Schedule
    run: RunResult
    report: AuditReport
    seconds: float
    directory: Path
    database: TrialDatabase | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def landed(self) -> list[Fault]:
        return self.run.landed

    @property
    def complete(self) -> bool:
        """Every planned fault landed."""
        return len(self.landed) == len(self.schedule)

    @property
    def lives(self) -> list[Life]:
        return self.run.lives

    @property
    def mid_processing(self) -> int:
        """Landed faults that interrupted unfinished work: the outputs grew after them."""
        end = self.run.outputs
        return sum(1 for landing in self.run.landings if landing.landed and end > landing.outputs)

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
    """Runs trials one after another, each on its own broker (or on the shared cluster,
    reset) with its own directory and database."""

    def __init__(
        self, target: Target, options: ProofOptions, work: Path,
        on_life: Callable[[int, Life], None] | None = None,
        on_landing: Callable[[int, Landing], None] | None = None,
        cluster: Callable[[], TrialCluster] | None = None,
    ) -> None:  # fmt: skip
        self.target = target
        self.options = options
        self.work = work
        self.on_life = on_life
        self.on_landing = on_landing
        self.shared_cluster = cluster  # None: an embedded broker per trial
        self.count = 0
        server = options.database_url or _runner_server(target)
        self.databases = CellDatabases(work, server, prefix=f"prove_{time.time_ns() % 10**9}")
        self.expectations: list[Expectation] = []
        if target.expect is not None:  # the input is the same in every trial
            values = [v for _, v in input_values(options.record_count, options.keys,
                                                 target.generator)]  # fmt: skip
            self.expectations = expectations(target.expect, values, target.outputs)
        expected = {e.output for e in self.expectations}
        self.id_outputs: list[Output] = [o for o in target.outputs if o not in expected]
        self.input_extractor = target.mapping.extractor() if target.generator else INPUT_EXTRACTOR

    def close(self) -> None:
        self.databases.drop_all()

    def run(self, schedule: Schedule) -> TrialResult:
        self.count += 1
        directory = self.work / f"trial-{self.count}"
        directory.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        actions = FaultActions()
        with self._cluster(directory, schedule, actions) as cluster:
            database = self._database(directory)
            run = self._run(schedule, cluster, database, directory, actions)
            report = self._audit(cluster.bootstrap, database)
        return TrialResult(self.count, schedule, run, report, time.monotonic() - started,
                           directory, database)  # fmt: skip

    @contextmanager
    def _cluster(
        self, directory: Path, schedule: Schedule, actions: FaultActions
    ) -> Iterator[TrialCluster]:
        names = self._topics()
        if self.shared_cluster is None:
            with embedded_broker(directory, schedule, self.options.workers, actions) as cluster:
                create_topics(cluster, names, self.options.partitions, self.target.topics_file)
                yield cluster
            return
        cluster = self.shared_cluster()
        actions.cluster = cluster.kafka  # its node faults: a leader's followers lag first
        actions.lag_s, actions.node_down_s = LAG_S, NODE_DOWN_S
        reset(cluster, names)
        inputs = len({self.target.input_topic, *self.target.other_inputs})
        create_topics(cluster, names, self.options.partitions, self.target.topics_file, inputs)
        yield cluster

    def _topics(self) -> list[str]:
        t = self.target
        names = [t.input_topic, *t.other_inputs, *t.output_topics]
        if t.dead_letter_topic:
            names.append(t.dead_letter_topic)
        return list(dict.fromkeys(names))

    def _database(self, directory: Path) -> TrialDatabase | None:
        name = self.target.database_name
        if name is None:
            return None
        database = TrialDatabase(self.databases.create(directory.name, name))
        if self.target.schema is not None:
            database.apply_schema(self.target.schema)
        return database

    def _runner_database_url(self, database: TrialDatabase | None, directory: Path) -> str | None:
        """The Runner's own database in this trial: the output database, or another
        SQLite file of the trial (``output_database``)."""
        config = self.target.runner_config
        if config is None or config.database_url is None or database is None:
            return None
        if database.path is None:
            return database.url
        return f"sqlite:///{directory / Path(config.database_url.removeprefix('sqlite:///')).name}"

    def _run(
        self, schedule: Schedule, cluster: TrialCluster, database: TrialDatabase | None,
        directory: Path, actions: FaultActions,
    ) -> RunResult:  # fmt: skip
        target, options = self.target, self.options
        records = options.record_count
        feeder = InputFeeder(cluster.bootstrap, target.input_topic, records, options.keys,
                             target.generator)  # fmt: skip
        progress = {e.output.name: p for e in self.expectations if (p := e.progress(records))}
        database_url = database.url if database is not None else None
        probe = OutputProbe(target.outputs, cluster.bootstrap, database_url, progress)
        runner_database = self._runner_database_url(database, directory)
        workers = options.workers
        commit_traps = CommitTrapControl(directory / "commit-traps", workers)
        tables = [o.name for o in target.outputs if o.kind == "table"]

        def start(worker: int, life: int, arming: dict[str, str]) -> ProcessGroup:
            values = {
                "bootstrap": cluster.for_worker(worker),
                "input_topic": target.input_topic,
                "database_url": database_url or "",
                "database_path": str(database.path) if database and database.path else "",
                "checkpoint": str(
                    directory / (f"checkpoint-{worker}" if workers > 1 else "checkpoint")
                ),
                "trial_dir": str(directory),
                "worker": str(worker),
            }
            env = {**target.environment(values), **arming}
            if target.mode != "runner":  # a Python pipeline's database commits, trapped
                pipeline_environment(commit_traps.directory, tables, env)
            if runner_database is not None:
                env[RUNNER_DATABASE_VAR] = runner_database
            log = directory / (f"pipeline-{worker}.log" if workers > 1 else "pipeline.log")
            return ProcessGroup(target.command_line(values), log, env=env, cwd=target.directory)

        input_ends: set[str] | None = None  # the last input record of each partition, by id

        def read_to_the_end(sinks: list[Sink]) -> bool:
            """Every id output holds the last input record of every input partition: the
            pipeline read all its input (evidence for one that commits no offsets)."""
            nonlocal input_ends
            if input_ends is None:  # read once: the input is complete when this is asked
                try:
                    input_ends = _last_ids(cluster.bootstrap, target.input_topic,
                                           self.input_extractor)  # fmt: skip
                except SourceError:
                    return False
            ends = input_ends
            return bool(ends and sinks) and all(ends <= {r.id for r in s.records} for s in sinks)

        def drained(quiet_s: float, usual_gap_s: float) -> bool:
            """Every input event is in the outputs; or the outputs have not changed for a
            while (a slow output, a relay that polls, gets a few of its usual gaps between
            writes) and the pipeline's group committed the whole input, or its outputs hold
            the last input record of every partition: some are missing, the audit says
            which."""
            if not feeder.finished:
                return False
            shortest, longest = COMMITTED_QUIET_S
            quiet = quiet_s >= min(max(COMMITTED_QUIET_GAPS * usual_gap_s, shortest), longest)
            if quiet and group_committed_to_end(cluster.bootstrap, target.input_topic):
                return True
            try:
                sinks = read_sinks(self.id_outputs, target.mapping, cluster.bootstrap,
                                   database_url)  # fmt: skip
            except WrongMapping:
                raise
            except ProveError:
                return False
            if not all(len({r.id for r in sink.records}) >= records for sink in sinks):
                return quiet and read_to_the_end(sinks)
            for expectation in self.expectations:
                rows = read_rows(database, expectation)
                if rows is None or expectation.compare(rows):
                    return False
            return True

        actions.victim = victim_finder(cluster, target)
        # A node's death can wedge a client (librdkafka issues 5456, 5511): as a deployment's
        # liveness probe would, a worker that stalls is restarted, and the audit decides.
        supervised = any(fault.action in NODE_ACTIONS for fault in schedule)
        if database is not None and target.outputs:
            table = next((o.name for o in target.outputs if o.kind == "table"), None)
            actions.database = (database.url, table) if table else None
        run = FaultRun(
            start, schedule, directory, workers=workers, actions=actions, progress=probe,
            drained=drained, pace=feeder.allow, input_done=lambda: feeder.finished,
            input_records=feeder.count, batch_hint=target.batch_size,
            traps=cluster.traps, commit_traps=commit_traps,
            limits=Limits(stall_s=STALLED_S if supervised else options.stall_s,
                          start_s=options.stall_s),
            supervised=supervised,
            on_life=(lambda life: self.on_life(self.count, life)) if self.on_life else None,
            on_landing=(lambda landing: self.on_landing(self.count, landing))
            if self.on_landing else None,
        )  # fmt: skip
        try:
            return run.run()
        except RunError as error:
            hint = _hint(cluster, target, database) if run.result.outputs == 0 else ""
            raise ProveError(f"{error}{hint}") from None
        except StartError as error:
            raise ProveError(str(error)) from None
        finally:
            probe.close()
            feeder.stop()

    def _audit(self, bootstrap: str, database: TrialDatabase | None) -> AuditReport:
        target, extractor = self.target, self.input_extractor
        database_url = database.url if database is not None else None
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


def _last_ids(bootstrap: str, topic: str, extractor: Extractor) -> set[str]:
    """The ids of the last record of each partition of ``topic``."""
    last: dict[int, InputEvent] = {}
    for event in read_input(bootstrap, topic, extractor, 30).events:
        if event.partition not in last or event.offset > last[event.partition].offset:
            last[event.partition] = event
    return {event.id for event in last.values()}


def _hint(cluster: TrialCluster, target: Target, database: TrialDatabase | None) -> str:
    """Why a pipeline that wrote nothing may have written nothing: an output table that is
    not in its database, or an input topic it never asks for."""
    hints = []
    tables = [o.name for o in target.outputs if o.kind == "table"] if database else []
    for table in tables:
        assert database is not None
        if database.columns(table) is None:
            present = ", ".join(database.tables()) or "none"
            hints.append(f"table {table!r} is not in its database (it has {present})")
    asked = cluster.traps.topics() if cluster.traps is not None else set()
    if asked and target.input_topic not in asked:
        hints.append(f"it never asked for {target.input_topic!r}, only for "
                     f"{', '.join(sorted(asked))}: is --input the topic it consumes?")  # fmt: skip
    return "; " + "; ".join(hints) if hints else ""


def _runner_server(target: Target) -> str | None:
    """The PostgreSQL server a runner.toml's database_url names."""
    config = target.runner_config
    url = config.database_url if config is not None else None
    return url if url is not None and not url.startswith("sqlite:") else None
