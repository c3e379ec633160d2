#!/bin/sh
# Sysupgrade, after: a fresh image without HydraDNS booted with the config
# sysupgrade kept: stock dnsmasq serves the LAN, its settings are the ones
# kept, and nothing redirects or rejects.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

[ ! -e /usr/sbin/hydradns ] || fail "the new image has HydraDNS"
[ -f /etc/config/hydradns ] || fail "sysupgrade did not keep /etc/config/hydradns"
cmp -s /etc/config/dhcp /etc/config/dhcp.before-upgrade || fail "dhcp is not the kept one"
wan dnsmasq --no-resolv --no-hosts --user=root --listen-address=198.51.100.1 --bind-interfaces \
	--address=/#/93.184.215.14 --pid-file=/tmp/isp.pid || fail "ISP resolver"
lan udhcpc -i eth0 -x hostname:laptop -q -n -t 10 -T 1 > /dev/null 2>&1 || fail "no DHCP lease"
wait_for 20 93.184.215.14 lan dig +short +time=2 +tries=1 @192.0.2.1 wan.example A || fail "the LAN has no DNS"
nft list table inet fw4 | grep -qi hydradns && fail "rules of HydraDNS in fw4"
echo "PASS sysupgrade-2"
