"""``onceflow prove``: kill your own pipeline at every step and prove it exactly-once."""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

DEFAULT_TIMEOUT = 60.0
SPARK_TIMEOUT = 240.0


def proof_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Options every prove mode shares."""
    options = [
        click.option("--input", "input_topic", metavar="TOPIC",
                     help="The topic the pipeline consumes (fed with keyed, numbered records)."),
        click.option("--output", "outputs", multiple=True, metavar="table:NAME|topic:NAME",
                     help="What the pipeline writes; repeatable."),
        click.option("--generator", metavar="MODULE:FUNCTION",
                     help="The input: FUNCTION(n, rng) returns record n as (key, dict); "
                     "the built-in keyed, numbered records by default."),
        click.option("--expect", metavar="MODULE:FUNCTION",
                     help="Tables of state (totals): FUNCTION(input values) returns "
                     "{'table:NAME': [row, ...]}, the rows they must hold."),
        click.option("--id-field", help="Where an output carries the input's id (default id)."),
        click.option("--key-field", help="Where an output carries the input's key (default key)."),
        click.option("--dlq", "dead_letter_topic", metavar="TOPIC",
                     help="Dead-letter topic: events there are accounted for."),
        click.option("--schema", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="SQL run on each trial's fresh database."),
        click.option("--database-url", metavar="postgresql://...",
                     help="A PostgreSQL server: each trial gets a fresh database on it "
                     "(default: a fresh SQLite file per trial)."),
        click.option("--topics-file", type=click.Path(exists=True, dir_okay=False,
                                                      path_type=Path),
                     help="topics.yaml applied to each trial's broker."),
        click.option("--records", type=click.IntRange(10), default=None,
                     help="Input records per trial (default 600; with --quick 200 in runner "
                     "mode, 300 in command and spark modes)."),
        click.option("--keys", type=click.IntRange(1), default=8, show_default=True,
                     help="Distinct keys in the input."),
        click.option("--partitions", type=click.IntRange(1), default=3, show_default=True,
                     help="Partitions of the topics prove creates."),
        click.option("--seed", type=int, default=None,
                     help="Replay the kill schedules of this seed (printed by every run)."),
        click.option("--kills", metavar="[FAULT/]STEP:N[@W],...",
                     help="Replay one fault schedule exactly as written (from a failure "
                     "report): progress:12, after_db_commit:2@2, broker/after_append:3."),
        click.option("--faults", default="kill", show_default=True, metavar="KIND,...",
                     help="What goes wrong: kill (the pipeline's processes, SIGKILL), broker "
                     "(the embedded broker SIGKILLed after a durable append, before its "
                     "answer), network (a worker's connections dropped for 3 s), "
                     "coordinator-cut (only its group coordinator's, so it goes on fetching "
                     "without its group), delay (its traffic slowed for 3 s), pause (a "
                     "worker stopped for 5 s, as a long GC pause or a frozen VM, while its "
                     "group moves its partitions to the others), leader, "
                     "group-coordinator, "
                     "txn-coordinator or cluster (an Apache Kafka node SIGKILLed; needs "
                     "--kafka-cluster), power-loss (the broker's files cut back to their "
                     "last fsync), disk-full (its writes refused for a few seconds), db-lock "
                     "(the pipeline's output table locked for a few seconds)."),
        click.option("--workers", type=click.IntRange(1), default=1, show_default=True,
                     help="Copies of the pipeline running at once, each killed on its own "
                     "(a consumer group rebalances during the proof)."),
        click.option("--quick", is_flag=True,
                     help="Fewer faults: one kill per step in runner mode, one schedule of "
                     "one fault per trigger kind otherwise, fewer records."),
        click.option("--no-shrink", "shrink", is_flag=True, default=True, flag_value=False,
                     help="Report the first failing schedule as it is."),
        click.option("--bootstrap", default=None, metavar="HOST:PORT",
                     help="A running cluster instead of a fresh embedded broker per trial "
                     "(its topics and groups are deleted and created again for each trial)."),
        click.option("--kafka-cluster", is_flag=True,
                     help="Run on a 3-node Apache Kafka cluster started for the proof (Java; "
                     "jars from Maven, cached), whose nodes node faults kill."),
        click.option("--timeout", "stall_s", type=float, default=DEFAULT_TIMEOUT,
                     help="Seconds without output before the pipeline counts as stuck "
                     "[default: 60; spark: 240]."),
        click.option("--json", "json_path", is_flag=False, flag_value="-", default=None,
                     type=click.Path(dir_okay=False, path_type=Path),
                     help="The report as JSON on stdout (--json) or into a file."),
        click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path),
                     help="Write the report as Markdown."),
        click.option("--png", type=click.Path(dir_okay=False, path_type=Path),
                     help="Write the heat map (trials x kills, coloured by outcome)."),
        click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Keep every trial's broker, database and logs here."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


@click.group("prove")
def prove_command() -> None:
    """Run your own pipeline through faults (SIGKILLs at every step, broker restarts,
    network cuts, Apache Kafka node failures), restart it until its input is drained, and
    audit it: exactly-once held, or the smallest fault schedule that breaks it.

    Exit 0 when exactly-once held, 1 when it broke, 2 on bad input (a handler that does
    not import, a pipeline that exits at once or never drains, no outputs, a wrong
    mapping), 4 when it held but fewer faults landed than planned (an incomplete proof),
    5 when prove itself failed (its broker, the cluster or database server it was given).
    Every run prints its seed; --seed replays it. `onceflow docs prove` has the guide.
    """


@prove_command.command("runner")
@click.argument("handler", metavar="MODULE:HANDLER")
@click.option("--config", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="runner.toml: [runner] RunnerConfig settings, [prove] outputs.")  # fmt: skip
@click.option("--kills-per-step", type=click.IntRange(1), default=None,
              help="Kills at each crash point (default 2, 1 with --quick).")  # fmt: skip
@proof_options
def prove_runner(handler: str, config: Path, kills_per_step: int | None, **options: Any) -> None:
    """Prove a Runner handler: SIGKILL at each crash point the Runner reaches."""
    _run("runner", handler=handler, config=config, kills_per_step=kills_per_step, **options)


@prove_command.command(
    "command", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--database", is_flag=True,
              help="Give the pipeline a fresh SQLite file ($ONCEFLOW_DATABASE_URL).")  # fmt: skip
@click.option("--kills-per-trial", "command_kills", type=click.IntRange(1), default=None,
              help="Faults in each schedule (default 6, 3 with --quick).")  # fmt: skip
@proof_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def prove_command_mode(command: tuple[str, ...], **options: Any) -> None:
    """Prove any command (`-- python my_consumer.py`, a Java or Node app): faults land
    while its outputs grow. It gets $ONCEFLOW_BOOTSTRAP, $ONCEFLOW_INPUT_TOPIC,
    $ONCEFLOW_WORKER and, with a table output or --database, $ONCEFLOW_DATABASE_URL (and
    for SQLite $ONCEFLOW_DATABASE_PATH); or the same in its arguments through the
    placeholders {bootstrap}, {input_topic}, {database_url}, {database_path},
    {trial_dir} and {worker}."""
    _run("command", command=list(command), **options)


@prove_command.command("spark")
@click.argument("job", metavar="JOB.py")
@click.option("--kills-per-trial", "command_kills", type=click.IntRange(1), default=None,
              help="Faults in each schedule (default 6, 3 with --quick).")  # fmt: skip
@proof_options
@click.argument("job_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- ARGS]")
def prove_spark(job: str, job_args: tuple[str, ...], **options: Any) -> None:
    """Prove a PySpark streaming job: SIGKILL its process group (driver, JVM, Python
    workers) at the named steps of the onceflow sinks it writes through, or while its
    outputs grow. It gets what command mode gives, plus $ONCEFLOW_PROVE_CHECKPOINT (and
    the placeholder {checkpoint}), its checkpoint directory, kept across its restarts."""
    if options["stall_s"] == DEFAULT_TIMEOUT:
        options["stall_s"] = SPARK_TIMEOUT  # a JVM and a SparkSession take a while to start
    _run("spark", command=[job, *job_args], **options)


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _run(mode: str, **given: Any) -> None:
    from onceflow.cli.output import console
    from onceflow.faults.results import Landing
    from onceflow.faults.workers import Ending, Life
    from onceflow.prove import ProofOptions, ProveError, ProveFailure, run_proof
    from onceflow.prove.errors import (
        EXIT_BAD_INPUT,
        EXIT_BROKEN,
        EXIT_HELD,
        EXIT_INCOMPLETE,
        EXIT_PROVE_FAILED,
    )
    from onceflow.prove.report import render, to_json, to_markdown

    json_path = given.pop("json_path")
    markdown, png = given.pop("markdown"), given.pop("png")
    faults = tuple(kind.strip() for kind in given.pop("faults").split(",") if kind.strip())
    options = ProofOptions(mode=mode, outputs=list(given.pop("outputs")), faults=faults, **given)
    err = console(stderr=True)

    def on_life(trial: int, life: Life) -> None:
        who = f"worker {life.worker} " if options.workers > 1 else ""
        if life.ending is Ending.STOPPED:
            what = "drained"
        elif life.fault is not None:
            what = f"SIGKILL at {life.fault}"
        else:
            what = f"{life.ending}" + (f" (code {life.exit_code})" if life.exit_code else "")
        err.print(f"trial {trial}: {who}{what} ({life.seconds:.1f} s, outputs "
                  f"{life.outputs_before} -> {life.outputs_after})")  # fmt: skip

    def on_landing(trial: int, landing: Landing) -> None:
        if landing.fault.kills_worker and landing.landed:
            return  # said by on_life when the life ends
        if landing.landed:
            err.print(f"trial {trial}: {landing.fault}: {landing.note} "
                      f"(outputs {landing.outputs})")  # fmt: skip
        else:
            err.print(f"trial {trial}: {landing.fault} did not land: {landing.note}")

    if options.seed is not None:
        err.print(f"seed {options.seed}")
    signal.signal(signal.SIGTERM, _terminated)  # unwind: the pipeline and broker are killed
    try:
        proof = run_proof(options, on_life=on_life, on_landing=on_landing)
    except ProveError as error:
        click.echo(f"error: {error}", err=True)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except ProveFailure as error:
        click.echo(f"error: prove could not run the proof: {error}", err=True)
        raise SystemExit(EXIT_PROVE_FAILED) from None
    except Exception as error:  # a bug of prove's: one line, the traceback in a file
        where = Path(options.work_dir or ".") / "onceflow-prove-error.txt"
        where.write_text(traceback.format_exc())
        click.echo(f"error: prove failed: {type(error).__name__}: {error} (traceback in "
                   f"{where}; please report it)", err=True)  # fmt: skip
        raise SystemExit(EXIT_PROVE_FAILED) from None
    picture = None
    if png is not None:
        from onceflow.prove.heatmap import draw

        picture = draw(proof, png)
        if picture is None:
            err.print("heat map skipped: matplotlib is not installed (pip install "
                      "'onceflow[chaos]')")  # fmt: skip
    if markdown is not None:
        markdown.write_text(to_markdown(proof, png.name if picture and png else None) + "\n")
    if json_path is not None and str(json_path) == "-":
        sys.stdout.write(to_json(proof) + "\n")
        err.print(proof.verdict())
    else:
        render(proof, console())
        if json_path is not None:
            json_path.write_text(to_json(proof) + "\n")
    if not proof.held:
        raise SystemExit(EXIT_BROKEN)
    raise SystemExit(EXIT_HELD if proof.complete else EXIT_INCOMPLETE)
