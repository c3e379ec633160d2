#!/usr/bin/env bash
# What the query log costs. Runs the release binary with one worker pinned to
# CPU 0 (the log's threads share that core) and dnsperf pinned to CPU 1,
# answering blocked names (the cheapest path, so logging's share is largest):
#   1. saturation QPS and server CPU per query, query log off vs on, runs
#      interleaved so a noisy machine hurts both alike, and the share of
#      queries the log kept up with (the writer runs at nice 15, so past its
#      share of the core it drops entries rather than slow DNS);
#   2. a fixed 10,000 QPS for DURATION seconds (default 60) with the log on:
#      the server's own counters must show every query answered and logged,
#      none dropped; peak RSS.
# Prints markdown tables.   bench/querylog.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0; [ "${1:-}" = "--quick" ] && quick=1
sat_secs=$([ $quick = 1 ] && echo 3 || echo 10)
rounds=${ROUNDS:-$([ $quick = 1 ] && echo 1 || echo 3)}
sustain_secs=${DURATION:-$([ $quick = 1 ] && echo 10 || echo 60)}

command -v dnsperf >/dev/null || { sudo -n true 2>/dev/null && SUDO=sudo || SUDO=; $SUDO apt-get install -y dnsperf >/dev/null; }
cargo build --release --quiet
# HYDRADNS_BIN picks another build, e.g. the static musl one from scripts/build-release.sh.
bin=${HYDRADNS_BIN:-target/release/hydradns}
cargo build --release --quiet --example synth-list

work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
target/release/examples/synth-list 100000 "$work/list.txt"
awk '!/^#/ && n++ < 50000 {print "www." $1 " A"}' "$work/list.txt" > "$work/queries.txt"
port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

start_server() { # $1 = querylog enabled (0/1)
    rm -rf "$work/live" "$work/flash"
    cat > "$work/conf" <<CONF
config hydradns 'main'
	list listen '127.0.0.1:$port'
	list upstream '127.0.0.1:9'
	option workers '1'
	option control_socket '$work/control.sock'
	option stats_interval '0'
config blocklist
	option path '$work/list.txt'
config querylog 'querylog'
	option enabled '$1'
	option path '$work/live/queries.db'
	option flash_path '$work/flash/queries.db'
	option flush_interval '0'
	option max_size '64M'
CONF
    taskset -c 0 "$bin" run --user root --log stderr -c "$work/conf" 2>"$work/log" &
    pid=$!
    for _ in $(seq 100); do grep -q "ready with" "$work/log" 2>/dev/null && return; sleep 0.05; done
    echo "server did not start:"; cat "$work/log"; exit 1
}
stop_server() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
stat_field() { # $1 = python expression on the report r
    "$bin" stats -c "$work/conf" --json | python3 -c "import json,sys; r=json.load(sys.stdin); print($1)"
}
saturate() { # prints "qps cpu_us_per_query logged_share"
    local t0 q0 out qps t1 q1 w
    t0=$(cpu_ticks "$pid"); q0=$(stat_field "r['queries']")
    out=$(taskset -c 1 dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries.txt" -l "$sat_secs" -c 1 -T 1 -q 500 2>&1)
    t1=$(cpu_ticks "$pid"); q1=$(stat_field "r['queries']")
    sleep 1 # let the writer commit what it holds
    w=$(stat_field "r['querylog']['written']")
    qps=$(echo "$out" | awk '/Queries per second/ {print $4}')
    awk -v q="$qps" -v t="$((t1 - t0))" -v n="$((q1 - q0))" -v w="$w" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { printf "%.0f %.2f %.0f\n", q, (t / hz) * 1e6 / n, 100 * w / n }'
}

declare -a off_qps on_qps off_cpu on_cpu on_logged
for _ in $(seq "$rounds"); do
    for mode in 0 1; do
        start_server "$mode"
        read -r qps cpu logged < <(saturate)
        if [ "$mode" = 0 ]; then
            off_qps+=("$qps"); off_cpu+=("$cpu")
        else
            on_qps+=("$qps"); on_cpu+=("$cpu"); on_logged+=("$logged")
        fi
        stop_server
    done
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
qoff=$(median "${off_qps[@]}"); qon=$(median "${on_qps[@]}")
coff=$(median "${off_cpu[@]}"); con=$(median "${on_cpu[@]}")
echo "| query log | saturation QPS (median of $rounds × ${sat_secs}s) | server CPU per query | queries logged |"
echo "|---|---|---|---|"
echo "| off | $qoff | ${coff} µs | – |"
echo "| on | $qon | ${con} µs | $(median "${on_logged[@]}") % (the rest dropped and counted) |"
awk -v a="$qoff" -v b="$qon" -v c="$coff" -v d="$con" \
    'BEGIN { printf "\nlogging costs %.1f%% of saturation throughput and %.1f%% more CPU per query\n\n", 100 * (a - b) / a, 100 * (d - c) / c }'

start_server 1
out=$(taskset -c 1 dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries.txt" -l "$sustain_secs" -Q 10000 -c 1 -T 1 2>&1)
sleep 1 # one batch interval for the writer to commit the tail
sent=$(echo "$out" | awk '/Queries sent/ {print $3}')
completed=$(echo "$out" | awk '/Queries completed/ {print $3}')
read -r answered written dropped lost < <(stat_field "r['queries'], r['querylog']['written'], r['querylog']['dropped'], r['querylog']['lost']" | tr -d '(),')
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
p99=$(stat_field "r['latency']['p99_us']")
stop_server
echo "| ${sustain_secs}s at 10,000 QPS, log on | value |"
echo "|---|---|"
echo "| queries sent / answered (dnsperf) | $sent / $completed |"
echo "| queries counted by the server | $answered |"
echo "| log entries written / dropped / lost | $written / $dropped / $lost |"
echo "| engine latency p99 | ${p99} µs |"
echo "| peak RSS | $((hwm / 1024)) MiB |"
if [ "$answered" != "$sent" ] || [ "$written" != "$answered" ] || [ "$dropped" != 0 ] || [ "$lost" != 0 ]; then
    echo "FAIL: the server's counters do not account for every query sent" >&2
    exit 1
fi
