#!/bin/sh
# shellcheck disable=SC2015  # A && B || fail is meant: fail when either is false
# A router upgraded from 0.1.0-1, which gave its user dnsmasq's ids (453)
# and kept dnsmasq's backup in /etc/hydradns: what that version left, as it
# left it in upstream mode, then this package installed over it. The user
# gets ids of its own, the daemon and its files follow, what it committed to
# /etc/config/dhcp is undone, and removal leaves dnsmasq on its own.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

router_with_wan

step "what 0.1.0-1 left behind, in upstream mode"
echo 'hydradns:x:453:453:hydradns:/var/run/hydradns:/bin/false' >> /etc/passwd
echo 'hydradns:x:0:0:99999:7:::' >> /etc/shadow
echo 'hydradns:x:453:hydradns' >> /etc/group
mkdir -p /etc/hydradns/lists
printf 'port=\nnoresolv=\nserver=\n' > /etc/hydradns/dnsmasq.backup
echo 'stale' > /etc/hydradns/lists/old.list
chown -R 453:453 /etc/hydradns
uci set 'dhcp.@dnsmasq[0].noresolv=1'
uci add_list 'dhcp.@dnsmasq[0].server=127.0.0.1#5353'
uci commit dhcp
/etc/init.d/dnsmasq restart

step "install over it"
opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/opkg.out 2>&1 || fail "opkg install: $(cat /tmp/opkg.out)"
check_daemon
uid=$(id -u hydradns)
[ "$uid" != 453 ] || fail "still dnsmasq's uid"
[ "$(cut -d: -f3 /etc/passwd | grep -cx "$uid")" = 1 ] || fail "uid $uid is shared"
[ "$(id -g hydradns)" = "$uid" ] && [ "$(cut -d: -f3 /etc/group | grep -cx "$uid")" = 1 ] || fail "gid: $(grep hydradns /etc/group)"
[ "$(id -u dnsmasq)" = 453 ] || fail "dnsmasq's own user changed"
[ "$(stat -c %u /etc/hydradns/lists/old.list)" = "$uid" ] || fail "its files are not its own: $(ls -ln /etc/hydradns/lists)"
[ ! -f /etc/hydradns-dnsmasq.backup ] && [ ! -f /etc/hydradns/dnsmasq.backup ] || fail "the old backup is still there"
[ "$(dhcp_sum)" = "$original" ] || fail "what 0.1.0-1 committed is still in dhcp: $(diff /tmp/dhcp.original /etc/config/dhcp)"
grep -qx 'server=127.0.0.1#5353' "$(cat /var/run/hydradns.dnsmasq)" || fail "not handed over at run time"
in_log 'user hydradns had uid 453, shared with another user' || fail "the change is not logged"
wait_for 10 93.184.215.14 ask wan.example 127.0.0.1 || fail "not answering through dnsmasq"

step "removal gives dnsmasq its own settings back"
opkg remove hydradns > /tmp/opkg.out 2>&1 || fail "opkg remove: $(cat /tmp/opkg.out)"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp differs: $(diff /tmp/dhcp.original /etc/config/dhcp)"
echo "PASS legacy"
