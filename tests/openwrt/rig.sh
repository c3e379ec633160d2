#!/usr/bin/env bash
# The package on the real OpenWrt userland of ../shared/openwrt-userland
# (procd, ubusd, logd, uci, opkg, apk v3, OpenWrt's rc.common and dnsmasq
# init script), booted in namespaces: install with opkg and with apk,
# upgrade, removal, the three dnsmasq modes, replace mode on port 53 with and
# without ujail, reboots. Each scenario boots a factory-fresh image (the
# reboot one boots the same image three times) and runs a script of
# tests/openwrt/rig/ inside. Needs root.
#   tests/openwrt/rig.sh BINARY          BINARY: the static x86_64 build
#   RIG_ONLY="opkg apk" tests/openwrt/rig.sh BINARY   runs only those
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
rig=../shared/openwrt-userland
out=${OWRT_OUT:-/tmp/owrt}
[ "$(id -u)" = 0 ] || { echo "tests/openwrt/rig.sh: needs root (namespaces)" >&2; exit 1; }

"$rig/build.sh" "$rig/src" "$out" > "$out.build.log" 2>&1 || { cat "$out.build.log"; exit 1; }
apk="$out/stage/usr/bin/apk"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mnt="$work/mnt"
mkdir -p "$mnt/pkgs"
cp tests/openwrt/rig/*.sh "$mnt/"
# Release 1 from BINARY; release 2 from a binary that differs (bytes after
# the ELF's end, which the loader ignores), as an upgrade's would.
cp "$bin" "$work/hydradns-r2"
printf 'release 2\n' >> "$work/hydradns-r2"
RELEASE=1 openwrt/build-ipk.sh "$bin" x86_64 "$mnt/pkgs" > /dev/null
RELEASE=2 openwrt/build-ipk.sh "$work/hydradns-r2" x86_64 "$mnt/pkgs" > /dev/null
RELEASE=1 APK=$apk openwrt/build-apk.sh "$bin" x86_64 "$mnt/pkgs" > /dev/null
RELEASE=2 APK=$apk openwrt/build-apk.sh "$work/hydradns-r2" x86_64 "$mnt/pkgs" > /dev/null
# name:run.sh options:script[,script...] (one boot per script, in order).
scenarios=(
	"opkg::opkg.sh"
	"replace::replace.sh"
	"replace-ujail:--ujail:replace-ujail.sh"
	"upgrade-opkg::upgrade-opkg.sh"
	"legacy::legacy.sh"
	"apk::apk.sh"
	"reboot::reboot-1.sh,reboot-2.sh,reboot-3.sh"
)
failed=0
printf '\n| scenario | result | seconds |\n|---|---|---|\n' > "$work/table"
for s in "${scenarios[@]}"; do
	IFS=: read -r name opts scripts <<<"$s"
	if [ -n "${RIG_ONLY:-}" ] && [[ " $RIG_ONLY " != *" $name "* ]]; then
		continue
	fi
	started=$SECONDS
	result=pass
	fresh=--fresh
	IFS=, read -ra boots <<<"$scripts"
	for script in "${boots[@]}"; do
		# shellcheck disable=SC2086  # opts is zero or one word
		if ! "$rig/run.sh" --out "$out" $fresh $opts --timeout 300 --mount "$mnt" -- "/rig/mnt/$script" > "$work/$name.log" 2>&1 ||
			! grep -q "^PASS ${script%.sh}\$" "$work/$name.log"; then
			result=FAIL
			echo "== $name: $script failed" >&2
			cat "$work/$name.log" >&2
			break
		fi
		fresh=
	done
	[ "$result" = pass ] || failed=1
	printf '| %s | %s | %d |\n' "$name" "$result" $((SECONDS - started)) >> "$work/table"
done
cat "$work/table"
exit $failed
