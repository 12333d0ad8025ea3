"""``onceflow log``: look at the broker's on-disk files without a running broker.

``onceflow log dump`` is the equivalent of Kafka's ``kafka-dump-log.sh``; ``onceflow log
check`` checks (and repairs) a stopped broker's partitions.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from onceflow.coordinator.internal_record_decoders import (
    decode_consumer_offsets,
    decode_transaction_log,
)
from onceflow.log.dump import DumpError, DumpOptions, dump_file
from onceflow.log.record_decoders import RecordDecoder, decode_as_text

EXIT_OK = 0
EXIT_DAMAGED = 1  # a batch failed its CRC, or a file ends in bytes that are no whole batch
EXIT_UNREADABLE = 2  # a file is missing, unreadable or of an unknown kind


@click.group("log")
def log_command() -> None:
    """Read a stopped broker's files: dump them (like kafka-dump-log.sh) or check them.

    Exit 0 when everything read is intact, 1 when damage is found, 2 when a file or the
    data directory cannot be read. More: onceflow docs broker.
    """


@log_command.command("dump")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--print-data-log",
    is_flag=True,
    help="Print every record (offset, timestamp, sizes, key, payload), not only batches.",
)
@click.option(
    "--offsets-decoder",
    is_flag=True,
    help="Decode records as __consumer_offsets data (offset commits, group metadata). "
    "Implies --print-data-log.",
)
@click.option(
    "--transaction-log-decoder",
    is_flag=True,
    help="Decode records as __transaction_state metadata. Implies --print-data-log.",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Read no batch that ends past this many bytes of a .log file.",
)
def dump_command(
    files: tuple[Path, ...],
    print_data_log: bool,
    offsets_decoder: bool,
    transaction_log_decoder: bool,
    max_bytes: int | None,
) -> None:
    """Print what is in the broker's files, like Kafka's kafka-dump-log.sh.

    The batches (and with --print-data-log the records) of .log segments, and the entries
    of .index, .timeindex, .txnindex, .snapshot and partition.json files.

    Exit status: 0 if every file was read and is intact, 1 if a batch is invalid (CRC
    mismatch) or a file ends in bytes that are not a whole batch or entry, 2 if a file is
    missing, unreadable or not a kind this command knows.
    """
    if offsets_decoder and transaction_log_decoder:
        raise click.UsageError("choose one of --offsets-decoder and --transaction-log-decoder")
    options = DumpOptions(
        print_data_log=print_data_log or offsets_decoder or transaction_log_decoder,
        decoder=chosen_decoder(offsets_decoder, transaction_log_decoder),
        max_bytes=max_bytes,
    )
    status = EXIT_OK
    try:
        for path in files:
            status = max(status, dump_one(path, options))
    except BrokenPipeError:  # `onceflow log dump ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(status)


def chosen_decoder(offsets_decoder: bool, transaction_log_decoder: bool) -> RecordDecoder:
    if offsets_decoder:
        return decode_consumer_offsets
    if transaction_log_decoder:
        return decode_transaction_log
    return decode_as_text


def dump_one(path: Path, options: DumpOptions) -> int:
    """Print one file's dump; return its exit status."""
    click.echo(f"Dumping {path}")
    damaged = False
    try:
        for line in dump_file(path, options):
            click.echo(line.text)
            damaged = damaged or line.problem
    except DumpError as error:
        click.echo(f"error: cannot dump {error}", err=True)
        return EXIT_UNREADABLE
    return EXIT_DAMAGED if damaged else EXIT_OK


@log_command.command("check")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    required=True,
    help="The broker's data directory (the broker must be stopped).",
)
@click.option(
    "--repair",
    is_flag=True,
    help="Cut each damaged partition at its first bad batch, keeping a copy of what is cut "
    "in quarantine/, so that the broker brings it online again.",
)
def check_command(data_dir: Path, repair: bool) -> None:
    """Check every batch (sizes, offsets, CRC) of every partition of a stopped broker.

    A partition is `ok`, has a `torn tail` after its recovery point (start-up cuts it by
    itself, with a quarantine copy), or is `damaged`: acknowledged data below the
    recovery point is unreadable or missing, and the broker keeps it offline until
    `--repair` cuts it.

    `--repair` reports what it cut (offsets, records, bytes, the quarantine copy); the
    partition then continues at its recovery point, so no offset is ever reused.

    Exit status: 0 if every batch is sound, 1 if a partition is damaged (also when --repair
    cut it: acknowledged records were lost) or has a torn tail, 2 if the directory is not
    a onceflow data directory, cannot be read, or a broker is using it.
    """
    from onceflow.log.check import is_data_dir
    from onceflow.log.dir_lock import DataDirInUse, DataDirLock

    if not is_data_dir(data_dir):
        click.echo(f"error: {data_dir} is not a onceflow data directory", err=True)
        sys.exit(EXIT_UNREADABLE)
    lock = DataDirLock(data_dir)  # a running broker's tail would look torn
    try:
        lock.acquire(create=repair)  # a check creates nothing in the directory
    except DataDirInUse as error:
        click.echo(f"error: cannot check: {error}", err=True)
        sys.exit(EXIT_UNREADABLE)
    except OSError as error:  # a read-only copy can be checked, not repaired
        if repair:
            click.echo(f"error: cannot repair {data_dir}: {error}", err=True)
            sys.exit(EXIT_UNREADABLE)
    try:
        status = _check(data_dir, repair)
    finally:
        lock.release()
    sys.exit(status)


def _check(data_dir: Path, repair: bool) -> int:
    from onceflow.log.check import check_data_dir
    from onceflow.log.check import repair as repair_partition

    try:
        reports = check_data_dir(data_dir)
    except (OSError, ValueError) as error:
        click.echo(f"error: cannot check {data_dir}: {error}", err=True)
        return EXIT_UNREADABLE
    damaged = repaired = torn = 0
    for report in reports:
        click.echo(report.describe())
        torn += report.status == "torn tail"
        if report.status != "damaged":
            continue
        damaged += 1
        if repair:
            done = repair_partition(data_dir, report)
            for line in done.describe():
                click.echo(line)
            repaired += done.after.status != "damaged"
    summary = f"{len(reports)} partitions checked, {damaged} damaged"
    if torn:
        summary += f", {torn} with a torn tail (cut at the next start, with a copy)"
    if repair:
        summary += f", {repaired} repaired (acknowledged records were cut)" if damaged else ""
    click.echo(summary)
    return EXIT_DAMAGED if damaged or torn else EXIT_OK
