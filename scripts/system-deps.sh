#!/usr/bin/env bash
# Install the Debian packages the test suite uses, only where they are missing.
set -euo pipefail
need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
# Maven fetches Apache Kafka's jars for the Apache Kafka cluster (src/onceflow/kafka_cluster).
command -v mvn >/dev/null 2>&1 || need+=(maven)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# Burrow and the ZooKeeper it insists on (tests/integration/test_burrow.py; about 36 MB).
command -v Burrow >/dev/null 2>&1 || need+=(burrow)
[ -e /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
# Prometheus scrapes the broker's metrics (tests/integration/test_prometheus.py).
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
# Chromium drives the console's browser tests (tests/integration/test_console_browser.py).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing from Debian's packages: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
