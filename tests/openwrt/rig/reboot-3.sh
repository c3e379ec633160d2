#!/bin/sh
# Reboot, third boot: disabled before the last shutdown, so that shutdown
# gave dnsmasq its settings back, and it serves DNS alone.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

wait_until 10 stopped hydradns || fail "started although disabled"
cmp -s /etc/config/dhcp /etc/dhcp.original || fail "dhcp differs: $(diff /etc/dhcp.original /etc/config/dhcp)"
wait_until 10 running dnsmasq || fail "dnsmasq not running"
[ -n "$(dig +short +time=2 +tries=1 @127.0.0.1 localhost A)" ] || fail "dnsmasq does not answer on port 53"
echo "PASS reboot-3"
