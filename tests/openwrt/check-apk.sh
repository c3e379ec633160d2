#!/usr/bin/env bash
# Checks an .apk the way apk-tools v3 reads it (`apk adbdump`, `apk
# extract`): the package fields, the scripts OpenWrt's default_postinst and
# default_prerm need, the files with their modes and owners, the
# lib/apk/packages files, and a static binary for the expected machine.
#   APK=/path/to/apk tests/openwrt/check-apk.sh PACKAGE.apk ARCH MACHINE
set -euo pipefail
pkg=$1 arch=$2 machine=$3
apk=${APK:?APK must name apk-tools v3}
apk_lib=$(cd "$(dirname "$apk")/../lib" 2> /dev/null && pwd) || apk_lib=""   # none beside a static apk
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL ($pkg): $*" >&2; exit 1; }
run_apk() { LD_LIBRARY_PATH=$apk_lib "$apk" "$@"; }

run_apk adbdump "$pkg" > "$work/dump" 2>&1 || fail "apk cannot read it: $(cat "$work/dump")"
info() { sed -n "/^info:/,/^[a-z]/s/^  $1: //p" "$work/dump" | head -n 1; }
[ "$(info name)" = hydradns ] || fail "name $(info name)"
version=$(awk -F'"' '/^version =/ {print $2; exit}' "$(dirname "$0")/../../Cargo.toml")
# apk orders versions X.Y.Z-rN; anything else it refuses or misorders.
info version | grep -qE "^$version-r[0-9]+\$" || fail "version $(info version)"
[ "$(info arch)" = "$arch" ] || fail "arch $(info arch)"
for f in description license maintainer url origin; do
    [ -n "$(info "$f")" ] || fail "no $f"
done
# Conflicts only (apk's !name): a static binary needs nothing.
deps=$(sed -n '/^  depends:/,/^  [a-z]/p' "$work/dump" | sed -n "s/^    - '\{0,1\}\([^']*\)'\{0,1\}$/\1/p" | sort | tr '\n' ' ')
[ "$deps" = "!adguardhome !https-dns-proxy " ] || fail "depends on '$deps', not on !adguardhome !https-dns-proxy alone"
for s in post-install post-upgrade pre-deinstall; do
    grep -q "^  $s: |" "$work/dump" || fail "no $s script"
done
sed -n '/^  post-install: |/,/^  [a-z-]*: |/p' "$work/dump" | grep -q 'add_group_and_user' || fail "post-install creates no user"
sed -n '/^  post-upgrade: |/,/^  [a-z-]*: |/p' "$work/dump" | grep -q 'PKG_UPGRADE=1' || fail "post-upgrade is not an upgrade"
for s in post-install post-upgrade; do
    sed -n "/^  $s: |/,/^  [a-z-]*: |/p" "$work/dump" | grep -q 'killall -HUP rpcd' || fail "$s has rpcd not read the API's plugin and ACL"
done
grep -q '^ *user: ' "$work/dump" || fail "no owners recorded"
grep '^ *user: \|^ *group: ' "$work/dump" | grep -qv ': root$' && fail "files not owned by root"

mkdir "$work/x"
run_apk extract --allow-untrusted --destination "$work/x" "$pkg" > /dev/null 2>&1 || fail "apk extract"
d="$work/x"
mode() { stat -c %a "$1"; }
[ "$(mode "$d/usr/sbin/hydradns")" = 755 ] || fail "binary mode"
[ "$(mode "$d/etc/init.d/hydradns")" = 755 ] || fail "init script mode"
[ "$(mode "$d/etc/hotplug.d/ntp/25-hydradns")" = 755 ] || fail "ntp hotplug script mode"
[ "$(mode "$d/etc/config/hydradns")" = 644 ] || fail "config mode"
[ -d "$d/etc/hydradns/lists" ] || fail "/etc/hydradns/lists"
[ "$(mode "$d/usr/libexec/rpcd/hydradns")" = 755 ] || fail "rpcd plugin mode"
[ "$(mode "$d/usr/share/rpcd/acl.d/hydradns-api.json")" = 644 ] || fail "API ACL mode"
m="$d/lib/apk/packages"
[ "$(cat "$m/hydradns.conffiles")" = /etc/config/hydradns ] || fail ".conffiles"
[ "$(cat "$m/hydradns.conffiles_static")" = "/etc/config/hydradns $(sha256sum < "$d/etc/config/hydradns" | cut -d' ' -f1)" ] ||
    fail ".conffiles_static"
[ "$(cat "$m/hydradns.rusers")" = hydradns:hydradns ] || fail ".rusers"
(cd "$d" && find . ! -type d | sed 's|^\.||' | LC_ALL=C sort) | diff - "$m/hydradns.list" > /dev/null ||
    fail ".list does not name exactly the package's files"
readelf -l "$d/usr/sbin/hydradns" | grep -q INTERP && fail "binary is dynamically linked"
readelf -h "$d/usr/sbin/hydradns" | grep -q "Machine:.*$machine" || fail "binary is not for $machine"
echo "$pkg: ok"
