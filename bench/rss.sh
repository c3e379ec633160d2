#!/usr/bin/env bash
# Resident memory of the release binary (query log on, default settings)
# after loading synthetic lists of 100k and 1M names, and the time from
# start to its first answer; then the 1M list shared by three groups, with
# bench/groups.conf's 50 client rules (the list must be stored once), and
# the same with bench/sets.conf's two groups' own upstreams (issue 60).
#   bench/rss.sh            (prints a markdown table)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
# HYDRADNS_BIN picks another build, e.g. the static musl one from scripts/build-release.sh.
bin=${HYDRADNS_BIN:-target/release/hydradns}
cargo build --release --quiet --example synth-list
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
pid=
first_answer() {
    # A blocked name answered over UDP: the server is up and the list is in.
    python3 - "$1" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
q = bytes.fromhex("abcd01000001000000000000") + b"\x03www\x0fhydradns-canary\x07example\x00\x00\x01\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.05)
end = time.time() + 60
while time.time() < end:
    try:
        s.sendto(q, ("127.0.0.1", port)); s.recv(512); sys.exit(0)
    except OSError:
        pass
sys.exit(1)
PY
}
echo "| list | names | groups | RSS after load | peak RSS | start to first answer |"
echo "|---|---|---|---|---|---|"
for run in 100000:1 1000000:1 1000000:3 1000000:3+sets; do
    n=${run%:*} groups=${run#*:}
    list="$work/list-$n.txt"
    [ -e "$list" ] || { target/release/examples/synth-list "$n" "$list"; echo "hydradns-canary.example" >> "$list"; }
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    cat > "$work/conf" <<CONF
config hydradns 'main'
	list listen '127.0.0.1:$port'
	list upstream '127.0.0.1:9'
	option control_socket '$work/control.sock'
config blocklist
	option path '$list'
config querylog 'querylog'
	option path '$work/live/queries.db'
	option flash_path '$work/flash/queries.db'
CONF
    if [ "${groups%+sets}" = 3 ]; then
        printf "\tlist group 'default'\n\tlist group 'kids'\n\tlist group 'guests'\n" >"$work/shared"
        # The big list's section gets the three groups; then the rules.
        sed -i "/option path '${list//\//\\/}'/r $work/shared" "$work/conf"
        cat bench/groups.conf >>"$work/conf"
    fi
    if [ "$groups" = 3+sets ]; then
        sed "s/@UPSTREAM@/127.0.0.1:9/" bench/sets.conf >>"$work/conf"
    fi
    start=$(date +%s.%N)
    "$bin" run --user root --log stderr -c "$work/conf" 2>"$work/log" &
    pid=$!
    first_answer "$port"
    end=$(date +%s.%N)
    rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
    hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
    awk -v n="$n" -v r="$rss" -v h="$hwm" -v s="$start" -v e="$end" \
        -v g="$groups" 'BEGIN { printf "| synthetic | %d | %s | %.1f MiB | %.1f MiB | %.2f s |\n", n, g, r / 1024, h / 1024, e - s }'
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
done
