#!/usr/bin/env bash
# luci-app-hydradns on OpenWrt's real web stack (tests/openwrt/userland
# built WITH_LUCI=1: rpcd, uhttpd, ucode, LuCI): for opkg and for apk, boots
# a fresh image serving LuCI on the host's 127.0.0.1:PORT, installs
# hydradns and luci-app-hydradns there (tests/openwrt/rig/luci.sh), then
# drives it from here: the public API object `hydradns` with an API-only
# login (tests/openwrt/api-check.py, opkg only), LuCI's rpcd plugin through
# /ubus with logged-in sessions (and calls outside the ACL refused), and
# the pages in headless Chromium (tests/openwrt/luci-check.py: live
# numbers, pause, allow, a config the daemon refuses, force DNS's
# settings, the warning while DNS is failed open, issue 48's six broken
# behaviours). Screenshots go to ARTIFACTS (default target/artifacts).
# Mode tablet boots the image built WITH_LUCI=1 WITH_NET=1 with run.sh --net
# (netifd, fw4, dnsmasq's DHCP to LAN devices, a WAN resolver) and runs
# tests/openwrt/rig/luci-tablet.sh there: the owner sets up the kids'
# tablet in the browser (schedule, group, service, Devices' "Add to
# group…") and DNS is asked from the tablet's and a laptop's namespaces
# inside and after the schedule's window (luci-check.py --tablet).
# Needs root; installs Debian's chromium if missing.
#   tests/openwrt/luci.sh BINARY           BINARY: the static x86_64 build
#   LUCI_MODES="opkg apk tablet" (the default): which runs
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
rig=tests/openwrt/userland
out=${OWRT_WEB_OUT:-/tmp/owrt-web}
artifacts=${ARTIFACTS:-$PWD/target/artifacts}
[ "$(id -u)" = 0 ] || { echo "tests/openwrt/luci.sh: needs root (namespaces)" >&2; exit 1; }
command -v chromium > /dev/null || {
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null
}
modes=${LUCI_MODES:-opkg apk tablet}
# The web stack on the rig's network, for the tablet.
net_out=${OWRT_WEBNET_OUT:-/tmp/owrt-webnet}
# One rig at a time on this machine (tests/openwrt/rig.sh takes it too):
# the images and their roots are shared by every clone.
exec 9> /tmp/hydradns-rig.lock
flock 9
WITH_LUCI=1 "$rig/build.sh" vendor/openwrt-src "$out" > "$out.build.log" 2>&1 || { cat "$out.build.log"; exit 1; }
if [[ " $modes " == *" tablet "* ]]; then
	WITH_LUCI=1 WITH_NET=1 "$rig/build.sh" vendor/openwrt-src "$net_out" > "$net_out.build.log" 2>&1 ||
		{ cat "$net_out.build.log"; exit 1; }
fi
export APK="$out/stage/usr/bin/apk"
mkdir -p "$artifacts"

work=$(mktemp -d)
runner=
image=$out
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
	[ -z "$runner" ] || { touch "$image/root/rig/stop" 2> /dev/null; wait "$runner" 2> /dev/null || true; }
	rm -rf "$work"
}
trap cleanup EXIT
mnt="$work/mnt"
mkdir -p "$mnt/pkgs"
cp tests/openwrt/rig/lib.sh tests/openwrt/rig/luci.sh tests/openwrt/rig/luci-tablet.sh "$mnt/"
RELEASE=3 openwrt/build-ipk.sh "$bin" x86_64 "$mnt/pkgs" > /dev/null
RELEASE=3 openwrt/build-apk.sh "$bin" x86_64 "$mnt/pkgs" > /dev/null
openwrt/build-luci.sh "$mnt/pkgs" > /dev/null
# luci-base, registered: the rig has its files but no package of that name.
# shellcheck source=openwrt/package.sh
. openwrt/package.sh
# shellcheck source=openwrt/apk-tool.sh
. openwrt/apk-tool.sh
empty="$work/empty"
mkdir -p "$empty/c" "$empty/d"
printf 'Package: luci-base\nVersion: 0-rig\nArchitecture: all\nInstalled-Size: 0\nDescription: the rig'"'"'s luci-base\n' > "$empty/c/control"
pack_ipk "$empty/c" "$empty/d" "$mnt/pkgs/luci-base_0-rig_all.ipk"
mkpkg --info name:luci-base --info version:0-r0 --info arch:noarch --info "description:the rig's luci-base" \
	--files "$empty/d" --output "$mnt/pkgs/luci-base-0-r0_noarch.apk" > /dev/null

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
failed=0
printf '\n| scenario | result | seconds |\n|---|---|---|\n' > "$work/table"
# LUCI_MODES=opkg: one of them, while iterating.
for mode in $modes; do
	started=$SECONDS
	result=pass
	image=$out opts='' script="luci.sh $mode" check=()
	# Issue 58's pages with data holding markup: once, with opkg (apk's
	# run would see the same pages).
	[ "$mode" != opkg ] || check=(--hostile)
	if [ "$mode" = tablet ]; then
		image=$net_out opts=--net script=luci-tablet.sh check=(--tablet --out "$net_out")
	fi
	# Left by the run before: this run's image is copied in only once it starts.
	rm -f "$image/root/rig/ready" "$image/root/rig/stop"
	# shellcheck disable=SC2086  # opts is zero or one word, script one or two
	"$rig/run.sh" --out "$image" --fresh $opts --luci-port "$port" --timeout 400 --mount "$mnt" -- /rig/mnt/$script \
		> "$work/$mode.log" 2>&1 &
	runner=$!
	ready=0
	for _ in $(seq 1 240); do
		[ -f "$image/root/rig/ready" ] && { ready=1; break; }
		kill -0 "$runner" 2> /dev/null || break
		sleep 0.5
	done
	verdict=fail
	# The public API object first (once, with opkg: apk's package has the
	# same files), as Home Assistant calls it, before the pages change things.
	if [ $ready = 1 ] && { [ "$mode" != opkg ] || python3 tests/openwrt/api-check.py --port "$port" --rig "$image/root/rig"; } \
		> "$work/$mode.check" 2>&1 &&
		python3 tests/openwrt/luci-check.py --port "$port" --prefix "$artifacts/luci-$mode" --rig "$image/root/rig" \
			"${check[@]}" >> "$work/$mode.check" 2>&1; then
		verdict=pass
	fi
	echo "$verdict" > "$image/root/rig/stop" 2> /dev/null || true
	cp "$work/$mode.check" "$artifacts/luci-$mode.log" 2> /dev/null || true
	wait "$runner" || true
	runner=
	if [ $verdict != pass ] || ! grep -q "^PASS $(basename "${script% *}" .sh)\$" "$work/$mode.log"; then
		result=FAIL
		echo "== luci $mode failed" >&2
		cat "$work/$mode.log" "$work/$mode.check" >&2 2> /dev/null || true
	fi
	[ "$result" = pass ] || failed=1
	printf '| luci-%s | %s | %d |\n' "$mode" "$result" $((SECONDS - started)) >> "$work/table"
done
cat "$work/table"
ls "$artifacts"/luci-*.png 2> /dev/null || true
exit $failed
