#!/usr/bin/env bash
# What `hydradns stats --history` (the Overview's chart) costs on a full
# day's log: ROWS rows (default 1,000,000) from 50 clients spread evenly
# over the last 24 hours in a query log with the writer's tables, then the
# command timed RUNS times (default 5); prints the median and the slowest
# wall time. The same for the Queries page's group filter: `log --group`
# for a group of one of the 50 clients and for 'default' (the other 49),
# and a page from the middle of the log (`log --before`).
# Judges no speed; the figure goes to docs/benchmarks.md.
#   bench/history.sh [BINARY]      (default target/release/hydradns)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/hydradns}
rows=${ROWS:-1000000}
runs=${RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/live"
python3 - "$work/live/queries.db" "$rows" << 'PY'
import sqlite3, sys, time
path, n = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(path)
# The writer's columns (src/querylog/writer.rs); ids are ms << 12 | sequence.
db.executescript("""PRAGMA journal_mode=WAL;
CREATE TABLE queries (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, client TEXT NOT NULL, name TEXT NOT NULL,
  qtype INTEGER NOT NULL, outcome TEXT NOT NULL, rcode INTEGER NOT NULL, upstream TEXT, list TEXT,
  latency_us INTEGER NOT NULL, mac TEXT, client_name TEXT);
CREATE TABLE totals (outcome TEXT PRIMARY KEY, count INTEGER NOT NULL);""")
now = int(time.time() * 1000)
step = 86_400_000 / n
outcomes = ["forwarded", "cached", "cached", "blocked"]
db.executemany(
    "INSERT INTO queries VALUES (?, ?, ?, ?, 1, ?, 0, '192.0.2.1:53', NULL, 900, NULL, NULL)",
    (((int(now - 86_400_000 + i * step) << 12) | (i & 4095), int(now - 86_400_000 + i * step),
      "192.168.1.%d" % (i % 50), "host%d.example" % (i % 5000), outcomes[i % 4]) for i in range(n)))
db.commit()
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
PY
printf "config querylog 'querylog'\n\toption path '%s/live/queries.db'\n\toption flash_path '%s/flash/queries.db'\n" \
	"$work" "$work" > "$work/conf"
printf "config group 'kids'\nconfig client\n\tlist match '192.168.1.7'\n\tlist group 'kids'\n" >> "$work/conf"
# Runs "$@" RUNS times (output in $work/out); prints the median and slowest.
timed() {
	local times=() start sorted
	for _ in $(seq "$runs"); do
		start=$(date +%s%N)
		"$@" > "$work/out"
		times+=($((($(date +%s%N) - start) / 1000000)))
	done
	sorted=$(printf '%s\n' "${times[@]}" | sort -n)
	echo "median $(sed -n "$(((runs + 1) / 2))p" <<< "$sorted") ms, slowest $(tail -1 <<< "$sorted") ms"
}
took=$(timed "$bin" stats -c "$work/conf" --history --json)
total=$(python3 -c 'import json,sys; h=json.load(open(sys.argv[1])); print(sum(b["allowed"]+b["blocked"] for b in h["buckets"]), len(h["buckets"]))' "$work/out")
echo "rows: $rows in $(du -h "$work/live/queries.db" | cut -f1); counted in the 144 buckets (and buckets): $total"
echo "stats --history --json, $runs runs: $took"
# A deep page: the 100 rows before the middle of the log (rows are ids in time order).
middle=$(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT id FROM queries ORDER BY id LIMIT 1 OFFSET ?", (int(sys.argv[2]) // 2,)).fetchone()[0])' "$work/live/queries.db" "$rows")
took=$(timed "$bin" log -c "$work/conf" --before "$middle" --limit 100 --json)
echo "log --before (the middle) --limit 100 --json, $runs runs: $took"
for group in kids default; do
	took=$(timed "$bin" log -c "$work/conf" --group "$group" --limit 100 --json)
	clients=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["entries"]), len({e["client"] for e in json.load(open(sys.argv[1]))["entries"]}))' "$work/out")
	echo "log --group $group --limit 100 --json, $runs runs: $took (rows and clients: $clients)"
done
