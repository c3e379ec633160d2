# shellcheck shell=bash
# shellcheck disable=SC2034  # pkg_*: read by the scripts that source this
# What the .ipk and the .apk share: the files, their modes, the package's
# description and version, and the install and removal scripts' bodies.
# Sourced by openwrt/build-ipk.sh and openwrt/build-apk.sh, which set:
#   bin   the static hydradns binary      arch  OpenWrt's package architecture
# and get:
#   pkg_version (X.Y.Z), pkg_release (N, from $RELEASE), pkg_epoch,
#   stage_files DIR (the package's files, as installed), and the texts below.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pkg_version=$(awk -F'"' '/^version =/ {print $2; exit}' "$here/../Cargo.toml")
# 2: the first release with a user of its own and an .apk; 3: dnsmasq
# handed over at run time only, force DNS, the watchdog.
pkg_release=${RELEASE:-3}
case "$pkg_release" in
	'' | *[!0-9]*) echo "RELEASE must be a number, not '$pkg_release'" >&2; exit 2 ;;
esac
pkg_epoch=${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || echo 0)}
pkg_summary="DNS security gateway: blocklists, cache, forwarding"
pkg_description="Answers the network's DNS from blocklists (downloaded and kept fresh), a cache and upstream resolvers; logs queries to SQLite in RAM with copies on flash. Works in front of or behind dnsmasq."
pkg_license="MIT OR Apache-2.0"
pkg_maintainer="HydraDNS maintainers <hydradns@users.noreply.github.com>"
pkg_url="https://github.com/hydradns/hydradns"
# The package's own user and group; no fixed ids, so OpenWrt's
# add_group_and_user gives them free ones (453, once used here, is dnsmasq's).
pkg_users="hydradns:hydradns"
pkg_conffiles="/etc/config/hydradns"
# Packages that fight HydraDNS for port 53 or for dnsmasq's upstreams:
# https-dns-proxy commits its own server list and noresolv into
# /etc/config/dhcp and redirects port 53 itself; AdGuard Home wants port 53
# (../shared/research/wave3.md, 3.1). One of them beside HydraDNS leaves
# DNS to whichever started last.
pkg_conflicts="https-dns-proxy adguardhome"

# The package's own part of its postinst (OpenWrt's postinst-pkg), run
# after default_postinst's user and before its start: rpcd reads its
# plugins' methods and its ACLs when it starts, and on HUP re-executes
# itself (sessions kept) to read the new ones, as LuCI apps' packages have
# it do. Nothing when building an image (IPKG_INSTROOT), or without rpcd.
# shellcheck disable=SC2016  # expanded by the router's shell, not here
pkg_postinst_own='[ -n "${IPKG_INSTROOT}" ] || killall -HUP rpcd 2>/dev/null || true'

# Installed-Size as OpenWrt's ipkg-build counts it: the bytes of the files,
# not du's blocks or directory sizes, which differ from one file system to
# the next (a reproducible package must not).
installed_size() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }

# The package's files under DIR, owned by whoever runs this (the archivers
# record them as root's), modes as installed.
stage_files() {
	local dir=$1
	install -d "$dir/usr/sbin" "$dir/etc/init.d" "$dir/etc/config" "$dir/etc/hydradns/lists" "$dir/etc/hotplug.d/ntp" \
		"$dir/usr/libexec/rpcd" "$dir/usr/share/rpcd/acl.d"
	# shellcheck disable=SC2154  # bin: set by the script that sources this
	install -m 0755 "$bin" "$dir/usr/sbin/hydradns"
	install -m 0755 "$here/files/hydradns.init" "$dir/etc/init.d/hydradns"
	install -m 0755 "$here/files/hydradns.ntp-hotplug" "$dir/etc/hotplug.d/ntp/25-hydradns"
	# The public ubus object `hydradns` and the ACL an API login is given.
	install -m 0755 "$here/files/hydradns.rpcd" "$dir/usr/libexec/rpcd/hydradns"
	install -m 0644 "$here/files/hydradns-api.json" "$dir/usr/share/rpcd/acl.d/hydradns-api.json"
	# Readable by the unprivileged user the daemon becomes.
	install -m 0644 "$here/files/hydradns.config" "$dir/etc/config/hydradns"
}

# tar as the packages want it: GNU format (opkg silently installs nothing
# from a pax tar and still reports success), files root's, times fixed.
gnutar() { tar --format=gnu --owner=0 --group=0 --numeric-owner --sort=name --mtime="@$pkg_epoch" "$@"; }

# Packs the directories CONTROL and DATA into the .ipk FILE as opkg reads
# it: a gzipped tar of debian-binary, control.tar.gz and data.tar.gz.
pack_ipk() {
	local ctrl=$1 data=$2 ipk=$3 st
	st=$(mktemp -d)
	(cd "$data" && gnutar -cf - . | gzip -n9 > "$st/data.tar.gz")
	(cd "$ctrl" && gnutar -cf - . | gzip -n9 > "$st/control.tar.gz")
	echo "2.0" > "$st/debian-binary"
	(cd "$st" && gnutar -cf - ./debian-binary ./control.tar.gz ./data.tar.gz | gzip -n9 > "$ipk.tmp")
	rm -rf "$st"
	mv "$ipk.tmp" "$ipk"
}
