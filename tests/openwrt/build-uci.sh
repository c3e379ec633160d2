#!/bin/bash
# Builds OpenWrt's `uci` command into $1 from the libuci and libubox sources
# that the libuci-sys crate ships (fetched from crates.io; nothing is vendored
# here). Needs cargo, python3 and a C compiler; takes a few seconds.
#   tests/openwrt/build-uci.sh /tmp/uci
set -euo pipefail
out=${1:?usage: build-uci.sh OUTPUT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/fetch/src"
cat > "$work/fetch/Cargo.toml" <<'TOML'
[package]
name = "uci-fetch"
version = "0.0.0"
edition = "2021"
[dependencies]
libuci-sys = "=1.0.5"
TOML
echo 'fn main() {}' > "$work/fetch/src/main.rs"
src=$(cd "$work/fetch" && cargo metadata --format-version 1 2>/dev/null |
	python3 -c 'import json,sys,os; m=json.load(sys.stdin); print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"]=="libuci-sys"))')
[ -f "$src/uci/cli.c" ] || { echo "libuci sources not found in $src" >&2; exit 1; }
mkdir -p "$work/inc"
cp -r "$src/uci" "$work/uci"
ln -s "$src/libubox" "$work/inc/libubox"
: > "$work/uci/uci_config.h" # no debug options
(cd "$work/uci" && ${CC:-cc} -Os -std=gnu99 -w -DUCI_PREFIX='""' -I. -I"$work/inc" -o "$out" \
	cli.c libuci.c file.c util.c delta.c parse.c blob.c "$src/libubox/blob.c" "$src/libubox/blobmsg.c" -ldl)
