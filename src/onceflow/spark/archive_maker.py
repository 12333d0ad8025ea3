"""Makes the class-data-sharing archive that :mod:`onceflow.spark.class_archive` finds: a
local session runs a Python streaming source into ``noop`` and into a Python sink
(:mod:`onceflow.spark.class_archive_job`), then its JVM exits cleanly and writes down the
classes it loaded.

    python -m onceflow.spark.archive_maker      # prints the archive's path
"""

from __future__ import annotations

import sys
from pathlib import Path

from onceflow.cds_archive import make_once
from onceflow.spark.class_archive import (
    QUIET,
    RECORD_OPTION,
    archive_path,
    java_binary,
    spark_jars,
)

# The JVM writes the archive (170 MB) as it exits: about 1 s on an idle 2-core machine, 28-35 s
# beside four busy loops, and over 180 s once while a whole test suite started beside it.
JVM_EXIT_TIMEOUT_S = 900.0


def _record(partial: Path, work: Path) -> None:
    """Run a session that loads what onceflow's jobs load, then let its JVM exit."""
    from pyspark import SparkContext

    from onceflow.spark.class_archive_job import RecordedSource
    from onceflow.spark.session import local_session

    if SparkContext._active_spark_context is not None:
        # Its JVM started without the recording option, and ending it here would end the
        # session this process is using.
        raise RuntimeError(
            "a Spark class archive is recorded by a JVM of its own: run "
            "`python -m onceflow.spark.archive_maker` in a process without a SparkSession"
        )

    spark = local_session(
        "onceflow-class-archive",
        config={"spark.driver.extraJavaOptions": f"{RECORD_OPTION}{partial} {QUIET}"},
        class_archive=False,
    )
    spark.dataSource.register(RecordedSource)
    stream = spark.readStream.format(RecordedSource.name()).load()
    for sink in ("noop", RecordedSource.name()):
        query = (
            stream.selectExpr("x + 1 AS x", "key", "value")
            .writeStream.format(sink)
            .option("checkpointLocation", str(work / f"checkpoint-{sink}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    spark.range(100).selectExpr("id % 3 AS k").groupBy("k").count().collect()
    process = SparkContext._gateway.proc  # type: ignore[union-attr]
    spark.stop()
    process.stdin.close()  # the JVM exits on end of input, and writes the archive then
    process.wait(JVM_EXIT_TIMEOUT_S)


def make_archive() -> Path | None:
    """The archive of this machine's Spark driver JVM, made now if there is none."""
    from onceflow.spark.session import java_home

    java = java_binary(java_home())
    if java is None:
        return None
    return make_once(
        archive_path(java), _record, "onceflow-spark-cds-", made_from=(java, spark_jars())
    )


def main() -> int:
    made = make_archive()
    if made is None:
        print("error: no Spark class archive: no Java, or the JVM made none", file=sys.stderr)
        return 1
    print(made)
    return 0


if __name__ == "__main__":
    sys.exit(main())
