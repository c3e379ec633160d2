#!/bin/sh
# shellcheck disable=SC2015  # A && B || fail is meant: fail when either is false
# An upgrade from 0.1.0-2, which committed its dnsmasq settings to
# /etc/config/dhcp (noresolv, server, addmac, addsubnet; port and the
# router as DNS server in replace mode) and kept the owner's values in
# /etc/hydradns-dnsmasq.backup: the upgrade puts the owner's back, byte for
# byte, and hands over at run time only. In replace mode, which changed the
# most. PKG_INSTALL names the package manager: opkg (default) or apk.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

# Replace mode needs 0.0.0.0:53 free: the WAN's resolver on another port.
uci_written_dhcp
original=$(dhcp_sum)
cp /etc/config/dhcp /tmp/dhcp.original
start_wan_resolver 127.0.0.1:5399
install() {
	case "${PKG_INSTALL:-opkg}" in
		opkg) opkg install "$@" ;;
		apk) apk add --allow-untrusted "$@" ;;
	esac > /tmp/install.out 2>&1 || fail "install $*: $(cat /tmp/install.out)"
}
[ "${PKG_INSTALL:-opkg}" = opkg ] || apk add --initdb > /dev/null 2>&1

step "0.1.0-2, in replace mode"
case "${PKG_INSTALL:-opkg}" in
	opkg) install "$PKGS"/old/hydradns_*-2_x86_64.ipk ;;
	apk) install "$PKGS"/old/hydradns-*-r2_x86_64.apk ;;
esac
check_daemon
uci set hydradns.main.dnsmasq_mode='replace'
uci delete hydradns.main.listen
uci add_list hydradns.main.listen='0.0.0.0:53'
uci add_list hydradns.@blocklist[1].domain=kept.example
uci add_list hydradns.main.upstream=127.0.0.1:5399
uci commit hydradns && /etc/init.d/hydradns reload
wait_for 15 0.0.0.0 ask kept.example 127.0.0.1 || fail "0.1.0-2 in replace mode"
grep -q "option port '5354'" /etc/config/dhcp || fail "0.1.0-2 did not commit its port: $(cat /etc/config/dhcp)"
[ -f /etc/hydradns-dnsmasq.backup ] || fail "0.1.0-2 kept no backup"

step "upgrade to this version"
case "${PKG_INSTALL:-opkg}" in
	opkg) install "$PKGS"/hydradns_*-3_x86_64.ipk ;;
	apk) install "$PKGS"/hydradns-*-r3_x86_64.apk ;;
esac
check_daemon
[ "$(dhcp_sum)" = "$original" ] || fail "the owner's dhcp settings not back: $(diff /tmp/dhcp.original /etc/config/dhcp)"
[ ! -e /etc/hydradns-dnsmasq.backup ] || fail "the old backup stayed"
in_log "hydradns: /etc/config/dhcp has the owner's own dnsmasq settings again" || fail "not logged"
conf=$(cat /var/run/hydradns.dnsmasq)
grep -qx 'port=5354' "$conf" || fail "replace mode not handed over at run time: $(cat "$conf")"
wait_for 15 0.0.0.0 ask kept.example 127.0.0.1 || fail "not serving port 53 after the upgrade"
uci -q get hydradns.@blocklist[1].domain | grep -q kept.example || fail "the owner's config was replaced"

step "removal: dnsmasq on its own, dhcp the owner's"
case "${PKG_INSTALL:-opkg}" in
	opkg) opkg remove hydradns ;;
	apk) apk del hydradns ;;
esac > /tmp/remove.out 2>&1 || fail "remove: $(cat /tmp/remove.out)"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp differs after removal"
wait_for 15 127.0.0.1 ask localhost 127.0.0.1 || fail "dnsmasq does not answer on port 53 on its own"
echo "PASS ${PASS_NAME:-upgrade-old}"
