# shellcheck shell=ash
# What each boot of the power-cut scenario checks: DNS for the LAN within
# 30 s of the boot's checks starting, through the router, filtered, and
# /etc/config/dhcp byte for byte the factory's. Sourced by powercut-*.sh.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

lan_ask() { lan dig +short +time=2 +tries=1 "@$2" "$1" A 2>/dev/null | head -n 1; }
boot_checks() {
	wan dnsmasq --no-resolv --no-hosts --user=root --listen-address=198.51.100.1 --bind-interfaces \
		--address=/#/93.184.215.14 --pid-file=/tmp/isp.pid || fail "ISP resolver"
	lan udhcpc -i eth0 -x hostname:laptop -q -n -t 10 -T 1 > /dev/null 2>&1 || fail "no DHCP lease"
	wait_for 30 0.0.0.0 lan_ask blocked.example 203.0.113.53 || fail "no filtered DNS for the LAN 30 s into the boot"
	[ "$(lan_ask wan.example 192.0.2.1)" = 93.184.215.14 ] || fail "no DNS for the LAN"
	cmp -s /etc/config/dhcp /etc/dhcp.factory || fail "dhcp written: $(diff /etc/dhcp.factory /etc/config/dhcp)"
}
# dnsmasq_mode MODE, with the listen address it needs, committed.
set_mode() {
	uci set hydradns.main.dnsmasq_mode="$1"
	uci delete hydradns.main.listen
	if [ "$1" = replace ]; then
		uci add_list hydradns.main.listen='0.0.0.0:53'
	else
		uci add_list hydradns.main.listen='127.0.0.1:5353'
	fi
	uci commit hydradns
}
# The plug is pulled now (rig.sh kills the rig when it reads CUT).
cut() {
	echo "PASS $1"
	echo CUT
	sleep 600
}
