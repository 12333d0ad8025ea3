#!/usr/bin/env bash
# Reproduce KafkaJS 2.2.4's errorRecovery test "exhausting the number of retries" RUNS times
# (default 5) and count how often its record is delivered twice, and how.
#
#   scripts/client_suites/kafkajs_error_recovery.sh [RUNS]
#
# With $BOOTSTRAP set it runs against that broker (e.g. Apache Kafka from
# `onceflow kafka-cluster --nodes 1`); otherwise it starts a onceflow broker from
# this repository's .venv with a fresh data directory and stops it at the end.
# kafkajs@2.2.4 is installed once with npm into $KAFKAJS_DIR (default: a cache directory).
# Each run prints `result ok`, `result written-twice` (the record is on the log twice: the
# producer retried a Produce the broker had written), `result redelivered` (one offset given
# to the consumer twice) or `result error`. Exit 1 if any run redelivered or failed; a record
# written twice is KafkaJS's at-least-once producer, reported but not a failure.
set -euo pipefail

runs=${1:-5}
repo=$(cd "$(dirname "$0")/../.." && pwd)
kafkajs_dir=${KAFKAJS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/onceflow/kafkajs-2.2.4}
if [ ! -f "$kafkajs_dir/node_modules/kafkajs/package.json" ]; then
    mkdir -p "$kafkajs_dir"
    (cd "$kafkajs_dir" && npm init -y >/dev/null && npm install --no-audit --no-fund kafkajs@2.2.4 >/dev/null)
fi
cp "$repo/scripts/client_suites/kafkajs_error_recovery.js" "$kafkajs_dir/"

work=$(mktemp -d)
source "$repo/scripts/client_suites/onceflow_broker.sh"
trap 'stop_broker; rm -rf "$work"' EXIT

if [ -z "${BOOTSTRAP:-}" ]; then
    start_broker kafkajs --config group.initial.rebalance.delay.ms=0
    BOOTSTRAP=$broker_address
fi
export BOOTSTRAP

declare -A counts=([ok]=0 [written-twice]=0 [redelivered]=0 [error]=0)
for run in $(seq "$runs"); do
    output=$(cd "$kafkajs_dir" && timeout 60 node kafkajs_error_recovery.js 2>&1) || true
    line=$(grep '^result' <<<"$output" || echo "result error (no result line)")
    echo "run $run: $line"
    kind=$(echo "$line" | awk '{print $2}')
    counts[$kind]=$((counts[$kind] + 1))
done
echo "broker $BOOTSTRAP, $runs runs: ok ${counts[ok]}, written-twice ${counts[written-twice]}," \
    "redelivered ${counts[redelivered]}, error ${counts[error]}"
[ "${counts[redelivered]}" -eq 0 ] && [ "${counts[error]}" -eq 0 ]
