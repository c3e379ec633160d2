#!/usr/bin/env bash
# Installs what the tests need and runs them all: format check, clippy, unit
# and integration tests (in a clone with nothing beside it,
# scripts/test-clone.sh), the LuCI views, then the router side (scripts/test-openwrt.sh:
# cross builds, the tests again under qemu, packages, init script, UCI), the
# DNSSEC comparison with Unbound's validator (tests/dnssec/run.sh), a
# fixed-count pass of every fuzz target (scripts/fuzz.sh), and short passes
# of the benchmark (bench/run.sh --quick) and of the soak (bench/soak.sh --quick).
# .ci/run calls this script; so does the README. The Rust suites run in the
# fresh clone with every core kept busy by another process (scripts/busy.sh).
#
#   scripts/test.sh               everything, as CI runs it
#   scripts/test.sh --stress [N]  only the Rust suites with every core busy,
#                                 N times in a row (default 2), stopping at the first failure
set -euo pipefail
cd "$(dirname "$0")/.."

stress_runs=0
case "${1:-}" in
    '') ;;
    --stress)
        stress_runs=${2:-2}
        [[ "$stress_runs" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [--stress [RUNS]]" >&2; exit 2; }
        ;;
    *) echo "usage: $0 [--stress [RUNS]]" >&2; exit 2 ;;
esac

# One busy loop per core while the Rust suites run: scripts/busy.sh.
# shellcheck source=scripts/busy.sh
. scripts/busy.sh

# Each stage's seconds and the total, printed as the run goes and at its
# end (also when a stage fails), so that CI's log shows which suite grew.
stage_name='' stage_started=$SECONDS
stage() {
    [ -z "$stage_name" ] || printf '== %s: %d s\n' "$stage_name" $((SECONDS - stage_started))
    stage_name=$1 stage_started=$SECONDS
    [ -z "$stage_name" ] || printf '\n== %s\n' "$stage_name"
}
finish() {
    local rc=$? failed=$stage_name
    stop_busy
    stage ''
    if [ "$rc" -eq 0 ]; then
        printf '== all stages: %d s\n' "$SECONDS"
    else
        printf '== failed in "%s" (exit %d) after %d s\n' "$failed" "$rc" "$SECONDS"
    fi
}
trap finish EXIT

stage setup

# Toolchain components (already present on the dev/CI image; added if not).
for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^${component}-" || rustup component add "$component"
done

# The OpenWrt rig is vendored (tests/openwrt/userland, vendor/openwrt-src);
# where the team's ../shared copy sits beside this clone, the two must agree.
if [ -d ../shared/openwrt-userland ]; then
    scripts/sync-rig.sh --check
fi

# The integration tests put the real dnsmasq in front of the gateway, use
# the real Unbound and dnsdist as DNS over TLS and over HTTPS servers and
# nginx as an HTTPS front (HTTP/1.1 and HTTP/2), and make a not-yet-valid
# certificate with openssl.
# shellcheck disable=SC1091  # bench/lib.sh is checked on its own
. bench/lib.sh
need dnsmasq:dnsmasq-base
need unbound:unbound
need dnsdist:dnsdist
need openssl:openssl
need nginx:nginx-light
# tests/data keeps its large lists xz-compressed; rustc links with cc, and
# the bundled SQLite and ring compile C with it.
need xz:xz-utils cc:gcc

if [ "$stress_runs" -eq 0 ]; then
    stage "format, clippy"
    cargo fmt --all -- --check
    cargo fmt --manifest-path fuzz/Cargo.toml -- --check
    cargo clippy --locked --all-targets -- -D warnings
fi
# tests/metrics.rs reads the metrics with the Prometheus client library's
# own parser too, and must not skip it here.
python3 -c 'import prometheus_client' 2> /dev/null || python3 -m pip install -q prometheus_client
# tests/encrypted.rs scripts a DoH server that refuses every stream with the h2 package.
python3 -c 'import h2' 2> /dev/null || python3 -m pip install -q h2
export HYDRADNS_REQUIRE_PROM_PARSER=1
if [ "$stress_runs" -gt 0 ]; then
    stage "build the tests"
    cargo test --locked --no-run
    for run in $(seq "$stress_runs"); do
        stage "cargo test, every core busy ($run of $stress_runs)"
        under_load cargo test --locked
    done
    exit 0
fi
# The LuCI pages' views in node:vm (Node's own test runner, no npm
# packages), and their translation template up to date.
stage "LuCI views"
need node:nodejs
node --test tests/luci/
scripts/luci-pot.py --check
# The Rust suites, in a second clone in a temporary directory without
# ../shared (the repository tests itself), with every core busy: CI runners
# and this machine are shared, and a red run must mean a broken product,
# not a busy neighbour. Once: a run on an idle machine proves nothing this
# one does not.
stage "fresh clone without ../shared, cargo test with every core busy"
scripts/test-clone.sh --under-load
# Router builds, packages, init script and UCI compatibility.
stage "router: builds, qemu, packages, rig"
scripts/test-openwrt.sh
# DNSSEC against Unbound's validator (issue 61, tests/dnssec/README.md):
# 38 signed cases, the client's flags and the clock, HydraDNS's verdict
# held against Unbound's case by case; about 20 s, cut off at 3 minutes.
# With the x86_64 release binary the router stage just built. Any exit but
# 0 fails, 77 included: it means a binary without `option dnssec`, and
# this tree has it.
stage "DNSSEC against Unbound's validator"
need dig:bind9-dnsutils ldns-signzone:ldnsutils dnssec-signzone:bind9-utils
dnssec_bin=dist/hydradns-$(awk -F'"' '/^version =/ {print $2; exit}' Cargo.toml)-x86_64-unknown-linux-musl
[ -x "$dnssec_bin" ] || scripts/build-release.sh x86_64-unknown-linux-musl > /dev/null
dnssec_rc=0
timeout 180 tests/dnssec/run.sh --hydradns "$dnssec_bin" || dnssec_rc=$?
case $dnssec_rc in
    0) ;;
    77) echo "$dnssec_bin does not know option dnssec" >&2; exit 1 ;;
    124) echo "tests/dnssec/run.sh took over 180 s" >&2; exit 1 ;;
    *) exit "$dnssec_rc" ;;
esac
# The household's view of it on the rig (tests/openwrt/rig/dnssec.sh,
# about 35 s): a LAN device through dnsmasq gets AD, RRSIGs, SERVFAIL with
# EDE and CD as the gateway decided them, and NTP's names resolve before the
# clock is good. Here rather than in the router stage: it needs the zone
# tools this stage checks for.
RIG_ONLY=dnssec timeout 300 tests/openwrt/rig.sh "$dnssec_bin"
# The release: the x86_64 feeds built twice from this commit, here and in a
# clone elsewhere, byte for byte (scripts/release.sh --check), and the
# release workflow (actionlint). The feeds on the rig (signatures checked,
# tampering refused, upgrade N -> N+1) ran with the rig above: feed-opkg, feed-apk.
stage "release checks"
scripts/release.sh --check --arch x86_64
scripts/actionlint.sh
# Every fuzz target, 20,000 executions each from the real seeds: no crash,
# hang or oversized allocation.
stage fuzz
scripts/fuzz.sh 20000
# The benchmark's short pass: proves the script and its servers work; it
# judges no speed and writes no figures.
stage "benchmark, speed ratchet"
bench/run.sh --quick
# The soak's short pass: two minutes of the mixed load with a list refresh;
# it fails unless the counters account for every query and RSS stays bounded.
stage soak
bench/soak.sh --quick
