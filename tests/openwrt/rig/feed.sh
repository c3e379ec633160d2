#!/bin/sh
# shellcheck disable=SC2015  # A && B || fail is meant: fail when either is false
# The signed feeds scripts/release.sh makes (rig.sh: release 3 in
# /rig/mnt/feed3, release 4, a different binary, in /rig/mnt/feed4, one key
# pair), installed the owner's way, with the signature checks on: opkg with
# `option check_signature` and the key added by opkg-key, apk without
# --allow-untrusted and the key in /etc/apk/keys. A tampered index or
# package is refused and installs nothing; `luci-app-hydradns` pulls
# hydradns; an upgrade from the release 3 feed to the release 4 one
# upgrades both, keeps /etc/config/hydradns and leaves dnsmasq running.
#   /rig/mnt/feed.sh opkg|apk      (feed-opkg.sh, feed-apk.sh)
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh
mode=$1
# The feed as a web server would serve it: a copy, which the tampering
# below alters and a release replaces.
feed=/tmp/feed

# Publishes the release N feed at $feed, as a new release replaces the old.
publish() {
	rm -rf "$feed"
	cp -a "/rig/mnt/feed$1" "$feed"
}
# What is installed: "NAME VERSION" per package of ours.
installed() {
	case "$mode" in
	opkg) opkg list-installed | awk '/^(hydradns|luci-app-hydradns) / { print $1, $3 }' ;;
	apk) apk info -v 2> /dev/null | sed -n 's/^\(hydradns\|luci-app-hydradns\)-\([0-9].*\)$/\1 \2/p' | sort ;;
	esac
}
nothing_installed() {
	[ -z "$(installed)" ] || fail "installed from a tampered feed: $(installed)"
	[ ! -e /usr/sbin/hydradns ] || fail "/usr/sbin/hydradns from a tampered feed"
}
# The package version of release N, as the package manager shows it.
version() {
	case "$mode" in
	opkg) echo "$(cat /rig/mnt/version)-$1" ;;
	apk) echo "$(cat /rig/mnt/version)-r$1" ;;
	esac
}

# luci-base, which luci-app-hydradns depends on, as a router with LuCI has
# it installed (this image has no LuCI): an empty package of that name,
# installed from a file as the image's own packages are.
stand_in_luci_base() {
	d=/tmp/luci-base
	mkdir -p $d/c $d/data
	case "$mode" in
	opkg)
		printf 'Package: luci-base\nVersion: 0-rig\nArchitecture: all\nDescription: the rig stand-in\n' > $d/c/control
		(cd $d/data && tar -czf ../data.tar.gz .) && (cd $d/c && tar -czf ../control.tar.gz .) && echo 2.0 > $d/debian-binary
		(cd $d && tar -czf luci-base_0-rig_all.ipk ./debian-binary ./control.tar.gz ./data.tar.gz)
		opkg install $d/luci-base_0-rig_all.ipk > /tmp/install.out 2>&1 || fail "luci-base stand-in: $(cat /tmp/install.out)"
		;;
	apk)
		apk mkpkg --info name:luci-base --info version:0-r0 --info arch:noarch --info "description:the rig stand-in" \
			--files $d/data --output $d/luci-base-0-r0.apk > /dev/null || fail "luci-base stand-in"
		apk add --initdb --allow-untrusted $d/luci-base-0-r0.apk > /tmp/install.out 2>&1 ||
			fail "luci-base stand-in: $(cat /tmp/install.out)"
		;;
	esac
}

uci_written_dhcp
original=$(dhcp_sum)
cp /etc/config/dhcp /tmp/dhcp.original
stand_in_luci_base
publish 3

step "$mode: the feed and its key, as the README says"
case "$mode" in
opkg)
	grep -qx 'option check_signature' /etc/opkg.conf || fail "opkg.conf checks no signatures"
	opkg-key add $feed/keys/hydradns-opkg.pub > /dev/null || fail "opkg-key add"
	echo "src/gz hydradns file://$feed/opkg/x86_64" > /etc/opkg/customfeeds.conf
	;;
apk)
	mkdir -p /etc/apk/keys /etc/apk/repositories.d
	cp $feed/keys/hydradns-apk.pem /etc/apk/keys/hydradns.pem
	echo "$feed/apk/x86_64/packages.adb" > /etc/apk/repositories.d/customfeeds.list
	;;
esac

step "$mode: a tampered index is refused"
case "$mode" in
opkg)
	# A mirror that rewrites the list: the description changed, Packages.sig
	# as published.
	zcat $feed/opkg/x86_64/Packages.gz | sed 's/DNS security gateway/DNS insecure gateway/' |
		gzip -c > /tmp/Packages.gz && mv /tmp/Packages.gz $feed/opkg/x86_64/Packages.gz
	opkg update > /tmp/update.out 2>&1
	grep -q "Signature check failed" /tmp/update.out || fail "opkg update took a tampered Packages: $(cat /tmp/update.out)"
	opkg install luci-app-hydradns > /tmp/install.out 2>&1 && fail "installed from a tampered Packages: $(cat /tmp/install.out)"
	;;
apk)
	# An index signed with a key the router does not trust (a mirror that
	# rebuilt it), then the real one with a byte changed.
	openssl ecparam -name prime256v1 -genkey -noout -out /tmp/other.pem 2> /dev/null
	apk mkndx --allow-untrusted --sign-key /tmp/other.pem --output $feed/apk/x86_64/packages.adb \
		$feed/apk/x86_64/*.apk > /dev/null || fail "mkndx with another key"
	apk update > /tmp/update.out 2>&1
	apk add luci-app-hydradns >> /tmp/update.out 2>&1 && fail "installed from an index signed by another key: $(cat /tmp/update.out)"
	grep -q "UNTRUSTED signature" /tmp/update.out || fail "no UNTRUSTED signature: $(cat /tmp/update.out)"
	publish 3
	dd if=/dev/zero of=$feed/apk/x86_64/packages.adb bs=1 count=1 conv=notrunc \
		seek=$(($(wc -c < $feed/apk/x86_64/packages.adb) / 2)) 2> /dev/null
	cmp -s $feed/apk/x86_64/packages.adb /rig/mnt/feed3/apk/x86_64/packages.adb && fail "the index is unchanged"
	apk update > /tmp/update.out 2>&1
	apk add luci-app-hydradns >> /tmp/update.out 2>&1 && fail "installed from an altered index: $(cat /tmp/update.out)"
	;;
esac
nothing_installed

step "$mode: a package swapped on the server is refused"
# Release 4's hydradns, signed with the real key, under release 3's name:
# only the signed index can tell.
publish 3
case "$mode" in
opkg) cp /rig/mnt/feed4/opkg/x86_64/hydradns_*-4_x86_64.ipk $feed/opkg/x86_64/hydradns_*-3_x86_64.ipk ;;
apk) cp /rig/mnt/feed4/apk/x86_64/hydradns-*-r4.apk $feed/apk/x86_64/hydradns-*-r3.apk ;;
esac
case "$mode" in
opkg)
	opkg update > /tmp/update.out 2>&1 || fail "opkg update: $(cat /tmp/update.out)"
	opkg install luci-app-hydradns > /tmp/install.out 2>&1 && fail "installed a swapped package: $(cat /tmp/install.out)"
	grep -q "Checksum or size mismatch for package hydradns" /tmp/install.out || fail "refused, but why: $(cat /tmp/install.out)"
	;;
apk)
	apk update > /tmp/update.out 2>&1 || fail "apk update: $(cat /tmp/update.out)"
	apk add luci-app-hydradns > /tmp/install.out 2>&1 && fail "installed a swapped package: $(cat /tmp/install.out)"
	grep -q "integrity error\|BAD signature" /tmp/install.out || fail "refused, but why: $(cat /tmp/install.out)"
	# apk still commits what did verify (luci-app-hydradns, without its
	# dependency): the owner's `apk del`.
	apk del luci-app-hydradns > /dev/null 2>&1
	;;
esac
nothing_installed

step "$mode: install luci-app-hydradns from the signed feed"
publish 3
case "$mode" in
opkg)
	opkg update > /tmp/update.out 2>&1 || fail "opkg update: $(cat /tmp/update.out)"
	grep -q "Signature check passed" /tmp/update.out || fail "no signature check: $(cat /tmp/update.out)"
	opkg install luci-app-hydradns > /tmp/install.out 2>&1 || fail "opkg install: $(cat /tmp/install.out)"
	;;
apk)
	apk update > /tmp/update.out 2>&1 || fail "apk update: $(cat /tmp/update.out)"
	apk add luci-app-hydradns > /tmp/install.out 2>&1 || fail "apk add: $(cat /tmp/install.out)"
	;;
esac
[ "$(installed | tr '\n' ' ')" = "$(printf 'hydradns %s luci-app-hydradns %s ' "$(version 3)" "$(version 3)")" ] ||
	fail "installed: $(installed)"
check_daemon
[ -x /usr/libexec/rpcd/luci.hydradns ] || fail "luci-app-hydradns's files are not there"
block_with_uci kept.example

step "$mode: release 4 published; upgrade"
publish 4
case "$mode" in
opkg)
	opkg update > /tmp/update.out 2>&1 || fail "opkg update: $(cat /tmp/update.out)"
	upgrade_checked opkg upgrade hydradns luci-app-hydradns
	;;
apk)
	apk update > /tmp/update.out 2>&1 || fail "apk update: $(cat /tmp/update.out)"
	upgrade_checked apk upgrade
	;;
esac
[ "$(installed | tr '\n' ' ')" = "$(printf 'hydradns %s luci-app-hydradns %s ' "$(version 4)" "$(version 4)")" ] ||
	fail "after the upgrade: $(installed)"
[ "$(md5sum < /usr/sbin/hydradns)" != "$(md5sum < /rig/mnt/hydradns-3)" ] || fail "still release 3's binary"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp differs: $(diff /tmp/dhcp.original /etc/config/dhcp)"
echo "PASS feed-$mode"
