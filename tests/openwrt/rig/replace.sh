#!/bin/sh
# shellcheck disable=SC2015  # A && B || fail is meant: fail when either is false
# The three dnsmasq modes with OpenWrt's real dnsmasq init script, replace
# mode serving port 53 as the README sets it up, the user's own staged dhcp
# changes left staged, dnsmasq restarted only when its settings change, and
# its settings back byte for byte in off mode. Run with and without ujail.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

[ -x /sbin/ujail ] && echo "(with ujail)"
# Replace mode needs 0.0.0.0:53 free, so the WAN's resolver is on another
# port, named as an upstream.
start_wan_resolver 127.0.0.1:5399
# A LAN name only dnsmasq knows.
uci add dhcp domain > /dev/null
uci set dhcp.@domain[-1].name=nas
uci set dhcp.@domain[-1].ip=192.168.1.50
# A per-domain server of the owner's, and a pool with a DNS server of its own.
uci add_list 'dhcp.@dnsmasq[0].server=/corp.example/10.0.0.1'
uci set dhcp.guest=dhcp
uci set dhcp.guest.interface=guest
uci add_list dhcp.guest.dhcp_option=6,192.168.9.1
uci commit dhcp
/etc/init.d/dnsmasq restart
wait_for 10 192.168.1.50 ask nas.lan 127.0.0.1 || fail "dnsmasq does not know nas.lan"
uci_written_dhcp
original=$(dhcp_sum)
cp /etc/config/dhcp /tmp/dhcp.original

step "install (upstream mode)"
opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/opkg.out 2>&1 || fail "opkg install: $(cat /tmp/opkg.out)"
check_daemon
uci add_list hydradns.@blocklist[1].domain=blocked.example
uci add_list hydradns.main.upstream=127.0.0.1:5399
uci commit hydradns
reload_config
wait_for 10 0.0.0.0 ask blocked.example 127.0.0.1 || fail "not blocking through dnsmasq"
conf=$(cat /var/run/hydradns.dnsmasq)
grep -qx 'server=127.0.0.1#5353' "$conf" || fail "dnsmasq does not forward to us: $(cat "$conf")"
grep -qx 'server=/corp.example/10.0.0.1' /var/etc/dnsmasq.conf.* || fail "the per-domain server is gone"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp written in upstream mode"

step "a new listen port restarts, and dnsmasq follows it"
pid=$(pid_of hydradns)
uci set hydradns.main.listen='127.0.0.1:5300'
uci commit hydradns
reload_config
wait_until 10 grep -qx 'server=127.0.0.1#5300' "$conf" || fail "dnsmasq not following"
wait_until 10 respawned hydradns "$pid" || fail "not restarted"
check_daemon
wait_for 10 0.0.0.0 ask blocked.example 127.0.0.1 || fail "not blocking on the new port"

step "the user stages a dhcp change of their own"
uci set dhcp.lan.leasetime=1h
staged=$(uci changes dhcp)
[ -n "$staged" ] || fail "nothing staged"

step "replace mode without a listener on port 53 is refused, and said why"
dnsmasq_pid=$(pid_of dnsmasq)
pid=$(pid_of hydradns)
uci set hydradns.main.dnsmasq_mode='replace'
uci commit hydradns
reload_config
wait_until 10 in_log "hydradns.*needs a listen address on port 53" || fail "not logged"
[ "$(pid_of hydradns)" = "$pid" ] && [ "$(pid_of dnsmasq)" = "$dnsmasq_pid" ] || fail "a broken config was applied"
[ "$(ask blocked.example 127.0.0.1)" = 0.0.0.0 ] || fail "the running config stopped answering"

step "replace mode, as the README says"
uci set hydradns.main.dnsmasq_mode='replace'
uci delete hydradns.main.listen
uci add_list hydradns.main.listen='0.0.0.0:53'
uci add_list hydradns.main.listen='[::]:53'
uci commit hydradns && /etc/init.d/hydradns reload
check_daemon
wait_for 15 0.0.0.0 ask blocked.example 127.0.0.1 || fail "nothing of ours on port 53: $(logread -e hydradns | tail -n 5)"
[ "$(ask wan.example 127.0.0.1)" = 93.184.215.14 ] || fail "forwarding on port 53"
[ "$(ask nas.lan 127.0.0.1)" = 192.168.1.50 ] || fail "LAN names through dnsmasq on its own port"
[ "$(ask nas.lan 127.0.0.1 5354)" = 192.168.1.50 ] || fail "dnsmasq on 5354"
grep -qx 'port=5354' "$conf" || fail "dnsmasq's port not in our file: $(cat "$conf")"
grep -qx 'dhcp-option=6,0.0.0.0' "$conf" || fail "the pools do not name the router as DNS server"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp written in replace mode: $(diff /tmp/dhcp.original /etc/config/dhcp)"
[ "$(pid_of dnsmasq)" != "$dnsmasq_pid" ] || fail "dnsmasq not restarted for its new port"
[ "$(uci changes dhcp)" = "$staged" ] || fail "staged changes: before '$staged', now '$(uci changes dhcp)'"
grep -q "leasetime '1h'" /etc/config/dhcp && fail "the user's staged change was committed"
# Port 53 is root's; the daemon is not.
pid=$(pid_of hydradns)
grep -q '^CapEff:	0000000000000000$' "/proc/$pid/status" || fail "capabilities kept"

step "restart and an unchanged reload leave dnsmasq alone"
dnsmasq_pid=$(pid_of dnsmasq)
/etc/init.d/hydradns restart
check_daemon
/etc/init.d/hydradns reload
wait_for 15 0.0.0.0 ask blocked.example 127.0.0.1 || fail "port 53 after restart"
[ "$(pid_of dnsmasq)" = "$dnsmasq_pid" ] || fail "dnsmasq restarted"

step "off: our file gone, dnsmasq on port 53, staged changes still staged"
uci set hydradns.main.dnsmasq_mode='off'
uci delete hydradns.main.listen
uci add_list hydradns.main.listen='127.0.0.1:5353'
uci commit hydradns
reload_config
wait_until 15 [ ! -e "$conf" ] || fail "our file stayed"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp differs: $(diff /tmp/dhcp.original /etc/config/dhcp)"
wait_for 10 "$staged" uci changes dhcp || fail "staged changes lost"
wait_for 10 192.168.1.50 ask nas.lan 127.0.0.1 || fail "dnsmasq back on 53"
wait_for 10 0.0.0.0 ask blocked.example 127.0.0.1 5353 || fail "hydradns on 5353"

step "upstream again"
uci set hydradns.main.dnsmasq_mode='upstream'
uci commit hydradns
reload_config
wait_for 15 0.0.0.0 ask blocked.example 127.0.0.1 || fail "upstream mode"
[ "$(ask nas.lan 127.0.0.1)" = 192.168.1.50 ] || fail "dnsmasq's own names in upstream mode"
wait_for 10 "$staged" uci changes dhcp || fail "staged changes lost"

step "stop leaves dnsmasq on its own"
/etc/init.d/hydradns stop
[ ! -e "$conf" ] || fail "our file stayed after stop"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp differs after stop"
wait_for 10 192.168.1.50 ask nas.lan 127.0.0.1 || fail "dnsmasq on its own"

step "enabled 0: a reload stops it and gives dnsmasq back"
/etc/init.d/hydradns start
wait_until 15 grep -qx no-resolv "$conf" || fail "upstream mode after start"
uci set hydradns.main.enabled=0
uci commit hydradns
reload_config
wait_until 10 stopped hydradns || fail "still running"
[ ! -e "$conf" ] || fail "our file stayed when disabled"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp differs when disabled"
echo "PASS replace"
