# shellcheck shell=bash
# Shared by the benchmark scripts; sourced, not run.

# need TOOL:PACKAGE…: installs the Debian packages whose tools are missing.
need() {
    local missing=() tool
    for tool in "$@"; do
        command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    local sudo=
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Sets HYDRADNS_BIN, unless given, to the static musl release binary that
# routers run (its allocator, not glibc's, sets the memory figures).
release_binary() {
    [ -z "${HYDRADNS_BIN:-}" ] || return 0
    scripts/build-release.sh x86_64-unknown-linux-musl >/dev/null
    local version
    version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
    HYDRADNS_BIN=dist/hydradns-$version-x86_64-unknown-linux-musl
}
