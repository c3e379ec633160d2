#!/usr/bin/env bash
# Makes luci-app-hydradns, architecture-independent, as an .ipk (opkg,
# OpenWrt 24.10) and an .apk (apk v3, 25.12) without the SDK, from
# openwrt/luci-app-hydradns/ (htdocs/ → /www, root/ → /), the way luci.mk
# lays out an app. Prints the two packages' paths.
#   openwrt/build-luci.sh [OUTDIR]      RELEASE=N sets the package release.
set -euo pipefail
out=${1:-dist}
# shellcheck source=openwrt/package.sh
. "$(dirname "$0")/package.sh"
# shellcheck source=openwrt/apk-tool.sh
. "$here/apk-tool.sh"
app="$here/luci-app-hydradns"
name=luci-app-hydradns
summary="LuCI pages for HydraDNS: status, queries, lists, settings, pause"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
files="$stage/files"
install -d "$files/www" "$stage/control" "$stage/scripts"
cp -R "$app/htdocs/." "$files/www/"
cp -R "$app/root/." "$files/"
find "$files" -type d -exec chmod 0755 {} +
find "$files" -type f -exec chmod 0644 {} +
chmod 0755 "$files/usr/libexec/rpcd/luci.hydradns"

# What luci.mk's scripts do on a running router: drop LuCI's menu and module
# caches so the pages appear, and have rpcd (re)read the ACL and plugin.
# shellcheck disable=SC2016  # expanded by the router's shell, not here
refresh='[ -n "${IPKG_INSTROOT}" ] && exit 0
rm -f /tmp/luci-indexcache.*
rm -rf /tmp/luci-modulecache/
killall -HUP rpcd 2>/dev/null
exit 0'

mkdir -p "$out"
out=$(cd "$out" && pwd)

# .ipk
ctrl="$stage/control"
cat > "$ctrl/control" <<CONTROL
Package: $name
Version: $pkg_version-$pkg_release
Depends: libc, luci-base, hydradns (= $pkg_version-$pkg_release)
Source: feeds/luci/applications/$name
SourceName: $name
License: $pkg_license
Section: luci
Maintainer: $pkg_maintainer
Architecture: all
Installed-Size: $(installed_size "$files")
Description: $summary
CONTROL
printf '#!/bin/sh\n%s\n' "$refresh" > "$ctrl/postinst"
printf '#!/bin/sh\n%s\n' "$refresh" > "$ctrl/postrm"
chmod 0755 "$ctrl/postinst" "$ctrl/postrm"
ipk="$out/${name}_${pkg_version}-${pkg_release}_all.ipk"
pack_ipk "$ctrl" "$files" "$ipk"

# .apk: package-pack.mk turns PKGARCH all into noarch, and lists the
# package's files in lib/apk/packages/NAME.list.
apk_list "$files" "$name"
printf '#!/bin/sh\n%s\n' "$refresh" > "$stage/scripts/post-install"
printf '#!/bin/sh\n%s\n' "$refresh" > "$stage/scripts/post-upgrade"
printf '#!/bin/sh\n%s\n' "$refresh" > "$stage/scripts/post-deinstall"
version="$pkg_version-r$pkg_release"
apk="$out/$name-${version}_noarch.apk"
mkpkg --info "name:$name" --info "version:$version" --info "arch:noarch" \
	--info "description:$summary" --info "license:$pkg_license" \
	--info "origin:$name" --info "url:$pkg_url" --info "maintainer:$pkg_maintainer" \
	--info "depends:luci-base hydradns=$version" \
	--script "post-install:$stage/scripts/post-install" --script "post-upgrade:$stage/scripts/post-upgrade" \
	--script "post-deinstall:$stage/scripts/post-deinstall" \
	--files "$files" --output "$apk.tmp" >&2
mv "$apk.tmp" "$apk"
echo "$ipk"
echo "$apk"
