#!/usr/bin/env bash
# What the gateway writes to flash in a day (issue 46). For each load, a
# fresh ext4 filesystem on a loop device of its own holds `flash_path` and
# `list_dir` (the live query log stays on tmpfs), and bench/flash.py replays
# a simulated day compressed 3600 times (an hour is a second), in steady
# state (seven days of rows already on flash, each flush adding an hour and
# deleting the hour that expired), and reports the sectors the loop device
# wrote that day. Needs root (losetup, mount).
#   bench/flash.sh [BIN [CASE...]]   CASE: a load in queries a day, `idle` (a day
#                                    without queries after a week at 50,000 a day),
#                                    `lists` (a day of unchanged lists, refreshed
#                                    every 6 h, one answering 304, one the same
#                                    bytes without validators); by default
#                                    10000 50000 200000 idle lists.
# BIN defaults to target/release/hydradns (built); give an older build to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/hydradns}
[ -n "${1:-}" ] || cargo build --release --quiet
shift || true
cases=${*:-10000 50000 200000 idle lists}
img=$(mktemp /tmp/hydradns-flash-XXXXXX.img)
mnt=$(mktemp -d /tmp/hydradns-flash-mnt-XXXXXX)
cleanup() {
    mountpoint -q "$mnt" && umount "$mnt"
    rm -rf "$img" "$mnt"
}
trap cleanup EXIT

run() { # $1 = queries a day, then flags for flash.py; a fresh filesystem each time
    local per_day=$1 dev out; shift
    truncate -s 0 "$img" && truncate -s 256M "$img"
    mkfs.ext4 -q -F "$img"
    dev=$(losetup -f --show "$img")
    mount "$dev" "$mnt"
    out=$(python3 bench/flash.py "$bin" "$(basename "$dev")" "$mnt" "$per_day" "$@") || true
    umount "$mnt"
    losetup -d "$dev"
    echo "$out"
}

for c in $cases; do
    case $c in
        idle) echo "idle day after a 50000-a-day week: $(run 50000 --idle)" ;;
        lists) echo "idle day, unchanged lists refreshed every 6 h: $(run 0 --idle --lists)" ;;
        *) echo "load $c: $(run "$c")" ;;
    esac
done
