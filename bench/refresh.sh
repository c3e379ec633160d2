#!/usr/bin/env bash
# Query latency and memory while a downloaded 1,000,000-name list is
# refreshed and swapped. The list is served over HTTP on loopback and changes
# before each refresh, so every `hydradns update` downloads, checks, saves and
# rebuilds the whole set. The gateway (all its threads) is pinned to CPU 0,
# dnsperf to CPU 1, at a fixed 10,000 QPS of blocked names:
#   phase 1: 20 s with no refresh (baseline);
#   phase 2: 20 s with a refresh every 4 s.
# Reports client-side latency percentiles (dnsperf -v), lost queries, and RSS
# before and at the peak of the refreshes next to the size of one set.
#   bench/refresh.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0; [ "${1:-}" = "--quick" ] && quick=1
names=$([ $quick = 1 ] && echo 200000 || echo 1000000)
secs=$([ $quick = 1 ] && echo 8 || echo 20)

command -v dnsperf >/dev/null || apt-get install -y dnsperf >/dev/null
cargo build --release --quiet
# HYDRADNS_BIN picks another build, e.g. the static musl one from scripts/build-release.sh.
bin=${HYDRADNS_BIN:-target/release/hydradns}
cargo build --release --quiet --example synth-list
cargo build --release --quiet --example echo-responder

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$work/www"
target/release/examples/synth-list "$names" "$work/www/list.txt"
awk '!/^#/ && NR % 37 == 0 && n++ < 50000 {print $1 " A"}' "$work/www/list.txt" > "$work/queries.txt"
hport=$(free_port); dport=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$work/www" "$hport" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $hport), 1)" 2>/dev/null && break; sleep 0.1; done
cat > "$work/conf" <<CONF
config hydradns 'main'
	list listen '127.0.0.1:$dport'
	list upstream '127.0.0.1:9'
	option workers '1'
	option control_socket '$work/control.sock'
	option list_dir '$work/lists'
	option refresh_interval '0'
	option stats_interval '0'
config blocklist
	option name 'big'
	option url 'http://127.0.0.1:$hport/list.txt'
config querylog 'querylog'
	option enabled '${QUERYLOG:-1}'
	option path '$work/live/queries.db'
	option flash_path '$work/flash/queries.db'
	option flush_interval '0'
CONF
taskset -c 0 "$bin" run --user root --log stderr -c "$work/conf" 2>"$work/log" &
gw=$!; pids+=("$gw")
for _ in $(seq 600); do grep -q "policy: [1-9]" "$work/log" 2>/dev/null && break; sleep 0.1; done
grep -q "policy: [1-9]" "$work/log" || { echo "the list was not loaded:"; cat "$work/log"; exit 1; }
sleep 1
kib() { awk -v k="$1" '/'"$1"'/ {print $2}' "/proc/$gw/status"; }
stat_field() { "$bin" stats -c "$work/conf" --json | python3 -c "import json,sys; r=json.load(sys.stdin); print($1)"; }
latency() { # dnsperf -v output on stdin: prints "sent lost p50 p99 p99.9 max" in ms
    python3 -c '
import sys
lat=[]; sent=0; lost=0
for line in sys.stdin:
    if line.startswith("> "):
        parts=line.split()
        try: lat.append(float(parts[-1])*1000)
        except ValueError: pass
    elif "Queries sent:" in line: sent=int(line.split()[2])
    elif "Queries lost:" in line: lost=int(line.split()[2])
lat.sort()
q=lambda p: lat[min(len(lat)-1, int(p*len(lat)))] if lat else 0
print(sent, lost, "%.3f %.3f %.3f %.3f" % (q(0.5), q(0.99), q(0.999), lat[-1] if lat else 0))'
}
run_load() { taskset -c 1 dnsperf -s 127.0.0.1 -p "${1:-$dport}" -d "$work/queries.txt" -l "$secs" -Q 10000 -c 1 -T 1 -v 2>&1 | latency; }

# The machine's own floor: the same load against a responder that only echoes.
eport=$(free_port)
taskset -c 0 target/release/examples/echo-responder "127.0.0.1:$eport" &
echo_pid=$!
read -r s0 l0 e50 e99 e999 emax < <(run_load "$eport")
kill "$echo_pid"; wait "$echo_pid" 2>/dev/null || true

set_bytes=$(stat_field "r['lists_bytes']")
read -r s1 l1 a50 a99 a999 amax < <(run_load)
# Sampled after the steady load, so the query log's page cache and buffers
# are already in "before"; the peak counts from here.
rss_before=$(kib VmRSS)
echo 5 > "/proc/$gw/clear_refs" 2>/dev/null || true
(
    end=$((SECONDS + secs))
    n=0
    while [ $SECONDS -lt "$end" ]; do
        echo "changed-$n.refresh.example" >> "$work/www/list.txt"; n=$((n + 1))
        touch -d "+$n minutes" "$work/www/list.txt"
        # Each refresh's own peak, against the RSS just before it.
        before=$(kib VmRSS)
        echo 5 > "/proc/$gw/clear_refs" 2>/dev/null || true
        "$bin" update -c "$work/conf" >/dev/null 2>&1 || true
        echo "$before $(kib VmHWM)" >> "$work/peaks"
        sleep 4
    done
    echo "$n" > "$work/refreshes"
) &
pids+=($!)
read -r s2 l2 b50 b99 b999 bmax < <(run_load)
wait "${pids[-1]}" 2>/dev/null || true
rss_peak=$(awk '$2 > m { m = $2 } END { print m }' "$work/peaks")
rss_after=$(kib VmRSS)
refreshes=$(cat "$work/refreshes")
swapped=$(grep -c "list 'big': updated" "$work/log")
echo "| ${secs}s at 10,000 QPS, blocked names, $names-name list | sent | lost | p50 | p99 | p99.9 | max |"
echo "|---|---|---|---|---|---|---|"
echo "| echo responder (this machine's floor) | $s0 | $l0 | $e50 ms | $e99 ms | $e999 ms | $emax ms |"
echo "| gateway, no refresh | $s1 | $l1 | $a50 ms | $a99 ms | $a999 ms | $amax ms |"
echo "| gateway, $refreshes refreshes (download, check, save, rebuild, swap) | $s2 | $l2 | $b50 ms | $b99 ms | $b999 ms | $bmax ms |"
echo
echo "| memory | MiB |"
echo "|---|---|"
awk -v b="$set_bytes" 'BEGIN { printf "| one blocklist set | %.1f |\n", b / 1048576 }'
awk -v r="$rss_before" 'BEGIN { printf "| RSS before the refreshes (old set loaded) | %.1f |\n", r / 1024 }'
awk -v r="$rss_peak" 'BEGIN { printf "| peak RSS during the refreshes | %.1f |\n", r / 1024 }'
awk -v r="$rss_after" 'BEGIN { printf "| RSS after the refreshes | %.1f |\n", r / 1024 }'
awk -v b="$set_bytes" '{ printf "| refresh %d: peak over the RSS just before it + one set | %+.1f |\n", NR, ($2 - $1) / 1024 - b / 1048576 }' "$work/peaks"
echo
echo "swaps logged: $swapped (1 at start + refreshes)"
