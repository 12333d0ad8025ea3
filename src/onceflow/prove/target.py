"""The pipeline under proof: how to start it, how a kill is armed, what it reads and writes.

``RunnerTarget`` runs the user's handler in onceflow's Runner (``runner_host``) and arms
named crash points through ``ONCEFLOW_CRASH_AT``; ``CommandTarget`` runs any command and
is killed from outside (see lives.py). Both get the trial's broker and database through
the environment: ``ONCEFLOW_BOOTSTRAP``, ``ONCEFLOW_INPUT_TOPIC``,
``ONCEFLOW_DATABASE_URL`` (``sqlite:///PATH``) and ``ONCEFLOW_DATABASE_PATH``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.crash_points import ENV_VAR
from onceflow.patterns.guarantees import Plan
from onceflow.patterns.runner_config import RunnerConfig
from onceflow.prove.errors import ProveError
from onceflow.prove.expect import ExpectFunction
from onceflow.prove.generator import RecordFactory
from onceflow.prove.handler import load_handler, module_source
from onceflow.prove.options import ProofOptions
from onceflow.prove.outputs import Mapping, Output, parse_outputs
from onceflow.prove.runner_file import RunnerFile
from onceflow.prove.schedule import PROGRESS, Kill
from onceflow.prove.steps import runner_steps


@dataclass(slots=True)
class Target:
    mode: str
    argv: list[str]
    directory: Path
    steps: list[str]
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
    sources: dict[str, str] = field(default_factory=dict)  # file -> text, for explain.py
    runner_config: RunnerConfig | None = None
    plan: Plan | None = None

    database_name: str | None = None  # the SQLite file holding the output tables
    generator: RecordFactory | None = None  # the user's input (None: the built-in records)
    expect: ExpectFunction | None = None  # tables of state and what they must hold

    def command_line(self, env: dict[str, str]) -> list[str]:
        """The argv with the trial's values in place of ``{bootstrap}``, ``{input_topic}``,
        ``{database_url}``, ``{database_path}``, ``{checkpoint}`` and ``{trial_dir}``."""
        values = {
            "{bootstrap}": env["ONCEFLOW_BOOTSTRAP"],
            "{input_topic}": env["ONCEFLOW_INPUT_TOPIC"],
            "{database_url}": env.get("ONCEFLOW_DATABASE_URL", ""),
            "{database_path}": env.get("ONCEFLOW_DATABASE_PATH", ""),
            "{checkpoint}": env["ONCEFLOW_PROVE_CHECKPOINT"],
            "{trial_dir}": env["ONCEFLOW_PROVE_TRIAL_DIR"],
        }
        argv = []
        for word in self.argv:
            for placeholder, value in values.items():
                word = word.replace(placeholder, value)
            argv.append(word)
        return argv

    def environment(
        self, kill: Kill | None, bootstrap: str, database: Path | None, trial: Path
    ) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONCEFLOW_CRASH")}
        env.update(
            PYTHONUNBUFFERED="1",
            ONCEFLOW_BOOTSTRAP=bootstrap,
            ONCEFLOW_INPUT_TOPIC=self.input_topic,
            ONCEFLOW_PROVE_TRIAL_DIR=str(trial),
            ONCEFLOW_PROVE_CHECKPOINT=str(trial / "checkpoint"),  # a Spark job's checkpoint
        )
        if database is not None:
            env.update(ONCEFLOW_DATABASE_URL=f"sqlite:///{database}",
                       ONCEFLOW_DATABASE_PATH=str(database))  # fmt: skip
        if kill is not None and kill.step != PROGRESS:
            env[ENV_VAR] = str(kill)
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
        target.sources[generator] = module_source(generator)
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
    file.check_database()
    config, plan = file.plan()
    directory = options.directory.resolve()
    load_handler(options.handler, [options.config.resolve().parent, directory])
    section = file.prove
    outputs = parse_outputs(options.outputs or section.get("outputs", []))
    if any(o.kind == "table" for o in outputs) and file.output_database_name is None:
        raise ProveError("a table output needs database_url in [runner] (or output_database)")
    config_path = options.config.resolve()
    target = Target(
        mode="runner",
        argv=[
            sys.executable,
            "-m",
            "onceflow.prove.runner_host",
            options.handler,
            "--config",
            str(config_path),
        ],
        directory=directory,
        steps=runner_steps(plan, file.uses_database),
        input_topic=options.input_topic or section.get("input") or config.topics[0],
        other_inputs=[t for t in config.topics[1:]],
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
        sources={options.handler: module_source(options.handler)},
        database_name=file.output_database_name,
        runner_config=config,
        plan=plan,
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
    sources = {}
    for word in options.command:
        path = directory / word
        if word.endswith(".py") and path.is_file():
            sources[word] = path.read_text(errors="replace")
    prefix = ["onceflow", "prove", options.mode, "--input", options.input_topic]
    for output in outputs:
        prefix += ["--output", str(output)]
    argv = list(options.command)
    suffix = ["--", *options.command]
    if options.mode == "spark":  # JOB.py [-- ARGS]: run with this Python (pyspark, onceflow)
        argv = [sys.executable, *options.command]
        prefix.insert(3, options.command[0])
        suffix = ["--", *options.command[1:]] if len(options.command) > 1 else []
    target = Target(
        mode=options.mode,
        argv=argv,
        directory=directory,
        steps=[PROGRESS],
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


def build_target(options: ProofOptions) -> Target:
    if options.mode == "runner":
        return runner_target(options)
    if options.mode in ("command", "spark"):
        return command_target(options)
    raise ProveError(f"unknown mode {options.mode!r}")
