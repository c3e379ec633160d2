#!/usr/bin/env bash
# Turns a prebuilt static hydradns binary into an .ipk for opkg (OpenWrt
# 23.05/24.10) without the SDK.
#   openwrt/build-ipk.sh BINARY ARCH [OUTDIR]
#   ARCH is OpenWrt's name: aarch64_generic, aarch64_cortex-a53,
#   arm_cortex-a7_neon-vfpv4, x86_64, …   RELEASE=N sets the package release.
# Archives are GNU tar (opkg silently installs nothing from a pax tar and
# still reports success), files owned by root, timestamps fixed for
# reproducible packages.
set -euo pipefail
bin=$1
arch=$2
out=${3:-dist}
# shellcheck source=openwrt/package.sh
. "$(dirname "$0")/package.sh"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
data="$stage/data"
ctrl="$stage/control"
stage_files "$data"
install -d "$ctrl"

cat > "$ctrl/control" <<CONTROL
Package: hydradns
Version: $pkg_version-$pkg_release
Depends: libc, ca-bundle
Conflicts: ${pkg_conflicts// /, }
Source: feeds/packages/net/hydradns
SourceName: hydradns
License: $pkg_license
Section: net
Require-User: $pkg_users
Maintainer: $pkg_maintainer
Architecture: $arch
Installed-Size: $(installed_size "$data")
Description: $pkg_summary
$(echo "$pkg_description" | fold -s -w 74 | sed 's/ *$//; s/^/ /')
CONTROL
echo "$pkg_conffiles" > "$ctrl/conffiles"
# OpenWrt's default scripts: create the user from Require-User, enable and
# start (or stop and disable) the init script. Stopping restores dnsmasq;
# on an upgrade (PKG_UPGRADE=1) and in the removal half of opkg's
# --force-reinstall (which the init script tells by opkg's command line) it
# keeps the daemon answering instead, for the new package's start.
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
# default_postinst sources the package's own part from opkg's info
# directory, where opkg puts every control file.
printf '#!/bin/sh\n%s\n' "$pkg_postinst_own" > "$ctrl/postinst-pkg"
chmod 0755 "$ctrl/postinst" "$ctrl/prerm" "$ctrl/postinst-pkg"

mkdir -p "$out"
out=$(cd "$out" && pwd)
ipk="$out/hydradns_${pkg_version}-${pkg_release}_${arch}.ipk"
pack_ipk "$ctrl" "$data" "$ipk"
echo "$ipk"
