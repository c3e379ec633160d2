#!/bin/sh
# shellcheck disable=SC2015,SC2012  # A && B || fail is meant; ls of fixed paths
# opkg upgrade from release 1 to release 2 (a different binary): the new
# binary runs, dnsmasq is not restarted and /etc/config/dhcp not rewritten,
# and the owner's changes to /etc/config/hydradns are kept.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

router_with_wan
opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/opkg.out 2>&1 || fail "opkg install: $(cat /tmp/opkg.out)"
check_daemon
block_with_uci kept.example

step "opkg upgrade"
upgrade_checked opkg install "$PKGS"/hydradns_*-4_x86_64.ipk
opkg list-installed | grep -q '^hydradns - .*-4$' || fail "not upgraded: $(opkg list-installed | grep hydradns)"
echo "PASS upgrade-opkg"
