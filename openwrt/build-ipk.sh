#!/usr/bin/env bash
# Turns a prebuilt static hydradns binary into an .ipk for opkg (OpenWrt
# 23.05/24.10) without the SDK.
#   openwrt/build-ipk.sh BINARY ARCH [OUTDIR]
#   ARCH is OpenWrt's name: aarch64_generic, aarch64_cortex-a53,
#   arm_cortex-a7_neon-vfpv4, x86_64, …
# Archives are GNU tar (opkg silently installs nothing from a pax tar and
# still reports success), files owned by root, timestamps fixed for
# reproducible packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
arch=$2
out=${3:-dist}
version=$(awk -F'"' '/^version =/ {print $2; exit}' "$here/../Cargo.toml")
release=1
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || echo 0)}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
data="$stage/data"
ctrl="$stage/control"
install -d "$data/usr/sbin" "$data/etc/init.d" "$data/etc/config" "$data/etc/capabilities" "$data/etc/hydradns/lists" "$ctrl"
install -m 0755 "$bin" "$data/usr/sbin/hydradns"
install -m 0755 "$here/files/hydradns.init" "$data/etc/init.d/hydradns"
# Readable by the unprivileged user the service runs as.
install -m 0644 "$here/files/hydradns.config" "$data/etc/config/hydradns"
install -m 0644 "$here/files/hydradns.capabilities.json" "$data/etc/capabilities/hydradns.json"

installed_size=$(du -sb "$data" | cut -f1)
cat > "$ctrl/control" <<CONTROL
Package: hydradns
Version: $version-$release
Depends: libc, ca-bundle
Source: feeds/packages/net/hydradns
SourceName: hydradns
License: MIT OR Apache-2.0
Section: net
Require-User: hydradns=453:hydradns=453
Maintainer: HydraDNS maintainers <hydradns@users.noreply.github.com>
Architecture: $arch
Installed-Size: $installed_size
Description: DNS security gateway: blocklists, cache, forwarding
 Answers the network's DNS from blocklists (downloaded and kept fresh), a
 cache and upstream resolvers; logs queries to SQLite in RAM with copies on
 flash. Works in front of or behind dnsmasq.
CONTROL
echo "/etc/config/hydradns" > "$ctrl/conffiles"
# OpenWrt's default scripts: create the user from Require-User, enable and
# start (or stop and disable) the init script. Stopping restores dnsmasq.
cat > "$ctrl/postinst" <<'SCRIPT'
#!/bin/sh
[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0
[ -s "${IPKG_INSTROOT}/lib/functions.sh" ] || exit 0
. "${IPKG_INSTROOT}/lib/functions.sh"
default_postinst "$0" "$@"
SCRIPT
cat > "$ctrl/prerm" <<'SCRIPT'
#!/bin/sh
[ -s "${IPKG_INSTROOT}/lib/functions.sh" ] || exit 0
. "${IPKG_INSTROOT}/lib/functions.sh"
default_prerm "$0" "$@"
SCRIPT
chmod 0755 "$ctrl/postinst" "$ctrl/prerm"

gnutar() { tar --format=gnu --owner=0 --group=0 --numeric-owner --sort=name --mtime="@$epoch" "$@"; }
(cd "$data" && gnutar -cf - . | gzip -n9 > "$stage/data.tar.gz")
(cd "$ctrl" && gnutar -cf - . | gzip -n9 > "$stage/control.tar.gz")
echo "2.0" > "$stage/debian-binary"
mkdir -p "$out"
out=$(cd "$out" && pwd)
ipk="$out/hydradns_${version}-${release}_${arch}.ipk"
(cd "$stage" && gnutar -cf - ./debian-binary ./control.tar.gz ./data.tar.gz | gzip -n9 > "$ipk.tmp")
mv "$ipk.tmp" "$ipk"
echo "$ipk"
