#!/usr/bin/env bash
# Checks an .ipk the way opkg will read it: an outer gzip'd GNU tar holding
# debian-binary, control.tar.gz and data.tar.gz (in that order), every
# archive in GNU format (opkg installs nothing from pax tars, silently), files
# owned by root, the control fields, the files and their modes, and a static
# binary for the expected machine.
#   tests/openwrt/check-ipk.sh PACKAGE.ipk ARCH MACHINE   (MACHINE as readelf says it: AArch64, ARM, X86-64)
set -euo pipefail
ipk=$1 arch=$2 machine=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL ($ipk): $*" >&2; exit 1; }

# Every header block of a GNU tar says "ustar  \0"; POSIX/pax ones say "ustar\000".
gnu_only() {
    python3 - "$1" <<'PY' || fail "$1 is not a GNU-format tar"
import gzip, sys
data = gzip.open(sys.argv[1]).read()
pos, seen = 0, 0
while pos + 512 <= len(data):
    block = data[pos:pos + 512]
    if block == b"\0" * 512:
        break
    if block[257:265] != b"ustar  \0":
        sys.exit(1)
    if block[156:157] in (b"x", b"g"):
        sys.exit(1)  # pax extended header
    size = int(block[124:136].strip(b"\0 ") or b"0", 8)
    pos += 512 + (size + 511) // 512 * 512
    seen += 1
sys.exit(0 if seen else 1)
PY
}

gnu_only "$ipk"
[ "$(tar -tzf "$ipk" | tr '\n' ' ')" = "./debian-binary ./control.tar.gz ./data.tar.gz " ] || fail "outer members: $(tar -tzf "$ipk")"
tar -xzf "$ipk" -C "$work"
[ "$(cat "$work/debian-binary")" = "2.0" ] || fail "debian-binary"
for t in control data; do
    gnu_only "$work/$t.tar.gz"
    tar -tzvf "$work/$t.tar.gz" | awk '{ if ($2 != "0/0") exit 1 }' || fail "$t.tar.gz: files not owned by root"
done

mkdir "$work/control" "$work/data"
tar -xzf "$work/control.tar.gz" -C "$work/control"
tar -xzf "$work/data.tar.gz" -C "$work/data"
control="$work/control/control"
field() { sed -n "s/^$1: //p" "$control"; }
[ "$(field Package)" = hydradns ] || fail "Package"
version=$(awk -F'"' '/^version =/ {print $2; exit}' "$(dirname "$0")/../../Cargo.toml")
field Version | grep -qE "^$version-[0-9]+\$" || fail "Version $(field Version)"
[ "$(field Architecture)" = "$arch" ] || fail "Architecture $(field Architecture)"
[ "$(field Depends)" = "libc, ca-bundle" ] || fail "Depends"
[ "$(field Conflicts)" = "https-dns-proxy, adguardhome" ] || fail "Conflicts"
# No fixed ids: OpenWrt picks free ones (fixed 453 was dnsmasq's).
[ "$(field Require-User)" = "hydradns:hydradns" ] || fail "Require-User $(field Require-User)"
for f in Installed-Size Description License Maintainer Section; do
    [ -n "$(field "$f")" ] || fail "no $f field"
done
[ "$(field Installed-Size)" -gt 1000000 ] || fail "Installed-Size"
[ "$(cat "$work/control/conffiles")" = "/etc/config/hydradns" ] || fail "conffiles"
for s in postinst prerm postinst-pkg; do
    [ -x "$work/control/$s" ] || fail "$s not executable"
done

d="$work/data"
mode() { stat -c %a "$1"; }
[ "$(mode "$d/usr/sbin/hydradns")" = 755 ] || fail "binary mode"
[ "$(mode "$d/etc/init.d/hydradns")" = 755 ] || fail "init script mode"
[ "$(mode "$d/etc/hotplug.d/ntp/25-hydradns")" = 755 ] || fail "ntp hotplug script mode"
[ "$(mode "$d/etc/config/hydradns")" = 644 ] || fail "config mode"
[ -d "$d/etc/hydradns/lists" ] || fail "/etc/hydradns/lists"
[ "$(mode "$d/usr/libexec/rpcd/hydradns")" = 755 ] || fail "rpcd plugin mode"
[ "$(mode "$d/usr/share/rpcd/acl.d/hydradns-api.json")" = 644 ] || fail "API ACL mode"
grep -q 'killall -HUP rpcd' "$work/control/postinst-pkg" || fail "postinst-pkg has rpcd not read the API's plugin and ACL"
readelf -l "$d/usr/sbin/hydradns" | grep -q INTERP && fail "binary is dynamically linked"
readelf -h "$d/usr/sbin/hydradns" | grep -q "Machine:.*$machine" || fail "binary is not for $machine"
echo "$ipk: ok"
