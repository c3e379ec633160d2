#!/bin/bash
# Holds HydraDNS's UCI parser against OpenWrt's own libuci: builds the real
# `uci` command (tests/openwrt/build-uci.sh), then for every file
# in tests/data/uci/valid and for the shipped default config checks that
# `uci show` and examples/uci-show.rs print the same thing, for every file in tests/data/uci/broken that both refuse
# it, on the same line where libuci names one, and for every file in
# tests/data/uci/lenient that libuci refuses and we read with a warning.
#   tests/openwrt/uci-compat.sh        (needs cargo and a C compiler)
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- the real uci ------------------------------------------------------------
tests/openwrt/build-uci.sh "$work/uci-cli"

cargo build -q --example uci-show
ours=target/debug/examples/uci-show

# ---- compare -----------------------------------------------------------------
failed=0
checked=0
# The shipped default config is checked along with the corpus.
mkdir -p "$work/shipped"
cp openwrt/files/hydradns.config "$work/shipped/hydradns"
for f in tests/data/uci/valid/* "$work/shipped/hydradns"; do
	name=$(basename "$f")
	want=$("$work/uci-cli" -c "$(dirname "$f")" show "$name" 2>&1) || { echo "FAIL $f: libuci refuses it: $want"; failed=1; continue; }
	got=$("$ours" "$f" 2>&1) || { echo "FAIL $f: we refuse it: $got"; failed=1; continue; }
	if [ "$want" != "$got" ]; then
		echo "FAIL $f differs (< libuci, > ours):"
		diff <(echo "$want") <(echo "$got") || true
		failed=1
	fi
	checked=$((checked + 1))
done
for f in tests/data/uci/broken/*; do
	name=$(basename "$f")
	if want=$("$work/uci-cli" -c "$(dirname "$f")" show "$name" 2>&1); then
		echo "FAIL $f: libuci accepts it, so it does not belong in broken/: $want"
		failed=1
		continue
	fi
	if got=$("$ours" "$f" 2>&1); then
		echo "FAIL $f: libuci refuses it ($want) but we accept it"
		failed=1
		continue
	fi
	# libuci: "... Parse error (...) at line N, byte M"; ours: "FILE:N: ...".
	# A statement over several lines is the exception: libuci names the last
	# line it read, we name the line where the statement (or the unterminated
	# quote) begins, which is where to look.
	uci_line=$(echo "$want" | sed -n 's/.* at line \([0-9]*\),.*/\1/p')
	our_line=$(echo "$got" | sed -n "s|^$f:\([0-9]*\):.*|\1|p")
	case "$name" in unterminated_* | multiline_*) uci_line= ;; esac
	if [ -n "$uci_line" ] && [ "$uci_line" != "$our_line" ]; then
		echo "FAIL $f: libuci says line $uci_line ($want), we say: $got"
		failed=1
	fi
	checked=$((checked + 1))
done
# Refused by libuci, read by us with a warning: names with '-', which the
# groups issue's own example uses ('school-nights').
for f in tests/data/uci/lenient/*; do
	name=$(basename "$f")
	if want=$("$work/uci-cli" -c "$(dirname "$f")" show "$name" 2>&1); then
		echo "FAIL $f: libuci accepts it, so it does not belong in lenient/: $want"
		failed=1
		continue
	fi
	if ! got=$("$ours" --warnings "$f" 2>&1) || ! grep -q "uci tools (uci, LuCI) refuse" <<<"$got"; then
		echo "FAIL $f: we should read it with a warning: $got"
		failed=1
	fi
	checked=$((checked + 1))
done
[ "$failed" = 0 ] || exit 1
echo "uci compatibility: $checked files read the same as libuci does"
