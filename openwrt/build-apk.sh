#!/usr/bin/env bash
# Turns a prebuilt static hydradns binary into an .apk for apk-tools v3
# (OpenWrt 25.12 and later) without the SDK, laid out as OpenWrt's own
# build makes them (include/package-pack.mk): the same files as the .ipk,
# plus lib/apk/packages/hydradns.{list,conffiles,conffiles_static,rusers},
# which OpenWrt's default_postinst and sysupgrade read, and the
# post-install, post-upgrade and pre-deinstall scripts it generates.
#   openwrt/build-apk.sh BINARY ARCH [OUTDIR]
#   ARCH is OpenWrt's name, as for build-ipk.sh. RELEASE=N sets the release
#   (version X.Y.Z-rN, as apk requires).
# Needs apk-tools v3's `apk mkpkg`: $APK, else an `apk` v3 on PATH, else the
# one built from vendor/openwrt-src/ into target/tools/ (openwrt/host-tools.sh).
set -euo pipefail
bin=$1
arch=$2
out=${3:-dist}
# shellcheck source=openwrt/package.sh
. "$(dirname "$0")/package.sh"
# shellcheck source=openwrt/apk-tool.sh
. "$here/apk-tool.sh"


stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
files="$stage/files"
scripts="$stage/scripts"
stage_files "$files"
meta="$files/lib/apk/packages"
install -d "$meta" "$scripts"
echo "$pkg_conffiles" > "$meta/hydradns.conffiles"
for f in $pkg_conffiles; do
	echo "$f $(sha256sum "$files$f" | cut -d' ' -f1)"
done > "$meta/hydradns.conffiles_static"
echo "$pkg_users" > "$meta/hydradns.rusers"
apk_list "$files" hydradns

# The bodies OpenWrt generates: create the user from .rusers, then
# default_postinst (enable unless upgrading, and start) or default_prerm
# (disable and stop, which gives dnsmasq its settings back). `apk fix
# --reinstall` runs pre-upgrade and post-upgrade (same version), never
# pre-deinstall: the running daemon is not stopped.
# shellcheck disable=SC2016  # expanded by the router's shell, not here
postinst='[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0
[ -s "${IPKG_INSTROOT}/lib/functions.sh" ] || exit 0
. "${IPKG_INSTROOT}/lib/functions.sh"
export root="${IPKG_INSTROOT}"
export pkgname=hydradns
add_group_and_user
default_postinst'
# apk has no postinst-pkg: OpenWrt appends the package's own part.
postinst="$postinst
$pkg_postinst_own"
printf '#!/bin/sh\n%s\n' "$postinst" > "$scripts/post-install"
printf '#!/bin/sh\nexport PKG_UPGRADE=1\n%s\n' "$postinst" > "$scripts/post-upgrade"
cat > "$scripts/pre-deinstall" <<'SCRIPT'
#!/bin/sh
[ -s "${IPKG_INSTROOT}/lib/functions.sh" ] || exit 0
. "${IPKG_INSTROOT}/lib/functions.sh"
export root="${IPKG_INSTROOT}"
export pkgname=hydradns
default_prerm
SCRIPT

mkdir -p "$out"
out=$(cd "$out" && pwd)
version="$pkg_version-r$pkg_release"
pkg="$out/hydradns-${version}_${arch}.apk"
# No positive depends: a static binary needs no libc, and the CA bundle that
# verifies HTTPS downloads is in every OpenWrt image (DEFAULT_PACKAGES);
# without it a download fails and says why, and DNS works on. apk has no
# CONFLICTS (OpenWrt's build drops it): conflicts are !name dependencies.
mkpkg=(
	--info "name:hydradns" --info "version:$version" --info "arch:$arch"
	--info "description:$pkg_summary" --info "license:$pkg_license"
	--info "origin:hydradns" --info "url:$pkg_url" --info "maintainer:$pkg_maintainer"
	--info "depends:!${pkg_conflicts// / !}"
	--script "post-install:$scripts/post-install" --script "post-upgrade:$scripts/post-upgrade"
	--script "pre-deinstall:$scripts/pre-deinstall"
	--files "$files" --output "$pkg.tmp"
)
mkpkg "${mkpkg[@]}" >&2
mv "$pkg.tmp" "$pkg"
echo "$pkg"
