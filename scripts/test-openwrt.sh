#!/usr/bin/env bash
# The router side of the test suite: builds the static musl binaries for
# aarch64, armv7 and x86_64 (scripts/build-release.sh), runs the integration
# tests against the ARM ones under qemu-user, packages all three as .ipk and
# .apk and checks the packages, holds the UCI parser against libuci, lints
# the shell scripts, and runs the x86_64 packages on the real OpenWrt
# userland of tests/openwrt/userland (tests/openwrt/rig.sh; needs root),
# and luci-app-hydradns on its web stack (tests/openwrt/luci.sh).
# Installs what it needs (Debian: qemu-user shellcheck, and what the rig's
# build.sh installs; PyPI: Zig, cargo-zigbuild; rustup targets).
# scripts/test.sh calls it.
#   scripts/test-openwrt.sh
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for tool in qemu-aarch64:qemu-user qemu-arm:qemu-user shellcheck:shellcheck; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    # shellcheck disable=SC2046  # one word per package
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi

step() { printf '\n== %s\n' "$*"; }

step "shell scripts (shellcheck)"
shellcheck -x scripts/*.sh bench/*.sh tests/openwrt/*.sh tests/openwrt/rig/*.sh openwrt/*.sh openwrt/files/hydradns.init .ci/run \
    openwrt/luci-app-hydradns/root/usr/libexec/rpcd/luci.hydradns

step "static router binaries"
scripts/build-release.sh
version=$(awk -F'"' '/^version =/ {print $2; exit}' Cargo.toml)

# The integration tests that exercise the binary end to end, run against
# the ARM builds under emulation: DNS over UDP and TCP, blocking, cache,
# upstream failover, config errors and reloads, lists and downloads, faults,
# DNS over TLS (ring's ARM code included).
arm_tests=(--test transport --test conformance --test blocking --test cache --test upstream --test lifecycle --test lists --test lists_download --test protection --test faults --test encrypted)
for pair in aarch64-unknown-linux-musl:qemu-aarch64 armv7-unknown-linux-musleabihf:qemu-arm; do
    target=${pair%%:*} runner=${pair#*:}
    step "integration tests against the $target binary under $runner"
    HYDRADNS_TEST_BIN="$PWD/dist/hydradns-$version-$target" HYDRADNS_TEST_RUNNER=$runner \
        cargo test --locked -q "${arm_tests[@]}"
done

# The OpenWrt userland: its apk-tools v3 makes and reads the .apk packages.
step "OpenWrt userland (tests/openwrt/userland)"
rig=tests/openwrt/userland
owrt=${OWRT_OUT:-/tmp/owrt}
# It installs the Debian packages it lacks: with stale package lists, fetch them and try again.
if ! "$rig/build.sh" vendor/openwrt-src "$owrt" > /tmp/owrt-build.log 2>&1; then
    apt-get update -qq
    "$rig/build.sh" vendor/openwrt-src "$owrt" > /tmp/owrt-build.log 2>&1 || { cat /tmp/owrt-build.log; exit 1; }
fi
export APK="$owrt/stage/usr/bin/apk" OWRT_OUT="$owrt"

step "packages"
for spec in aarch64-unknown-linux-musl:aarch64_generic:AArch64 \
    armv7-unknown-linux-musleabihf:arm_cortex-a7_neon-vfpv4:ARM \
    x86_64-unknown-linux-musl:x86_64:X86-64; do
    IFS=: read -r target arch machine <<<"$spec"
    ipk=$(openwrt/build-ipk.sh "dist/hydradns-$version-$target" "$arch" dist)
    tests/openwrt/check-ipk.sh "$ipk" "$arch" "$machine"
    apk=$(openwrt/build-apk.sh "dist/hydradns-$version-$target" "$arch" dist)
    tests/openwrt/check-apk.sh "$apk" "$arch" "$machine"
    printf '%s: %d bytes, %s: %d bytes\n' "${ipk##*/}" "$(stat -c %s "$ipk")" "${apk##*/}" "$(stat -c %s "$apk")"
done

luci=$(openwrt/build-luci.sh dist)
for pkg in $luci; do printf '%s: %d bytes\n' "${pkg##*/}" "$(stat -c %s "$pkg")"; done

step "UCI parser against libuci"
tests/openwrt/uci-compat.sh

step "the x86_64 packages on the real OpenWrt userland"
tests/openwrt/rig.sh "dist/hydradns-$version-x86_64-unknown-linux-musl"

step "luci-app-hydradns on the real web stack (rpcd, uhttpd, LuCI, Chromium)"
tests/openwrt/luci.sh "dist/hydradns-$version-x86_64-unknown-linux-musl"
