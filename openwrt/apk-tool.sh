# shellcheck shell=bash
# Finds apk-tools v3 for `apk mkpkg`: $APK, else an `apk` v3 on PATH, else
# the one built from vendor/openwrt-src/ (openwrt/host-tools.sh; built into
# target/tools/ the first time). Sourced by openwrt/build-apk.sh and
# openwrt/build-luci.sh after package.sh ($here).
# shellcheck disable=SC2154  # here: from package.sh
# shellcheck source=openwrt/host-tools.sh
. "$here/host-tools.sh"
find_apk() {
	if [ -n "${APK:-}" ]; then
		echo "$APK"
	elif command -v apk > /dev/null && apk --version 2>/dev/null | grep -q '^apk-tools 3\.'; then
		command -v apk
	else
		host_tool apk
	fi
}

# `apk mkpkg ARGS...`, reproducible (SOURCE_DATE_EPOCH from package.sh) and
# with every file root's: apk records owners by name, whoever builds.
mkpkg() {
	local apk apk_lib as_root=()
	apk=$(find_apk)
	apk_lib=$(cd "$(dirname "$apk")/../lib" 2>/dev/null && pwd) || apk_lib=""
	[ "$(id -u)" = 0 ] || as_root=(unshare --map-root-user)
	# shellcheck disable=SC2154  # pkg_epoch: from package.sh
	SOURCE_DATE_EPOCH=$pkg_epoch LD_LIBRARY_PATH=${apk_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "${as_root[@]}" "$apk" mkpkg "$@"
}

# Writes FILES/lib/apk/packages/NAME.list, as OpenWrt's package-pack.mk
# does: every file the package installs, the list itself included
# (default_postinst enables and starts the init scripts it names).
apk_list() {
	local files=$1 name=$2 list tmp
	install -d "$files/lib/apk/packages"
	list="$files/lib/apk/packages/$name.list"
	touch "$list"
	# Written beside, not inside, FILES: find would list it.
	tmp=$(mktemp)
	(cd "$files" && find . ! -type d | sed 's|^\.||' | LC_ALL=C sort) > "$tmp"
	mv "$tmp" "$list"
	chmod 0644 "$list"
}
