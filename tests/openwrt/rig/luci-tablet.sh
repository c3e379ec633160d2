#!/bin/sh
# shellcheck disable=SC2015  # A && B || fail is meant
# Issue 48's kids' tablet, end to end on the rig's network (run.sh --net
# --luci-port: netifd, fw4, dnsmasq's DHCP, a LAN and a WAN, and LuCI): the
# tablet and a parent's laptop get their addresses from dnsmasq, hydradns
# and luci-app-hydradns are installed as shipped (opkg), nothing of
# hydradns is configured here. The host (tests/openwrt/luci.sh, mode
# tablet) then sets the tablet up in a real browser and asks DNS from the
# two devices' namespaces (/var/run/netns/lan and lan2); afterwards this
# checks that the config it left is the one the browser made.
#   /rig/mnt/luci-tablet.sh
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

# The ISP's resolver (netifd's resolv.conf.auto names it): every name gets a
# public address (dnsmasq's rebind protection drops documentation ones).
wan dnsmasq --no-resolv --no-hosts --user=root --listen-address=198.51.100.1 --bind-interfaces \
	--address=/#/93.184.215.14 --pid-file=/tmp/isp.pid || fail "ISP resolver"

step "two LAN devices get their addresses from dnsmasq"
lan udhcpc -i eth0 -x hostname:kids-tablet -q -n -t 10 -T 1 > /dev/null 2>&1 || fail "no DHCP lease for the tablet"
# The laptop: a namespace of its own, on a macvlan of the LAN's wire (a MAC
# of its own, as a second device on the switch has).
touch /var/run/netns/lan2
unshare --net=/var/run/netns/lan2 true || fail "no namespace for the laptop"
lan ip link add laptop0 link eth0 type macvlan mode bridge || fail "no macvlan"
lan2() { nsenter --net=/var/run/netns/lan2 "$@"; }
# busybox ip moves a link to a process's namespace, not to a file's.
nsenter --net=/var/run/netns/lan2 sleep 30 &
holder=$!
in_lan2() { [ "$(readlink "/proc/$holder/ns/net")" = "net:[$(stat -L -c %i /var/run/netns/lan2)]" ]; }
wait_until 5 in_lan2 || fail "no process in lan2"
lan ip link set laptop0 netns "$holder" || fail "macvlan into lan2"
kill "$holder"
lan2 ip link set lo up
lan2 ip link set laptop0 up
lan2 udhcpc -i laptop0 -x hostname:parents-laptop -q -n -t 10 -T 1 > /dev/null 2>&1 || fail "no DHCP lease for the laptop"
grep -q ' kids-tablet ' /tmp/dhcp.leases && grep -q ' parents-laptop ' /tmp/dhcp.leases ||
	fail "leases: $(cat /tmp/dhcp.leases)"

step "install hydradns and luci-app-hydradns (opkg), as shipped"
opkg install "$PKGS"/luci-base_*_all.ipk "$PKGS"/hydradns_*-3_x86_64.ipk "$PKGS"/luci-app-hydradns_*_all.ipk \
	> /tmp/install.out 2>&1 || fail "opkg install: $(cat /tmp/install.out)"
check_daemon
wait_until 10 sh -c 'ubus list luci.hydradns' || fail "rpcd has no luci.hydradns: $(ubus list)"
# The clock is set: busybox ntpd's stratum event, through the ntp hotplug
# scripts (the package's marks the clock good; until then a schedule
# counts as always open, so a wrong clock never unblocks).
ACTION=stratum /sbin/hotplug-call ntp || fail "hotplug-call ntp"
[ -e /var/state/ntpd-synced ] || fail "the ntp hotplug did not mark the clock: $(ls /etc/hotplug.d/ntp)"
mac=$(awk '$4 == "kids-tablet" { print $2 }' /tmp/dhcp.leases)
[ "$(lan dig +short +time=2 +tries=1 @192.0.2.1 www.tiktok.com A | head -n 1)" = 93.184.215.14 ] ||
	fail "the tablet does not get answers through the router: $(lan dig +time=2 +tries=1 @192.0.2.1 www.tiktok.com A)"

host_drives_luci :

step "what the owner did through LuCI"
hydradns check-config -c /etc/config/hydradns > /dev/null || fail "check-config: $(hydradns check-config -c /etc/config/hydradns)"
out=$(hydradns check -c /etc/config/hydradns --client "$mac" www.tiktok.com)
echo "$out" | grep -q "groups: default,kids" || fail "the tablet is not in kids: $out"
[ -n "$(uci -q get hydradns.schoolnights.start)" ] && [ "$(uci -q get hydradns.kids.schedule)" = schoolnights ] &&
	[ "$(uci -q get hydradns.kids.service)" = tiktok ] || fail "the group and schedule: $(uci show hydradns)"
[ ! -f /var/run/hydradns.refused ] || fail "refused: $(cat /var/run/hydradns.refused)"

step "the Devices list holds the LAN's devices, not the WAN's side"
# The router's own lookups put the ISP's resolver (its WAN gateway) in the
# neighbour tables; it never asked and is no device of the house.
wanmac=$(wan ip link show eth0 | awk '$1 == "link/ether" { print $2 }')
[ -n "$wanmac" ] || fail "no MAC for the WAN host: $(wan ip link show eth0)"
ip neigh show dev eth1 | grep -qi "$wanmac" || fail "the WAN host is not in the router's neighbour table: $(ip neigh)"
devices=$(hydradns devices --json)
echo "$devices" | grep -q '"name":"kids-tablet"' && echo "$devices" | grep -q '"name":"parents-laptop"' ||
	fail "the leased devices are not listed: $devices"
echo "$devices" | grep -qi "\"mac\":\"$wanmac\"\|198\.51\.100\.1\"" && fail "the WAN's side is listed: $devices"
# Nor the router itself, by its own MAC (its advertisements can put its
# link-local address in its own neighbour table).
for own in $(ip -o link | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'); do
	echo "$devices" | grep -qi "\"mac\":\"$own\"" && fail "the router's own $own is listed: $devices"
done
echo "PASS luci-tablet"
