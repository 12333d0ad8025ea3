"""Apache Kafka's runtime jars, fetched once from Maven into a cache.

``pom.xml`` next to this file pins the release; ``mvn dependency:copy-dependencies`` copies
its runtime classpath (broker, StorageTool, kafka-tools, kafka-streams, log4j) into
``<cache>/libs``. A stamp file holding the pom's digest marks a complete copy, so later
calls touch neither Maven nor the network. A file lock lets several processes (pytest-xdist
workers, parallel ``make`` runs) ask at once: one fetches, the others wait for it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from onceflow.kafka_cluster.errors import KafkaClusterError

KAFKA_VERSION = "4.4.0"
POM = Path(__file__).with_name("pom.xml")
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
_STAMP = "libs.complete"


def cache_dir() -> Path:
    """``$ONCEFLOW_KAFKA_CACHE``, else ``$XDG_CACHE_HOME/onceflow/kafka-<version>``."""
    configured = os.environ.get("ONCEFLOW_KAFKA_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "onceflow" / f"kafka-{KAFKA_VERSION}"


def libs_dir() -> Path:
    return cache_dir() / "libs"


def classpath() -> str:
    """The JVM ``-cp`` value for the pinned release, fetching the jars first if needed."""
    return str(ensure_jars() / "*")


def ensure_jars() -> Path:
    """The directory of the release's jars; runs Maven only when the cache lacks them."""
    cache = cache_dir()
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()
    if _stamped(cache, digest):
        return cache / "libs"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _stamped(cache, digest):  # another process may have fetched meanwhile
            _fetch(cache, digest)
    return cache / "libs"


def _stamped(cache: Path, digest: str) -> bool:
    try:
        return (cache / _STAMP).read_text().strip() == digest
    except OSError:
        return False


def _fetch(cache: Path, digest: str) -> None:
    maven = os.environ.get("ONCEFLOW_MVN", "mvn")
    if shutil.which(maven) is None:
        raise KafkaClusterError(
            f"Maven ({maven}) not found: it fetches Apache Kafka {KAFKA_VERSION}'s jars; "
            "install it (Debian package maven, or scripts/system-deps.sh)"
        )
    staging = cache / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        maven,
        "-B",
        "-q",
        "-f",
        str(POM),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
        raise KafkaClusterError(
            f"could not fetch Apache Kafka {KAFKA_VERSION}'s jars with Maven (is the network, "
            f"or the Maven mirror in ~/.m2/settings.xml, reachable?): "
            f"{maven_error(result.stdout + result.stderr)}"
        )
    (cache / _STAMP).unlink(missing_ok=True)
    shutil.rmtree(cache / "libs", ignore_errors=True)
    staging.rename(cache / "libs")
    (cache / _STAMP).write_text(digest + "\n")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def maven_error(output: str) -> str:
    """The first ``[ERROR]`` line of Maven's output, without colours or help links."""
    lines = [_ANSI.sub("", line).strip() for line in output.splitlines()]
    for line in lines:
        if line.startswith("[ERROR]"):
            message = line.removeprefix("[ERROR]").strip()
            message = re.sub(r"\s*-> \[Help \d+\]$", "", message)
            if message:
                return message[:400]
    lines = [line for line in lines if line]
    return lines[-1][:400] if lines else "mvn failed without a message"
