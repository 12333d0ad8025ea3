# Sourced by the client-suite scripts: a onceflow broker from this repository's .venv.
# Needs $repo (the repository) and $work (a scratch directory).
#
#   start_broker NAME [--config KEY=VALUE ...]   data in $work/data-NAME, log in
#                                                $work/broker-NAME.log; sets broker_pid and
#                                                broker_address, or exits 2 with the log
#   stop_broker

broker_pid=""
broker_address=""

start_broker() {
    local name=$1
    shift
    "$repo/.venv/bin/onceflow" broker --data-dir "$work/data-$name" --port 0 "$@" \
        >"$work/ready-$name" 2>"$work/broker-$name.log" &
    broker_pid=$!
    for _ in $(seq 600); do  # up to a minute on a busy machine
        grep -q '^ready ' "$work/ready-$name" && break
        kill -0 "$broker_pid" 2>/dev/null || break
        sleep 0.1
    done
    broker_address=$(sed -n 's/^ready //p' "$work/ready-$name")
    if [ -z "$broker_address" ]; then
        echo "the broker did not start:" >&2
        cat "$work/broker-$name.log" >&2
        exit 2
    fi
}

stop_broker() {
    if [ -n "$broker_pid" ]; then
        kill "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
        broker_pid=""
    fi
}
