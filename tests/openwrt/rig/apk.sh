#!/bin/sh
# shellcheck disable=SC2015  # A && B || fail is meant: fail when either is false
# OpenWrt 25.12's way: apk add --allow-untrusted, upgrade, apk del. The
# rig's stock packages came from opkg and it has no apk database yet: the
# first apk add creates one (--initdb), as a 25.12 image has it.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

router_with_wan

step "apk add"
apk add --initdb --allow-untrusted "$PKGS"/hydradns-*-r3_x86_64.apk > /tmp/apk.out 2>&1 || fail "apk add: $(cat /tmp/apk.out)"
[ -L /etc/rc.d/S18hydradns ] || fail "not enabled"
check_daemon
uid=$(id -u hydradns)
[ "$(cut -d: -f3 /etc/passwd | grep -cx "$uid")" = 1 ] || fail "uid $uid is shared"
[ "$(cut -d: -f3 /etc/group | grep -cx "$(id -g hydradns)")" = 1 ] || fail "gid is shared"
wait_for 10 93.184.215.14 ask wan.example 127.0.0.1 || fail "not answering through dnsmasq"
apk info -L hydradns | grep -v 'contains:$' | grep . | sed 's|^|/|' | sort > /tmp/apk.files
sort /lib/apk/packages/hydradns.list | diff - /tmp/apk.files > /dev/null || fail "apk info -L and hydradns.list differ: $(sort /lib/apk/packages/hydradns.list | diff - /tmp/apk.files)"
grep -qx /etc/config/hydradns /lib/apk/packages/hydradns.conffiles || fail ".conffiles"

step "uci commit + reload_config"
block_with_uci kept.example

step "apk upgrade to r2"
upgrade_checked apk add --allow-untrusted "$PKGS"/hydradns-*-r4_x86_64.apk
apk info hydradns | grep -q -- '-r4 ' || fail "not upgraded: $(apk info hydradns)"

step "apk del: dnsmasq's settings back byte for byte"
apk del hydradns > /tmp/apk.out 2>&1 || fail "apk del: $(cat /tmp/apk.out)"
wait_until 10 stopped hydradns || fail "still running"
[ -e /etc/rc.d/S18hydradns ] && fail "still enabled"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp differs: $(diff /tmp/dhcp.original /etc/config/dhcp)"
wait_for 10 93.184.215.14 ask wan.example 127.0.0.1 || fail "dnsmasq does not answer on its own"
echo "PASS apk"
