#!/usr/bin/env bash
# Run kafka-python's own integration suite against a onceflow broker.
#
#   scripts/client_suites/kafka_python.sh KAFKA_PYTHON_SRC [KAFKA_VERSION...]
#
# KAFKA_PYTHON_SRC is a checkout of kafka-python (not part of this repository). Its suite
# talks to an already running broker when KAFKA_URI is set; KAFKA_VERSION (default: 3.7.0
# and 3.9.0) is the broker version the clients pin with api_version. A virtualenv for the
# suite is made once in KAFKA_PYTHON_SRC/.venv-onceflow. The broker runs from this
# repository's .venv on a free port with a fresh data directory per version, configured as
# kafka-python's own fixture configures Kafka. Extra pytest arguments: $PYTEST_ARGS.
# The SSL and SASL modules are left out: their fixtures always start a Kafka of their own.
# A hanging test fails alone (--timeout-method=signal) instead of ending the run.
set -euo pipefail

src=$(cd "${1:?usage: $0 KAFKA_PYTHON_SRC [KAFKA_VERSION...]}" && pwd)
shift
versions=("$@")
[ $# -gt 0 ] || versions=(3.7.0 3.9.0)
repo=$(cd "$(dirname "$0")/../.." && pwd)
suite_venv="$src/.venv-onceflow"

if [ ! -x "$suite_venv/bin/pytest" ]; then
    python3 -m venv "$suite_venv"
    "$suite_venv/bin/pip" install -q -e "$src" pytest pytest-mock pytest-timeout \
        lz4 zstandard xxhash python-snappy crc32c
fi

work=$(mktemp -d)
source "$repo/scripts/client_suites/onceflow_broker.sh"
trap 'stop_broker; rm -rf "$work"' EXIT

status=0
for version in "${versions[@]}"; do
    start_broker "$version" \
        --config num.partitions=4 \
        --config group.initial.rebalance.delay.ms=0 \
        --config group.min.session.timeout.ms=1000 \
        --config authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
        --config allow.everyone.if.no.acl.found=true
    address=$broker_address
    echo "== kafka-python $(cd "$src" && git describe --always 2>/dev/null || echo src)," \
        "KAFKA_VERSION=$version, broker $address"
    # KAFKA_ROOT only has to exist: with KAFKA_URI the fixtures start no Kafka of their own.
    (cd "$src" && KAFKA_VERSION="$version" KAFKA_URI="tcp://$address" KAFKA_ROOT="$work" \
        "$suite_venv/bin/pytest" test/integration -q -rfE -p no:cacheprovider \
        --ignore=test/integration/test_ssl_integration.py \
        --ignore=test/integration/test_sasl_integration.py \
        -o log_level=WARNING --timeout=120 --timeout-method=signal ${PYTEST_ARGS:-}) || status=1
    stop_broker
    if grep -q ERROR "$work/broker-$version.log"; then
        echo "-- broker errors (KAFKA_VERSION=$version):"
        grep -A3 ERROR "$work/broker-$version.log" | head -40
    fi
done
exit $status
