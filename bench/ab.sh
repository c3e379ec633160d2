#!/usr/bin/env bash
# A/B of two or more HydraDNS builds under the redline benchmark's saturating
# load, beside the echo responder, rounds interleaved so a noisy machine hurts
# them alike. For claims of the form "this change made X faster": the builds
# run in one invocation, and the table names them.
#   bench/ab.sh LABEL=BIN [LABEL=BIN…] [-- redline options]
# A LABEL ending in +log runs its build with the query log on (on tmpfs); a
# LABEL holding +groups adds bench/groups.conf (3 groups, 50 client rules;
# a build from before groups ignores those sections, with warnings); one
# holding +parental adds bench/parental.conf (3 groups with 10 services and
# safe search each, the load generator in all of them; +parental-off: the
# same groups and lists without the services and safe search).
#   e.g. bench/ab.sh old=/tmp/hydradns-old new=target/x86_64-unknown-linux-musl/release/hydradns \
#          -- --lists 1m --scenarios mix --rounds 5
# Defaults: the 100k list, all three scenarios, 5 rounds of 5 s.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091  # bench/lib.sh is checked on its own (bench/*.sh)
. bench/lib.sh
need dnsperf:dnsperf taskset:util-linux
builds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
        *=*) [ -x "${1#*=}" ] || { echo "ab.sh: ${1#*=} is not an executable" >&2; exit 2; }
             builds+=("$1") ;;
        *) echo "ab.sh: expected LABEL=BIN, got $1" >&2; exit 2 ;;
    esac
    shift
done
[ "${1:-}" = "--" ] && shift
[ ${#builds[@]} -ge 1 ] || { echo "usage: bench/ab.sh LABEL=BIN [LABEL=BIN…] [-- redline options]" >&2; exit 2; }
cargo build --release --locked --quiet --example synth-list --example list-export \
    --example echo-responder --example bench-upstream --example bench-load
ab=$(IFS=,; echo "${builds[*]}")
python3 bench/redline.py --bin target/release --hydradns "${builds[0]#*=}" --servers echo \
    --scenarios blocked,hits,mix --lists 100k --rounds 5 --ab "$ab" "$@"
