#!/usr/bin/env bash
# What loading a list costs, the bulk of HydraDNS's start-up: wall time of
# the whole load (best of five) for the synthetic 100k and 1M lists and the
# real lists combined, and instructions per name counted by callgrind for one
# load of the 100k list, which a noisy machine cannot move. Static musl build,
# as on the router.
#   bench/list-load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091  # bench/lib.sh is checked on its own (bench/*.sh)
. bench/lib.sh
need valgrind:valgrind taskset:util-linux
command -v cargo-zigbuild >/dev/null || pip install --quiet ziglang cargo-zigbuild
cargo zigbuild --quiet --locked --release --target x86_64-unknown-linux-musl --example list-load
cargo build --quiet --locked --release --example synth-list
load=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-musl/release/examples/list-load
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${CARGO_TARGET_DIR:-target}"/release/examples/synth-list 100000 "$work/100k.list"
"${CARGO_TARGET_DIR:-target}"/release/examples/synth-list 1000000 "$work/1m.list"
# The real lists, from the test data (tests/data/SOURCES.md).
lists=$work/lists
for l in stevenblack-unified-2026-06-26/unified.domains.txt hagezi-2026-08-15/domains__light.txt \
    adguard-dns-filter-noprivacy-2026-08-21/filter.txt; do
    mkdir -p "$lists/${l%/*}"
    xz -dc "tests/data/blocklists/$l.xz" > "$lists/$l"
done
echo "commit $(git describe --always --dirty), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for l in 100k 1m; do
    printf '%-5s ' "$l"; taskset -c 0 "$load" "$work/$l.list"
done
printf 'real  '
taskset -c 0 "$load" "$lists/stevenblack-unified-2026-06-26/unified.domains.txt" \
    "$lists/hagezi-2026-08-15/domains__light.txt" "$lists/adguard-dns-filter-noprivacy-2026-08-21/filter.txt"
valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$load" --once "$work/100k.list" >/dev/null 2>&1
total=$(awk '/^(totals|summary):/ {print $2; exit}' "$work/cg.out")
echo "100k, one whole load: $total instructions, $((total / 100000)) per name (callgrind)"
