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
# Another device on the LAN's wire: namespace NS (/var/run/netns/NS) of its
# own, on a macvlan DEV of the LAN's wire (a MAC of its own, as a second
# device on the switch has), asking dnsmasq for a lease as HOSTNAME.
in_ns() {
	_ns=$1
	shift
	nsenter --net="/var/run/netns/$_ns" "$@"
}
holder=
holds() { [ "$(readlink "/proc/$holder/ns/net")" = "net:[$(stat -L -c %i "/var/run/netns/$1")]" ]; }
lan_device() {
	ns=$1 dev=$2 hostname=$3
	touch "/var/run/netns/$ns"
	unshare --net="/var/run/netns/$ns" true || fail "no namespace $ns"
	lan ip link add "$dev" link eth0 type macvlan mode bridge || fail "no macvlan for $ns"
	# busybox ip moves a link to a process's namespace, not to a file's.
	nsenter --net="/var/run/netns/$ns" sleep 30 &
	holder=$!
	wait_until 5 holds "$ns" || fail "no process in $ns"
	lan ip link set "$dev" netns "$holder" || fail "macvlan into $ns"
	kill "$holder"
	in_ns "$ns" ip link set lo up
	in_ns "$ns" ip link set "$dev" up
	in_ns "$ns" udhcpc -i "$dev" -x "hostname:$hostname" -q -n -t 10 -T 1 > /dev/null 2>&1 || fail "no DHCP lease for $ns"
}
# The parents' laptop.
lan_device lan2 laptop0 parents-laptop
lan2() { in_ns lan2 "$@"; }
grep -q ' kids-tablet ' /tmp/dhcp.leases && grep -q ' parents-laptop ' /tmp/dhcp.leases ||
	fail "leases: $(cat /tmp/dhcp.leases)"
# Issue 58: a device whose DHCP hostname holds markup (a payload that sets
# window.__pwned if a page runs it); the host finds it by the MAC and
# address left in /rig/hostile-device, and checks the pages that show it.
lan_device lan3 hostile0 "<svg/onload=window.__pwned=1>"
hostile_mac=$(in_ns lan3 ip -o link show dev hostile0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
hostile_ip=$(in_ns lan3 ip -4 -o addr show dev hostile0 | awk '{ split($4, a, "/"); print a[1] }')
[ -n "$hostile_ip" ] || fail "no address for the device named with markup"
echo "$hostile_mac $hostile_ip" > /rig/hostile-device

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

# The device named with markup asks a name (through dnsmasq), so that the
# log and today's counts have it.
in_ns lan3 dig +short +time=2 +tries=1 @192.0.2.1 hostile-device.example A > /dev/null
echo "-- the lease of the device named with markup: $(grep -i "$hostile_mac" /tmp/dhcp.leases)"

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
