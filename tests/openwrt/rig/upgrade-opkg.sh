#!/bin/sh
# shellcheck disable=SC2015,SC2012  # A && B || fail is meant; ls of fixed paths
# opkg upgrade from release 1 to release 2 (a different binary): the new
# binary runs, dnsmasq is not restarted and /etc/config/dhcp not rewritten,
# and the owner's changes to /etc/config/hydradns are kept.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

start_wan_resolver 127.0.0.2:53
wan_up
opkg install "$PKGS"/hydradns_*-1_x86_64.ipk > /tmp/opkg.out 2>&1 || fail "opkg install: $(cat /tmp/opkg.out)"
check_daemon
uci add_list hydradns.@blocklist[1].domain=kept.example
uci commit hydradns
reload_config
wait_for 10 0.0.0.0 ask kept.example 127.0.0.1 || fail "kept.example not blocked"

step "opkg upgrade"
dnsmasq_pid=$(pid_of dnsmasq)
pid=$(pid_of hydradns)
sum=$(dhcp_sum)
dhcp_inode=$(ls -i /etc/config/dhcp | awk '{ print $1 }')
opkg install "$PKGS"/hydradns_*-2_x86_64.ipk > /tmp/opkg.out 2>&1 || fail "opkg upgrade: $(cat /tmp/opkg.out)"
opkg list-installed | grep -q '^hydradns - .*-2$' || fail "not upgraded: $(opkg list-installed | grep hydradns)"
check_daemon
new=$(pid_of hydradns)
[ "$new" != "$pid" ] || fail "still the old process"
[ "$(md5sum < "/proc/$new/exe")" = "$(md5sum < /usr/sbin/hydradns)" ] || fail "not running the new binary"
[ "$(pid_of dnsmasq)" = "$dnsmasq_pid" ] || fail "the upgrade restarted dnsmasq"
[ "$(dhcp_sum)" = "$sum" ] && [ "$(ls -i /etc/config/dhcp | awk '{ print $1 }')" = "$dhcp_inode" ] ||
	fail "the upgrade rewrote /etc/config/dhcp"
uci -q get hydradns.@blocklist[1].domain | grep -q kept.example || fail "the owner's config was replaced"
wait_for 10 0.0.0.0 ask kept.example 127.0.0.1 || fail "kept.example after the upgrade"
[ -L /etc/rc.d/S18hydradns ] || fail "disabled by the upgrade"
echo "PASS upgrade-opkg"
