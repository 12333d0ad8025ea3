"""The pipeline under proof: how to start each of its workers, what it reads and writes.

``runner`` mode runs the user's handler in onceflow's Runner (``runner_host``), whose
named crash points the fault engine arms; ``command`` and ``spark`` modes run any command.
Every worker gets the trial's broker and database through the environment
(``ONCEFLOW_BOOTSTRAP``, ``ONCEFLOW_INPUT_TOPIC``, ``ONCEFLOW_DATABASE_URL``, for SQLite
``ONCEFLOW_DATABASE_PATH``, ``ONCEFLOW_WORKER``) and through placeholders in its command
line (``{bootstrap}``, ``{input_topic}``, ``{database_url}``, ``{database_path}``,
``{checkpoint}``, ``{trial_dir}``, ``{worker}``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.broker.traps import TRAPS_ENV
from onceflow.crash_points import ENV_VAR, PAUSE_VAR, SPARK_ENV_VAR
from onceflow.patterns.guarantees import Plan
from onceflow.patterns.runner_config import RunnerConfig
from onceflow.prove.errors import ProveError
from onceflow.prove.expect import ExpectFunction
from onceflow.prove.generator import RecordFactory
from onceflow.prove.handler import load_handler, module_source
from onceflow.prove.options import ProofOptions
from onceflow.prove.outputs import Mapping, Output, parse_outputs
from onceflow.prove.reachable import reachable_source
from onceflow.prove.runner_file import RunnerFile
from onceflow.prove.steps import ONCE_PER_START, runner_steps, spark_sink_steps

PLACEHOLDERS = ("bootstrap", "input_topic", "database_url", "database_path", "checkpoint",
                "trial_dir", "worker")  # fmt: skip
ARMING = (ENV_VAR, PAUSE_VAR, SPARK_ENV_VAR, TRAPS_ENV)  # never inherited from prove


@dataclass(slots=True)
class Target:
    mode: str
    argv: list[str]
    directory: Path
    steps: list[str]  # named steps it reaches (Runner crash points, Spark sink steps)
    input_topic: str
    other_inputs: list[str]
    outputs: list[Output]
    mapping: Mapping
    uses_database: bool
    schema: Path | None
    topics_file: Path | None
    dead_letter_topic: str | None
    replay_prefix: list[str]  # `onceflow prove ...` without the schedule options
    replay_suffix: list[str] = field(default_factory=list)  # `-- COMMAND...`
    sources: dict[str, str] = field(default_factory=dict)  # file -> code it runs (explain.py)
    runner_config: RunnerConfig | None = None
    plan: Plan | None = None
    database_name: str | None = None  # the SQLite file holding the output tables
    generator: RecordFactory | None = None  # the user's input (None: the built-in records)
    expect: ExpectFunction | None = None  # tables of state and what they must hold
    batch_size: int = 50  # records a worker takes at a time, about (paces the input)

    @property
    def once_per_start(self) -> frozenset[str]:
        return ONCE_PER_START

    @property
    def output_topics(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.outputs if o.kind == "topic")

    def command_line(self, values: dict[str, str]) -> list[str]:
        """The argv with the trial's values in place of the placeholders."""
        argv = []
        for word in self.argv:
            for name in PLACEHOLDERS:
                word = word.replace("{" + name + "}", values.get(name, ""))
            argv.append(word)
        return argv

    def environment(self, values: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ARMING}
        env.update(
            PYTHONUNBUFFERED="1",
            ONCEFLOW_BOOTSTRAP=values["bootstrap"],
            ONCEFLOW_INPUT_TOPIC=self.input_topic,
            ONCEFLOW_PROVE_TRIAL_DIR=values["trial_dir"],
            ONCEFLOW_PROVE_CHECKPOINT=values["checkpoint"],  # a Spark job's checkpoint
            ONCEFLOW_WORKER=values["worker"],
        )
        if values.get("database_url"):
            env["ONCEFLOW_DATABASE_URL"] = values["database_url"]
        if values.get("database_path"):
            env["ONCEFLOW_DATABASE_PATH"] = values["database_path"]
        return env


def _mapping(options: ProofOptions, section: dict) -> Mapping:
    return Mapping(
        options.id_field or section.get("id_field", "id"),
        options.key_field or section.get("key_field", "key"),
    )


def _user_functions(
    target: Target, options: ProofOptions, section: dict, directories: list[Path]
) -> Target:
    """Load ``--generator`` and ``--expect`` (or the config's) and add them to the replay."""
    generator = options.generator or section.get("generator")
    expect = options.expect or section.get("expect")
    if generator:
        target.generator = load_handler(generator, directories, "generator")
    if expect:
        target.expect = load_handler(expect, directories, "expect function")
    for flag, value in (("--generator", options.generator), ("--expect", options.expect)):
        if value:
            target.replay_prefix += [flag, value]
    return target


def runner_target(options: ProofOptions) -> Target:
    if not options.handler or options.config is None:
        raise ProveError("runner mode needs MODULE:HANDLER and --config runner.toml")
    file = RunnerFile.load(options.config)
    config, plan = file.plan()
    if options.workers > 1 and config.assign:
        raise ProveError(f"{options.config}: --workers {options.workers} needs the Runner to "
                         "subscribe (it sets assign, so every worker would read every "
                         "partition)")  # fmt: skip
    directory = options.directory.resolve()
    handler = load_handler(options.handler, [options.config.resolve().parent, directory])
    section = file.prove
    outputs = parse_outputs(options.outputs or section.get("outputs", []))
    if any(o.kind == "table" for o in outputs) and file.output_database_name is None:
        raise ProveError("a table output needs database_url in [runner] (or output_database)")
    target = Target(
        mode="runner",
        argv=[
            sys.executable,
            "-m",
            "onceflow.prove.runner_host",
            options.handler,
            "--config",
            str(options.config.resolve()),
        ],
        directory=directory,
        steps=runner_steps(plan, file.uses_database),
        input_topic=options.input_topic or section.get("input") or config.topics[0],
        other_inputs=list(config.topics[1:]),
        outputs=outputs,
        mapping=_mapping(options, section),
        uses_database=file.output_database_name is not None,
        schema=options.schema or file.relative(section.get("schema")),
        topics_file=options.topics_file or file.relative(section.get("topics_file")),
        dead_letter_topic=config.dead_letter_topic,
        replay_prefix=[
            "onceflow",
            "prove",
            "runner",
            options.handler,
            "--config",
            str(options.config),
        ],
        sources={options.handler: module_source(options.handler, handler)},
        database_name=file.output_database_name,
        runner_config=config,
        plan=plan,
        batch_size=config.batch_size,
    )
    return _user_functions(target, options, section, [options.config.resolve().parent, directory])


def command_target(options: ProofOptions) -> Target:
    if options.mode == "spark":
        if not options.command:
            raise ProveError("spark mode needs JOB.py")
        job = options.directory / options.command[0]
        if not job.is_file():
            raise ProveError(f"no Spark job {options.command[0]!r} in {options.directory}")
    if not options.command:
        raise ProveError("command mode needs a command after --")
    if not options.input_topic:
        raise ProveError(f"{options.mode} mode needs --input TOPIC (the topic it consumes)")
    outputs = parse_outputs(options.outputs)
    directory = options.directory.resolve()
    uses_database = options.database or any(o.kind == "table" for o in outputs)
    sources = command_sources(options.command, directory)
    prefix = ["onceflow", "prove", options.mode, "--input", options.input_topic]
    for output in outputs:
        prefix += ["--output", str(output)]
    argv = list(options.command)
    suffix = ["--", *options.command]
    steps: list[str] = []
    if options.mode == "spark":  # JOB.py [-- ARGS]: run with this Python (pyspark, onceflow)
        argv = [sys.executable, *options.command]
        prefix.insert(3, options.command[0])
        suffix = ["--", *options.command[1:]] if len(options.command) > 1 else []
        steps = spark_sink_steps("\n".join(sources.values()))
    target = Target(
        mode=options.mode,
        argv=argv,
        directory=directory,
        steps=steps,
        input_topic=options.input_topic,
        other_inputs=[],
        outputs=outputs,
        mapping=_mapping(options, {}),
        uses_database=uses_database,
        schema=options.schema,
        topics_file=options.topics_file,
        dead_letter_topic=options.dead_letter_topic,
        replay_prefix=prefix,
        replay_suffix=suffix,
        database_name="pipeline.db" if uses_database else None,
        sources=sources,
    )
    return _user_functions(target, options, {}, [directory])


SOURCE_SUFFIXES = (".py", ".java", ".js", ".mjs", ".ts", ".kt", ".go")


def command_sources(command: list[str], directory: Path) -> dict[str, str]:
    """The source files a command names, for the cause hints: ``consumer.py``, a Java class
    ``Broken`` (``Broken.java``), ``app.js``; Python's cut to the code it runs."""
    sources = {}
    for word in command:
        for name in (word, *(word + suffix for suffix in SOURCE_SUFFIXES)):
            path = directory / name
            if name.endswith(SOURCE_SUFFIXES) and path.is_file():
                text = path.read_text(errors="replace")
                sources[name] = reachable_source(text) if name.endswith(".py") else text
                break
    return sources


def build_target(options: ProofOptions) -> Target:
    if options.workers < 1:
        raise ProveError("--workers counts from 1")
    if options.mode == "runner":
        return runner_target(options)
    if options.mode in ("command", "spark"):
        return command_target(options)
    raise ProveError(f"unknown mode {options.mode!r}")
