#!/usr/bin/env bash
# The package on the real OpenWrt userland of tests/openwrt/userland
# (procd, ubusd, logd, uci, opkg, apk v3, OpenWrt's rc.common and dnsmasq
# init script), booted in namespaces: install with opkg and with apk,
# upgrade (from this version and from 0.1.0-2, which committed its dnsmasq
# settings), removal, the three dnsmasq modes, replace mode on port 53 with
# and without ujail, reboots; and on the rig's network (--net: netifd, fw4,
# DHCP, a LAN client and a WAN): force DNS, fail-open, power cuts, and the
# signed feeds of scripts/release.sh (install, tampering, upgrade). Each
# scenario boots a factory-fresh image (the reboot ones boot the same image
# again) and runs a script of tests/openwrt/rig/ inside. Needs root.
#   tests/openwrt/rig.sh BINARY          BINARY: the static x86_64 build
#   RIG_ONLY="opkg apk" tests/openwrt/rig.sh BINARY   runs only those
#   RIG_ONLY=dnssec tests/openwrt/rig.sh BINARY   issue 61's (only when named)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
# The last commit of 0.1.0-2's packaging (upgrade-old*.sh install it first).
OLD_RELEASE=0a713ac
rig=tests/openwrt/userland
out=${OWRT_OUT:-/tmp/owrt}
# The image with the network stack, for the --net scenarios.
net_out=${OWRT_NET_OUT:-/tmp/owrt-net}
[ "$(id -u)" = 0 ] || { echo "tests/openwrt/rig.sh: needs root (namespaces)" >&2; exit 1; }
# One rig at a time on this machine: the images, the namespaces and their
# names are shared by every clone, so a second run waits for the first.
exec 9> /tmp/hydradns-rig.lock
flock 9

"$rig/build.sh" vendor/openwrt-src "$out" > "$out.build.log" 2>&1 || { cat "$out.build.log"; exit 1; }
WITH_NET=1 "$rig/build.sh" vendor/openwrt-src "$net_out" > "$net_out.build.log" 2>&1 || { cat "$net_out.build.log"; exit 1; }
apk="$out/stage/usr/bin/apk"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mnt="$work/mnt"
mkdir -p "$mnt/pkgs"
cp tests/openwrt/rig/*.sh "$mnt/"
# LuCI's rpcd plugin, which opkg.sh calls as rpcd would; net.sh's LAN
# flooder (static: it runs on the rig's files).
cp openwrt/luci-app-hydradns/root/usr/libexec/rpcd/luci.hydradns "$mnt/"
gcc -O2 -Wall -static -o "$mnt/flood" tests/openwrt/rig/flood.c
# Release 3 from BINARY; release 4 from a binary that differs (bytes after
# the ELF's end, which the loader ignores), as an upgrade's would.
cp "$bin" "$work/hydradns-r4"
printf 'release 4\n' >> "$work/hydradns-r4"
RELEASE=3 openwrt/build-ipk.sh "$bin" x86_64 "$mnt/pkgs" > /dev/null
RELEASE=4 openwrt/build-ipk.sh "$work/hydradns-r4" x86_64 "$mnt/pkgs" > /dev/null
RELEASE=3 APK=$apk openwrt/build-apk.sh "$bin" x86_64 "$mnt/pkgs" > /dev/null
RELEASE=4 APK=$apk openwrt/build-apk.sh "$work/hydradns-r4" x86_64 "$mnt/pkgs" > /dev/null
# 0.1.0-2 as it shipped (its packaging and init script, which committed its
# dnsmasq settings to /etc/config/dhcp), around this binary.
mkdir -p "$work/old"
git archive "$OLD_RELEASE" openwrt Cargo.toml | tar -x -C "$work/old"
mkdir -p "$mnt/pkgs/old"
RELEASE=2 "$work/old/openwrt/build-ipk.sh" "$bin" x86_64 "$mnt/pkgs/old" > /dev/null
RELEASE=2 APK=$apk "$work/old/openwrt/build-apk.sh" "$bin" x86_64 "$mnt/pkgs/old" > /dev/null
# The signed feeds of releases 3 and 4 (feed.sh), as scripts/release.sh
# makes them, from BINARY and the release 4 binary, with one key pair.
if [ -z "${RIG_ONLY:-}" ] || [[ " $RIG_ONLY " == *" feed-"* ]]; then
	version=$(awk -F'"' '/^version =/ {print $2; exit}' Cargo.toml)
	scripts/release.sh --make-keys "$work/feedkeys" > "$work/feedkeys.log" 2>&1 || { cat "$work/feedkeys.log" >&2; exit 1; }
	for r in 3 4; do
		mkdir -p "$work/bin$r"
		release_bin=$bin
		[ $r = 3 ] || release_bin=$work/hydradns-r4
		cp "$release_bin" "$work/bin$r/hydradns-$version-x86_64-unknown-linux-musl"
		scripts/release.sh --arch x86_64 --release $r --key-dir "$work/feedkeys" --prebuilt "$work/bin$r" --allow-dirty "$mnt/feed$r" > "$work/feed$r.log" 2>&1 ||
			{ cat "$work/feed$r.log" >&2; exit 1; }
	done
	echo "$version" > "$mnt/version"
	cp "$bin" "$mnt/hydradns-3"
fi
# Issue 61's scenario (dnssec, asked for by name only: RIG_ONLY=dnssec):
# the signed zones of tests/dnssec/zones.sh (unbound, ldnsutils and
# bind9-utils on this machine) and this machine's Unbound, with the
# libraries the image lacks, for the rig's WAN namespace.
if [[ " ${RIG_ONLY:-} " == *" dnssec "* ]]; then
	tests/dnssec/zones.sh "$mnt/dnssec" > "$work/zones.log" 2>&1 || { cat "$work/zones.log" >&2; exit 1; }
	mkdir -p "$mnt/unbound/lib"
	cp "$(command -v unbound)" "$mnt/unbound/"
	ldd "$(command -v unbound)" | awk '/=> \// { print $3 }' | while read -r lib; do
		name=$(basename "$lib")
		[ -n "$(find "$net_out/image/lib" "$net_out/image/usr/lib" -name "$name" -print -quit 2> /dev/null)" ] ||
			cp -L "$lib" "$mnt/unbound/lib/"
	done
fi
# name:run.sh options:script[,script...] (one boot per script, in order;
# a script ending in +cut has the power cut when it prints CUT: the host
# kills the rig's PID 1, as a pulled plug would, and the next boot follows;
# one ending in +sysupgrade is followed by a sysupgrade to the factory image,
# which has no HydraDNS: /etc/config kept, as sysupgrade keeps it).
scenarios=(
	"opkg::opkg.sh"
	"replace::replace.sh"
	"replace-ujail:--ujail:replace-ujail.sh"
	"upgrade-opkg::upgrade-opkg.sh"
	"legacy::legacy.sh"
	"apk::apk.sh"
	"reboot::reboot-1.sh,reboot-2.sh,reboot-3.sh"
	"upgrade-old-opkg::upgrade-old.sh"
	"upgrade-old-apk::upgrade-old-apk.sh"
	"net-opkg:--net:net.sh"
	"net-apk:--net:net-apk.sh"
	"powercut:--net:powercut-1.sh+cut,powercut-2.sh+cut,powercut-3.sh+cut,powercut-4.sh"
	"sysupgrade:--net:sysupgrade-1.sh+sysupgrade,sysupgrade-2.sh"
	"feed-opkg:--net:feed-opkg.sh"
	"feed-apk:--net:feed-apk.sh"
	"dnssec:--net:dnssec.sh"
)
# Run only when RIG_ONLY names them (not in the default run's time).
opt_in=" dnssec "
failed=0
printf '\n| scenario | result | seconds |\n|---|---|---|\n' > "$work/table"
for s in "${scenarios[@]}"; do
	IFS=: read -r name opts scripts <<<"$s"
	if [ -n "${RIG_ONLY:-}" ] && [[ " $RIG_ONLY " != *" $name "* ]]; then
		continue
	fi
	[ -n "${RIG_ONLY:-}" ] || [[ "$opt_in" != *" $name "* ]] || continue
	started=$SECONDS
	result=pass
	fresh=--fresh
	IFS=, read -ra boots <<<"$scripts"
	image=$out
	[[ " $opts " != *" --net "* ]] || image=$net_out
	for script in "${boots[@]}"; do
		ok=1
		upgrade=
		if [[ "$script" == *+sysupgrade ]]; then
			script=${script%+sysupgrade}
			upgrade=1
		fi
		if [[ "$script" == *+cut ]]; then
			script=${script%+cut}
			# shellcheck disable=SC2086  # opts is zero or one word
			"$rig/run.sh" --out "$image" $fresh $opts --timeout 300 --mount "$mnt" -- "/rig/mnt/$script" > "$work/$name.log" 2>&1 &
			runner=$!
			for _ in $(seq 600); do
				grep -q '^CUT$' "$work/$name.log" 2>/dev/null && break
				kill -0 "$runner" 2>/dev/null || break
				sleep 0.1
			done
			if grep -q '^CUT$' "$work/$name.log"; then
				kill -9 "$(cat "$image/rig.pid")"
			else
				ok=
			fi
			wait "$runner" || true
			grep -q "^PASS ${script%.sh}\$" "$work/$name.log" || ok=
		else
			# shellcheck disable=SC2086  # opts is zero or one word
			"$rig/run.sh" --out "$image" $fresh $opts --timeout 300 --mount "$mnt" -- "/rig/mnt/$script" > "$work/$name.log" 2>&1 || ok=
			grep -q "^PASS ${script%.sh}\$" "$work/$name.log" || ok=
		fi
		if [ -z "$ok" ]; then
			result=FAIL
			echo "== $name: $script failed" >&2
			cat "$work/$name.log" >&2
			break
		fi
		fresh=
		if [ -n "$upgrade" ]; then
			# The new image boots once (its first boot), then with the old /etc/config.
			rm -rf "$work/config" && cp -a "$image/root/etc/config" "$work/config"
			# shellcheck disable=SC2086  # opts is zero or one word
			"$rig/run.sh" --out "$image" --fresh $opts --timeout 120 -- true > "$work/$name.upgrade.log" 2>&1 ||
				{ result=FAIL; cat "$work/$name.upgrade.log" >&2; break; }
			cp -a "$work/config/." "$image/root/etc/config/"
		fi
	done
	[ "$result" = pass ] || failed=1
	# What a scenario measured (net.sh: how long the LAN went without DNS,
	# the flood it sent, what a reinstall and an upgrade left unanswered).
	grep -E '^(answered \(unfiltered\)|filtered again) after [0-9]+ s$|^flood: |^stream: |^  not as expected:' "$work/$name.log" | sed "s/^/$name: /" >> "$work/measured" || true
	printf '| %s | %s | %d |\n' "$name" "$result" $((SECONDS - started)) >> "$work/table"
done
cat "$work/table"
[ ! -s "$work/measured" ] || { echo; cat "$work/measured"; }
exit $failed
