#!/bin/sh
# shellcheck disable=SC2015  # A && B || fail is meant: fail when either is false
# Force DNS and fail-open on the rig's network (run.sh --net: netifd, fw4,
# dnsmasq's DHCP to a LAN client, a WAN with the ISP's resolver and a
# "public resolver" on 203.0.113.53 / 2001:db8:3::53). The package as
# shipped (force_dns 1, upstream mode): a LAN device asking a public resolver
# directly gets the gateway's answer, logged under its DHCP name; DNS over
# TLS/QUIC is refused; exemptions; stop, start, force_dns 0; the daemon
# hung, then its port taken: dnsmasq answers on its own within 30 s and
# back; in replace mode (force_dns on and off, hung too) no LAN device
# reaches dnsmasq's own port; local names and allowed private answers reach
# the LAN in both modes, through dnsmasq's rebind protection, which still
# drops the private answers of the owner's own server; a reinstall (and
# with opkg an upgrade) while a LAN device asks every 100 ms: nothing
# unfiltered, at most a second unanswered; /etc/config/dhcp and
# /etc/config/firewall never written.
# PKG_INSTALL names the package manager: opkg (default) or apk.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

# The first answer a LAN client gets for NAME (A, or TYPE) from SERVER, over
# UDP (or +tcp).
lan_ask() {
	lan dig +short +time=2 +tries=1 ${4:+"$4"} "@$2" "$1" "${3:-A}" 2>/dev/null | head -n 1
}
# Canonical ruleset: counters and handles change by themselves.
ruleset() { nft list ruleset | sed 's/counter packets [0-9]* bytes [0-9]*/counter/'; }
our_rules() { nft list table inet fw4 | grep -c 'ubus:hydradns'; }
rules_at_least() { [ "$(our_rules)" -ge "$1" ]; }
no_rules() { [ "$(our_rules)" = 0 ]; }
rules_diff() { ruleset > /tmp/ruleset.now; echo "$stock" | diff - /tmp/ruleset.now | head -n 20; }
refused_853() {
	lan dig +tcp +time=2 +tries=1 -p 853 "@$1" x.example A 2>&1 | grep -qi "connection refused"
}
more_logged() { [ "$(logged "$1")" -gt "$2" ]; }
# What a LAN device gets for blocked.example from dnsmasq's port in replace
# mode (5354), at the router's LAN and WAN addresses, IPv4 and IPv6, UDP and
# TCP: the answers, one a line (dig's own ";;" lines dropped).
side_door() {
	for server in 192.0.2.1 2001:db8:1::1 198.51.100.2; do
		for proto in +notcp +tcp; do
			lan dig +short +time=2 +tries=1 "$proto" -p 5354 "@$server" blocked.example A 2>&1 | grep -v '^;'
		done
	done
}
# Only the filter's answers, if any: nothing that went round HydraDNS.
no_side_door() {
	out=$(side_door | grep -vx '0\.0\.0\.0')
	[ -z "$out" ] || fail "$1: dnsmasq's port answered the LAN: $out"
}
# docs/configuration.md's local name, a wildcard one, a rebind_allow
# domain's and a config forward's private answers reach a LAN device in
# every mode; a private answer to another name does not (HydraDNS's own
# rebind protection: the block answer). MODE says which.
private_answers() {
	for want in nas.home=192.168.1.10 printer.lab.home=192.168.1.11 media.plex.direct=192.168.1.20 \
		nas.fwd.example=192.168.1.40 evil.private.example=0.0.0.0; do
		out=$(lan_ask "${want%=*}" 192.0.2.1)
		[ "$out" = "${want#*=}" ] || fail "$1: ${want%=*} is '$out', not ${want#*=}: $(lan dig +time=2 +tries=1 @192.0.2.1 "${want%=*}" | grep -E 'status|IN')"
	done
}
# In upstream mode dnsmasq sends corp.example to the owner's server, whose
# private answers it still drops, rebind_allow or not.
owners_server_checked() {
	# A reply from dnsmasq first: just after a switch of mode procd may be
	# restarting it with the new hand-over, and a refused connection says
	# nothing of what it lets through (dig +short prints it as a line).
	tries=0
	until out=$(lan dig +time=2 +tries=1 @192.0.2.1 vpn.corp.example A 2>&1) && [ "${out#*status: }" != "$out" ]; do
		tries=$((tries + 1))
		[ "$tries" -lt 20 ] || fail "$1: dnsmasq did not answer vpn.corp.example: $(echo "$out" | head -n 3)"
		sleep 0.5
	done
	out=$(echo "$out" | grep -v '^;' | awk '$4 == "A" { print $5 }' | head -n 1)
	[ -z "$out" ] || fail "$1: dnsmasq let the owner's server's private answer through: '$out'"
	grep -q corp /tmp/dnsmasq*.d/hydradns.conf && fail "$1: corp.example exempted: $(cat /tmp/dnsmasq*.d/hydradns.conf)"
	in_log 'hydradns: warning: dnsmasq drops private answers under corp.example' || fail "$1: the clash is not logged"
}
# The service's table that closes dnsmasq's port (5354) in replace mode.
guarded() { nft list table inet hydradns_guard 2> /dev/null | grep -q 'dport 5354'; }
dnsmasq_moved() { netstat -lnu | grep -q ':5354 '; }
stopped_listening() { ! netstat -lnu | grep -q '127.0.0.1:5353 '; }
firewall_sum() { sha256sum /etc/config/firewall | cut -d' ' -f1; }
unchanged_configs() {
	[ "$(dhcp_sum)" = "$original" ] || fail "/etc/config/dhcp was written ($1): $(diff /tmp/dhcp.original /etc/config/dhcp)"
	[ "$(firewall_sum)" = "$firewall" ] || fail "/etc/config/firewall was written ($1)"
}

# The ISP's resolver (what netifd put in resolv.conf.auto) answers every name
# with a public address (the rebind protections drop documentation ones)
# but for a few domains, with private ones: plex.direct (rebind_allow),
# fwd.example (a config forward's), private.example (nobody's), corp.example
# (the owner's own server in dhcp); the "public resolver" answers
# 203.0.113.99 and logs what reaches it.
wan dnsmasq --no-resolv --no-hosts --user=root --listen-address=198.51.100.1 --bind-interfaces \
	--address=/#/93.184.215.14 --address=/plex.direct/192.168.1.20 --address=/fwd.example/192.168.1.40 \
	--address=/private.example/192.168.1.30 --address=/corp.example/10.0.0.1 --pid-file=/tmp/isp.pid || fail "ISP resolver"
wan dnsmasq --no-resolv --no-hosts --user=root --listen-address=203.0.113.53,2001:db8:3::53 --bind-interfaces \
	--address=/#/203.0.113.99 --address=/#/2001:db8:3::99 --log-queries --log-facility=/tmp/pub.log --pid-file=/tmp/pub.pid ||
	fail "public resolver"
# A TCP listener on the public host's port 853 (plain DNS is enough to see a connect).
wan dnsmasq --no-resolv --no-hosts --user=root --listen-address=203.0.113.53,2001:db8:3::53 --bind-interfaces \
	--port=853 --address=/#/203.0.113.99 --pid-file=/tmp/dot.pid || fail "port 853"

# The owner's own server for a domain of theirs, as docs/operation.md tells
# (dnsmasq's; what it answers passes dnsmasq's rebind protection only).
uci add_list dhcp.@dnsmasq[0].server=/corp.example/198.51.100.1
uci_written_dhcp
/etc/init.d/dnsmasq restart
original=$(dhcp_sum)
cp /etc/config/dhcp /tmp/dhcp.original
firewall=$(firewall_sum)
stock=$(ruleset)

step "a LAN device gets its address from dnsmasq, with its name"
lan udhcpc -i eth0 -x hostname:kids-tablet -q -n -t 10 -T 1 > /dev/null 2>&1 || fail "no DHCP lease"
lease=$(awk '$4 == "kids-tablet" { print $3 }' /tmp/dhcp.leases)
mac=$(awk '$4 == "kids-tablet" { print $2 }' /tmp/dhcp.leases)
[ -n "$lease" ] || fail "no lease for kids-tablet: $(cat /tmp/dhcp.leases)"
[ "$(lan_ask kids-tablet.lan 192.0.2.1)" = "$lease" ] || fail "the router's dnsmasq does not know kids-tablet.lan"

step "install (${PKG_INSTALL:-opkg}): force_dns on as shipped"
case "${PKG_INSTALL:-opkg}" in
	opkg) opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/install.out 2>&1 ;;
	# From a repository, as a feed's: `apk fix --reinstall` below takes
	# the package from there (one added from a file is "unavailable").
	apk)
		mkdir -p /tmp/repo
		for f in "$PKGS"/hydradns-*-r3_x86_64.apk; do cp "$f" "/tmp/repo/$(basename "${f%_x86_64.apk}").apk"; done
		apk mkndx --allow-untrusted --output /tmp/repo/packages.adb /tmp/repo/*.apk > /dev/null &&
			apk add --initdb --allow-untrusted -X /tmp/repo/packages.adb hydradns > /tmp/install.out 2>&1
		;;
esac || fail "install: $(cat /tmp/install.out)"
check_daemon
uci add_list hydradns.@blocklist[1].domain=blocked.example

uci commit hydradns
reload_config
wait_for 15 0.0.0.0 ask blocked.example 127.0.0.1 || fail "blocked.example not blocked through dnsmasq"
wait_until 15 rules_at_least 4 || fail "no force-DNS rules in fw4: $(nft list table inet fw4 | grep -i hydradns)"
unchanged_configs "install"
grep -q '^server=127.0.0.1#5353$' /tmp/dnsmasq*.d/hydradns.conf || fail "no file in dnsmasq's conf-dir: $(ls /tmp/dnsmasq*.d)"
grep -qx 'strip-subnet' /var/etc/dnsmasq.conf.* /tmp/dnsmasq*.d/hydradns.conf 2>/dev/null || fail "strip-subnet"

step "local names and allowed private answers reach the LAN through dnsmasq's rebind protection"
uci add hydradns record > /dev/null
uci set hydradns.@record[-1].name=nas.home
uci add_list hydradns.@record[-1].ip=192.168.1.10
uci add hydradns record > /dev/null
uci set hydradns.@record[-1].name='*.lab.home'
uci add_list hydradns.@record[-1].ip=192.168.1.11
uci add_list hydradns.main.rebind_allow=plex.direct
uci add_list hydradns.main.rebind_allow=corp.example
uci add hydradns forward > /dev/null
uci add_list hydradns.@forward[-1].domain=fwd.example
uci set hydradns.@forward[-1].server=198.51.100.1
uci commit hydradns
reload_config
wait_for 15 192.168.1.10 lan_ask nas.home 192.0.2.1 || fail "nas.home never reached the LAN: $(lan dig @192.0.2.1 nas.home | grep -E 'status|IN'); $(logread | grep -i rebind | tail -n 3)"
private_answers "upstream mode"
owners_server_checked "upstream mode"
grep -qx stop-dns-rebind /var/etc/dnsmasq.conf.* || fail "dnsmasq's rebind protection is off: $(cat /var/etc/dnsmasq.conf.*)"
unchanged_configs "local names"

step "a device asking a public resolver directly gets the gateway's answer (UDP, TCP, IPv4, IPv6)"
: > /tmp/pub.log
[ "$(lan_ask blocked.example 203.0.113.53)" = 0.0.0.0 ] || fail "UDP to 203.0.113.53 not redirected: $(lan dig @203.0.113.53 blocked.example)"
[ "$(lan_ask blocked.example 203.0.113.53 A +tcp)" = 0.0.0.0 ] || fail "TCP to 203.0.113.53"
[ "$(lan_ask blocked.example 2001:db8:3::53 AAAA)" = :: ] || fail "UDP to [2001:db8:3::53]"
[ "$(lan_ask blocked.example 2001:db8:3::53 AAAA +tcp)" = :: ] || fail "TCP to [2001:db8:3::53]"
[ "$(lan_ask wan.example 203.0.113.53)" = 93.184.215.14 ] || fail "an allowed name through the gateway"
grep -q 'query\[' /tmp/pub.log && fail "the public resolver saw queries: $(cat /tmp/pub.log)"
out=$(hydradns log --client kids-tablet --domain blocked.example)
echo "$out" | grep -q "kids-tablet" || fail "not logged under its DHCP name: $out / $(hydradns log --limit 5)"

step "a device naming itself another (its own Client Subnet and MAC options) is still itself"
# 192.0.2.200 is in a group whose list blocks forged.example; the tablet is not.
uci set hydradns.kids=group
uci add hydradns client > /dev/null
uci set hydradns.@client[-1].name=other-device
uci add_list hydradns.@client[-1].match=192.0.2.200
uci add_list hydradns.@client[-1].match=02:00:5e:00:00:c8
uci add_list hydradns.@client[-1].group=kids
uci add hydradns blocklist > /dev/null
uci set hydradns.@blocklist[-1].name=kids_list
uci add_list hydradns.@blocklist[-1].domain=forged.example
uci add_list hydradns.@blocklist[-1].group=kids
uci commit hydradns
reload_config
wait_until 15 in_log 'hydradns.*list .kids_list' || fail "the kids' list not loaded"
for server in 192.0.2.1 203.0.113.53; do
	out=$(lan dig +short +time=2 +tries=1 +subnet=192.0.2.200/32 +ednsopt=65001:02005e0000c8 "@$server" forged.example A)
	[ "$out" = 93.184.215.14 ] || fail "a device naming itself 192.0.2.200 got the other device's lists from $server: '$out'"
done
out=$(hydradns log --domain forged.example)
echo "$out" | grep -q "kids-tablet ($lease " || fail "not logged as itself: $out"
echo "$out" | grep -q "192.0.2.200\|other-device" && fail "logged as the device it named: $out"
# Naming itself the router (127.0.0.1, which is never rate-limited when it
# asks for itself) does not lift its rate limit either.
uci set hydradns.main.ratelimit=5
uci set hydradns.main.ratelimit_action=refuse
uci commit hydradns
reload_config
# Rounds of 20 new names at once, for 20 s at most: a reload applies once
# the lists thread has tried the downloads that failed (5 s here, no WAN DNS).
limited=0 round=0 until=$(($(date +%s) + 20))
while [ "${limited:-0}" = 0 ] && [ "$(date +%s)" -lt "$until" ]; do
	round=$((round + 1))
	# shellcheck disable=SC2016  # expanded by the inner shell
	lan sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		dig +short +time=1 +tries=1 +subnet=127.0.0.1/32 +ednsopt=65001:000000000001 @192.0.2.1 "r$1-$i.example" A &
	done; wait' sh "$round" > /dev/null 2>&1
	limited=$(hydradns stats --json | jsonfilter -e '@.counters.ratelimited')
done
[ "${limited:-0}" -gt 0 ] || fail "$((round * 20)) queries naming 127.0.0.1 through dnsmasq were never rate-limited"
echo "rate-limited: $limited of $((round * 20))"
out=$(hydradns log --domain r1-1.example)
echo "$out" | grep -q "kids-tablet ($lease " || fail "a device naming 127.0.0.1 not logged as itself: $out"
uci delete hydradns.main.ratelimit
uci delete hydradns.main.ratelimit_action
uci commit hydradns
reload_config

step "DNS over TLS and QUIC (port 853) is refused"
refused_853 203.0.113.53 || fail "TCP to 203.0.113.53:853 not refused"
refused_853 2001:db8:3::53 || fail "TCP to [2001:db8:3::53]:853 not refused"

step "an exempt device reaches the public resolver (by address, then by MAC)"
uci add_list hydradns.main.force_dns_exempt="$lease"
uci commit hydradns
reload_config
wait_for 15 203.0.113.99 lan_ask blocked.example 203.0.113.53 || fail "the exempt address is still redirected"
[ "$(lan_ask blocked.example 2001:db8:3::53 AAAA)" = :: ] || fail "its IPv6 address was not exempt"
uci delete hydradns.main.force_dns_exempt
uci add_list hydradns.main.force_dns_exempt="$mac"
uci commit hydradns
reload_config
wait_for 15 2001:db8:3::99 lan_ask blocked.example 2001:db8:3::53 AAAA || fail "the exempt MAC is still redirected (IPv6)"
[ "$(lan_ask blocked.example 203.0.113.53)" = 203.0.113.99 ] || fail "the exempt MAC is still redirected (IPv4)"
lan dig +tcp +short +time=2 +tries=1 -p 853 @203.0.113.53 x.example A | grep -qx 203.0.113.99 || fail "an exempt device's 853"
uci delete hydradns.main.force_dns_exempt
uci commit hydradns
reload_config
wait_for 15 0.0.0.0 lan_ask blocked.example 203.0.113.53 || fail "exemption not lifted"
unchanged_configs "exemptions"

step "stop removes every rule, start brings them back"
# A settings change whose reload procd still has queued (its trigger waits
# a second) when the owner stops the service: the stop must hold.
uci add_list hydradns.main.force_dns_exempt=198.51.100.77
uci commit hydradns
reload_config
/etc/init.d/hydradns stop
uci delete hydradns.main.force_dns_exempt
uci commit hydradns
wait_until 15 no_rules || fail "rules left after stop: $(nft list table inet fw4 | grep hydradns)"
wait_for 15 "$stock" ruleset || fail "ruleset after stop differs from stock: $(rules_diff)"
wait_for 15 203.0.113.99 lan_ask blocked.example 203.0.113.53 || fail "after stop: not straight to the public resolver"
[ "$(lan_ask wan.example 192.0.2.1)" = 93.184.215.14 ] || fail "after stop: dnsmasq does not answer on its own"
ls /tmp/dnsmasq*.d/hydradns.conf > /dev/null 2>&1 && fail "our file stayed in dnsmasq's conf-dir"
/etc/init.d/hydradns running && fail "the reload queued before the stop started the service again"
/etc/init.d/hydradns start
check_daemon
wait_until 15 rules_at_least 4 || fail "no rules after start"
wait_for 15 0.0.0.0 lan_ask blocked.example 203.0.113.53 || fail "after start: not redirected"
unchanged_configs "stop and start"

step "force_dns 0: fw4's ruleset as stock"
uci set hydradns.main.force_dns=0
uci commit hydradns
reload_config
wait_for 15 "$stock" ruleset || fail "force_dns 0: $(rules_diff)"
[ "$(lan_ask blocked.example 203.0.113.53)" = 203.0.113.99 ] || fail "force_dns 0 still redirects"
wait_for 15 0.0.0.0 ask blocked.example 192.0.2.1 || fail "force_dns 0: the router itself stopped filtering"
uci set hydradns.main.force_dns=1
uci commit hydradns
reload_config
wait_for 15 0.0.0.0 lan_ask blocked.example 203.0.113.53 || fail "force_dns 1 again"

step "the daemon hangs (SIGSTOP): dnsmasq answers on its own within 30 s, and says so"
pid=$(pid_of hydradns)
kill -STOP "$pid"
started=$(date +%s)
# A device keeps asking, as devices do.
wait_for 30 93.184.215.14 lan_ask blocked.example 192.0.2.1 || fail "no DNS 30 s after the daemon hung: $(logread | tail -n 20)"
echo "answered (unfiltered) after $(($(date +%s) - started)) s"
in_log 'hydradns.*DNS is unfiltered' || fail "no 'unfiltered' line in the log"
out=$(hydradns status)
echo "$out" | grep -q "^DNS          UNFILTERED since" || fail "status does not say so: $out"
[ "$(lan_ask wan.example 203.0.113.53)" = 93.184.215.14 ] || fail "redirected queries unanswered while unfiltered"
kill -CONT "$pid"
started=$(date +%s)
wait_for 30 0.0.0.0 lan_ask blocked.example 192.0.2.1 || fail "not filtered again 30 s after SIGCONT"
echo "filtered again after $(($(date +%s) - started)) s"
in_log 'hydradns.*DNS is filtered again' || fail "no 'filtered again' line in the log"
[ "$(pid_of hydradns)" = "$pid" ] || fail "the daemon was restarted"
private_answers "filtered again"
unchanged_configs "fail-open"

step "its port is taken and it cannot start: dnsmasq answers within 30 s; the port freed, filtered again"
# Another program takes 127.0.0.1:5353 in the 5 s before procd respawns it.
kill -9 "$pid"
wait_until 5 stopped_listening
dnsmasq --conf-file=/dev/null --port=5353 --listen-address=127.0.0.1 --bind-interfaces --no-resolv --no-hosts \
	--address=/#/127.0.0.9 --user=root --pid-file=/tmp/squatter.pid || fail "could not take the port"
started=$(date +%s)
wait_for 30 93.184.215.14 lan_ask blocked.example 192.0.2.1 || fail "no DNS 30 s after the port was taken"
echo "answered (unfiltered) after $(($(date +%s) - started)) s"
kill "$(cat /tmp/squatter.pid)"
started=$(date +%s)
wait_for 30 0.0.0.0 lan_ask blocked.example 192.0.2.1 || fail "not filtered again 30 s after the port was freed"
echo "filtered again after $(($(date +%s) - started)) s"
check_daemon
unchanged_configs "port taken"

step "replace mode hangs: dnsmasq answers the LAN and the router itself within 30 s; back"
uci set hydradns.main.dnsmasq_mode=replace
uci delete hydradns.main.listen
uci add_list hydradns.main.listen='0.0.0.0:53'
uci commit hydradns
reload_config
# The guard is in place before dnsmasq moves to its own port: probed the
# moment dnsmasq listens there (fw4's rules, which follow a start by a
# second or more, once left that moment open).
wait_until 30 dnsmasq_moved || fail "replace mode: dnsmasq not on its own port"
guarded || fail "replace mode: dnsmasq on its own port before the guard: $(nft list ruleset | grep -c 5354)"
no_side_door "replace mode, as dnsmasq moved"
# The restart is procd's, after reload_config returns (and upstream mode
# blocks the same names): wait for the daemon on port 53.
wait_until 30 in_log 'hydradns.*listening on 0\.0\.0\.0:53' || fail "replace mode: not on port 53"
check_daemon
pid=$(pid_of hydradns)
wait_for 30 0.0.0.0 lan_ask blocked.example 192.0.2.1 || fail "replace mode: the LAN not answered by HydraDNS"
wait_for 15 0.0.0.0 ask blocked.example 127.0.0.1 || fail "replace mode: the router not answered by HydraDNS"
wait_for 15 0.0.0.0 lan_ask blocked.example 203.0.113.53 || fail "replace mode: force DNS"
# dnsmasq listens on every address of the router, on its own port, and
# answers from the WAN's resolvers: nothing of the LAN reaches it but
# through HydraDNS, which forwards the LAN's names to it over loopback.
no_side_door "replace mode"
private_answers "replace mode"
[ "$(lan_ask kids-tablet.lan 192.0.2.1)" = "$lease" ] || fail "replace mode: the LAN's names through HydraDNS"
[ "$(ask kids-tablet.lan 127.0.0.1 5354)" = "$lease" ] || fail "replace mode: dnsmasq's port on loopback"
kill -STOP "$pid"
started=$(date +%s)
wait_for 30 93.184.215.14 lan_ask blocked.example 192.0.2.1 || fail "replace mode: no DNS 30 s after the daemon ($pid) hung"
echo "answered (unfiltered) after $(($(date +%s) - started)) s"
[ "$(lan_ask wan.example 203.0.113.53)" = 93.184.215.14 ] || fail "replace mode: redirected queries unanswered while unfiltered"
# Fail-open sends the LAN's port 53 to dnsmasq's port, and nothing else.
no_side_door "replace mode, failed open"
# The router's own lookups (resolv.conf: 127.0.0.1, ::1) reach dnsmasq too.
[ "$(ask blocked.example 127.0.0.1)" = 93.184.215.14 ] || fail "replace mode: the router's own lookups unanswered while unfiltered"
kill -CONT "$pid"
started=$(date +%s)
wait_for 30 0.0.0.0 lan_ask blocked.example 192.0.2.1 || fail "replace mode: not filtered again 30 s after SIGCONT"
echo "filtered again after $(($(date +%s) - started)) s"
wait_for 15 0.0.0.0 ask blocked.example 127.0.0.1 || fail "replace mode: the router's lookups not filtered again"
nft list table inet hydradns_unfiltered > /dev/null 2>&1 && fail "the router's redirect stayed after filtered again"

step "replace mode with force_dns 0: dnsmasq's port still answers the LAN nothing"
uci set hydradns.main.force_dns=0
uci commit hydradns
reload_config
wait_for 15 203.0.113.99 lan_ask blocked.example 203.0.113.53 || fail "replace mode, force_dns 0: still redirected"
no_side_door "replace mode, force_dns 0"
[ "$(lan_ask blocked.example 192.0.2.1)" = 0.0.0.0 ] || fail "replace mode, force_dns 0: port 53"

# The watchdog's probe goes to the socket a flood fills: a daemon that reads
# its flood is overloaded, not hung, and DNS stays filtered. With opkg only
# (net-apk runs this script too): the package manager changes nothing here.
if [ "${PKG_INSTALL:-opkg}" = opkg ]; then
	step "replace mode: a LAN device floods port 53 for 15 s with names never asked: DNS stays filtered"
	n=$(logged 'DNS is unfiltered')
	# Eight senders (four did not fail the old watchdog open here, on 2
	# cores), 15 s and 200,000,000 queries at most.
	sent=$(lan /rig/mnt/flood 192.0.2.1 53 15 200000000 8) || fail "the flooder: $sent"
	wait_for 5 0.0.0.0 lan_ask blocked.example 192.0.2.1 || fail "blocked.example not blocked within 5 s of the flood's end"
	[ "$(logged 'DNS is unfiltered')" = "$n" ] || fail "a flood of $sent queries failed DNS open: $(logread -e hydradns | grep -i 'unfiltered\|overloaded' | tail -n 5)"
	echo "flood: $sent queries in 15 s; the watchdog said 'overloaded' $(logged overloaded) times"
fi
uci set hydradns.main.force_dns=1
uci set hydradns.main.dnsmasq_mode=upstream
uci delete hydradns.main.listen
uci add_list hydradns.main.listen='127.0.0.1:5353'
uci commit hydradns
n=$(logged "listening on 127.0.0.1:5353")
reload_config
wait_until 30 more_logged "listening on 127.0.0.1:5353" "$n" || fail "not back in upstream mode"
wait_for 30 0.0.0.0 lan_ask blocked.example 192.0.2.1 || fail "back in upstream mode"
wait_for 15 192.168.1.10 lan_ask nas.home 192.0.2.1 || fail "back in upstream mode: nas.home"
private_answers "back in upstream mode"
owners_server_checked "back in upstream mode"
guarded && fail "back in upstream mode: the guard of dnsmasq's old port stayed"
unchanged_configs "replace mode"

# opkg's reinstall is a removal (its scripts as `opkg remove` runs them),
# then an install; apk's runs the upgrade scripts. Either way the LAN keeps
# filtered DNS, with at most a moment unanswered.
step "reinstall (${PKG_INSTALL:-opkg}) while a LAN device asks every 100 ms"
pid=$(pid_of hydradns)
dnsmasq_pid=$(pid_of dnsmasq)
case "${PKG_INSTALL:-opkg}" in
	opkg)
		stream_around "reinstall (opkg)" 192.0.2.1 blocked.example stream.example \
			opkg install --force-reinstall "$PKGS"/hydradns_*-3_x86_64.ipk
		grep -q '^Removing package hydradns' /tmp/stream.out && grep -q '^Installing hydradns' /tmp/stream.out ||
			fail "not reinstalled: $(cat /tmp/stream.out)"
		;;
	apk)
		stream_around "reinstall (apk)" 192.0.2.1 blocked.example stream.example \
			apk fix --reinstall --allow-untrusted -X /tmp/repo/packages.adb hydradns
		grep -q '^(1/1) Reinstalling hydradns' /tmp/stream.out || fail "not reinstalled: $(cat /tmp/stream.out)"
		;;
esac
check_daemon
# The same binary: the daemon answered throughout, and so did dnsmasq.
[ "$(pid_of hydradns)" = "$pid" ] || fail "the reinstall restarted the daemon"
[ "$(pid_of dnsmasq)" = "$dnsmasq_pid" ] || fail "the reinstall restarted dnsmasq"
[ -L /etc/rc.d/S18hydradns ] || fail "disabled by the reinstall"
wait_until 15 rules_at_least 4 || fail "no force-DNS rules after the reinstall"
wait_for 15 0.0.0.0 lan_ask blocked.example 203.0.113.53 || fail "not redirected after the reinstall"
unchanged_configs "reinstall"
if [ "${PKG_INSTALL:-opkg}" = opkg ]; then
	step "upgrade to the next release (opkg) while a LAN device asks every 100 ms"
	stream_around "upgrade (opkg)" 192.0.2.1 blocked.example stream.example opkg install "$PKGS"/hydradns_*-4_x86_64.ipk
	opkg list-installed | grep -q '^hydradns - .*-4$' || fail "not upgraded: $(opkg list-installed | grep hydradns)"
	check_daemon
	unchanged_configs "upgrade"
fi

step "removal: rules gone, dnsmasq on its own, configs as they were"
case "${PKG_INSTALL:-opkg}" in
	opkg) opkg remove hydradns > /tmp/remove.out 2>&1 ;;
	apk) apk del hydradns > /tmp/remove.out 2>&1 ;;
esac || fail "remove: $(cat /tmp/remove.out)"
wait_for 30 "$stock" ruleset || fail "ruleset after removal differs from stock: $(rules_diff)"
wait_for 15 93.184.215.14 lan_ask blocked.example 192.0.2.1 || fail "dnsmasq does not answer after removal"
unchanged_configs "removal"
echo "PASS ${PASS_NAME:-net}"
