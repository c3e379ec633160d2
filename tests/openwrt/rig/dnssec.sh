#!/bin/sh
# shellcheck disable=SC2015  # A && B || fail is meant
# Issue 61 as the household meets it (run.sh --net): the ISP's resolver
# passes DNSSEC records on but validates nothing (a recursive Unbound in
# the WAN namespace at 198.51.100.1, the address netifd's resolv.conf.auto
# names, in front of an authoritative one serving tests/dnssec/zones.sh's
# signed zones; tests/openwrt/rig.sh puts both in /rig/mnt). hydradns is
# installed as shipped (dnsmasq_mode upstream: the LAN asks dnsmasq), the
# owner turns `dnssec` on with uci and reloads, as LuCI's Save & Apply
# does, and a LAN device asks with dig's flags; then the router's clock
# becomes known good through the ntp hotplug, as busybox ntpd's does.
#   /rig/mnt/dnssec.sh
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh
Z=/rig/mnt/dnssec

step "the ISP's resolver: no validation, DNSSEC records passed on"
mkdir -p /tmp/ub
printf '.\t3600000\tIN\tNS\tns.example.\nns.example.\t3600000\tIN\tA\t127.83.0.53\n' > /tmp/ub/hints.zone
unbound_conf() { # PORT INTERFACE
	printf 'server:\n\tinterface: %s\n\tport: %s\n\tso-reuseport: no\n\tdo-daemonize: no\n' "$2" "$1"
	printf '\tusername: ""\n\tchroot: ""\n\tdirectory: "/tmp/ub"\n\tpidfile: ""\n\tuse-syslog: no\n'
	printf '\tlogfile: "/tmp/ub/%s.log"\n\tnum-threads: 1\n\tdo-ip6: no\n\taccess-control: 0.0.0.0/0 allow\n' "$1"
	printf '\tdo-not-query-localhost: no\n\tqname-minimisation: no\n\tmodule-config: "iterator"\n'
}
{
	unbound_conf 5300 127.0.0.1
	printf '\troot-hints: "/tmp/ub/hints.zone"\n'
	while read -r zone file; do
		printf 'auth-zone:\n\tname: "%s"\n\tzonefile: "%s"\n\tfor-downstream: yes\n\tfor-upstream: no\n' "$zone" "$Z/$file"
	done < $Z/zones.list
} > /tmp/ub/auth.conf
{
	unbound_conf 53 198.51.100.1
	# A stub per zone: a DS query goes to the parent's side of the cut.
	while read -r zone _; do
		printf 'stub-zone:\n\tname: "%s"\n\tstub-addr: 127.0.0.1@5300\n' "$zone"
	done < $Z/zones.list
} > /tmp/ub/recursive.conf
for c in auth recursive; do
	wan env LD_LIBRARY_PATH=/rig/mnt/unbound/lib /rig/mnt/unbound/unbound -c /tmp/ub/$c.conf > /tmp/ub/$c.out 2>&1 &
done
isp_signs() { dig +dnssec +time=1 +tries=1 @198.51.100.1 www.alg8.example TXT | grep -q 'RRSIG.*TXT'; }
wait_until 10 isp_signs || fail "the ISP's resolver: $(cat /tmp/ub/*.out; dig +dnssec @198.51.100.1 www.alg8.example TXT)"
dig +dnssec +time=1 +tries=1 @198.51.100.1 www.alg8.example TXT | grep -q '^;; flags:.* ad[ ;]' && fail "the ISP's resolver sets AD"

step "a LAN device, and hydradns installed as shipped"
lan udhcpc -i eth0 -x hostname:laptop -q -n -t 10 -T 1 > /dev/null 2>&1 || fail "no DHCP lease"
opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/install.out 2>&1 || fail "opkg install: $(cat /tmp/install.out)"
check_daemon

step "the owner turns DNSSEC on (uci, then the reload LuCI's apply makes)"
uci set hydradns.main.dnssec=1
# The test root's anchor (issue 61: it replaces the built-in root keys).
uci set hydradns.main.trust_anchor_file=$Z/root.anchor
# The zones' addresses are documentation ones, which dnsmasq's rebind
# protection drops; rebind_allow has the init script let them through.
uci add_list hydradns.main.rebind_allow=example
uci commit hydradns
pid=$(pid_of hydradns)
reload_config
wait_until 15 sh -c 'hydradns status | grep -q "^dnssec "' || fail "no dnssec line in status: $(hydradns status)"
hydradns status | grep '^dnssec ' | grep -q 'clock is known good' || fail "status: $(hydradns status)"
wait_until 5 in_log 'hydradns.*DNSSEC: signature dates are not checked until the clock is known good' ||
	fail "the log does not say that signature dates wait for the clock"
in_log 'hydradns.*DNSSEC: validating, 1 trust anchors from /rig/mnt/dnssec/root.anchor' || fail "the log names no anchors"
[ "$(pid_of hydradns)" = "$pid" ] || echo "-- (the reload restarted the daemon)"

# dig's answer to the LAN device: "STATUS FLAGS RRSIGS EDE" (FLAGS: ad or
# -, RRSIGS: in the answer section, EDE: the codes, comma-separated, or -).
got() {
	lan dig +time=2 +tries=1 @192.0.2.1 "$@" 2> /dev/null | awk '
		/^;; ->>HEADER<<-/ { s = $6; sub(",", "", s) }
		/^;; flags:/ { ad = ($0 ~ / ad[ ;]/) ? "ad" : "-" }
		/^;; ANSWER SECTION:/ { a = 1; next }
		/^$/ { a = 0 }
		a && $4 == "RRSIG" { n++ }
		/^; EDE: / { e = e (e == "" ? "" : ",") $3 }
		END { print (s == "" ? "none" : s), (ad == "" ? "-" : ad), n + 0, (e == "" ? "-" : e) }'
}
expect() { # WANT DIG-ARGS…
	want=$1
	shift
	wait_for 5 "$want" got "$@" || fail "dig $*: $(got "$@"), not $want: $(lan dig +time=2 +tries=1 @192.0.2.1 "$@")"
	echo "   dig $*: $want"
}
step "a LAN device's flags (RFC 4035, RFC 6840), through dnsmasq"
expect "NOERROR ad 1 -" +dnssec www.alg8.example TXT
expect "NOERROR - 0 -" +nodnssec +noadflag www.alg13.example TXT
expect "NOERROR ad 0 -" +nodnssec +adflag www.alg14.example TXT
expect "NOERROR ad 1 -" +dnssec www.alg14.example TXT
# Unsigned (insecure): answered, no AD; the household's DNS goes on.
expect "NOERROR - 0 -" +adflag www.unsigned.example TXT
# Bogus: SERVFAIL with the reason; with CD the data, no AD; then without CD
# SERVFAIL again (the CD answer is never served to it).
expect "SERVFAIL - 0 6" +dnssec www.badsig.example A
expect "SERVFAIL - 0 10" www.norrsig.example A
expect "NOERROR - 1 -" +dnssec +cd www.badsig.example A
[ "$(lan dig +short +cd +time=2 +tries=1 @192.0.2.1 www.badsig.example A)" = 192.0.2.1 ] || fail "CD: no data"
expect "SERVFAIL - 0 6" +dnssec www.badsig.example A
expect "NOERROR ad 1 -" +dnssec www.badsig.example AAAA

step "what the owner sees: the counts, and why a name is bogus"
stats=$(hydradns stats --json)
for k in dnssec_secure dnssec_insecure dnssec_bogus; do
	n=$(echo "$stats" | jsonfilter -e "@.counters.$k")
	[ "${n:-0}" -gt 0 ] || fail "$k not counted: $stats"
done
why=$(hydradns check --live www.badsig.example)
echo "$why" | grep -q '^dnssec: bogus (EDE 6: ' || fail "check --live: $why"

step "the boot: the clock not yet known good, then NTP sets it"
# A name whose only fault is its dates (as every name is to a router whose
# clock is years off): answered to the router itself, as NTP's servers
# must be before the clock can be set.
[ "$(dig +short +time=2 +tries=1 @127.0.0.1 www.future.example A)" = 192.0.2.1 ] ||
	fail "the router's own lookup before the clock: $(dig +time=2 +tries=1 @127.0.0.1 www.future.example A)"
# Secure, as Unbound's val-override-date -1 and dnsmasq's
# --dnssec-no-timecheck say while they wait for the clock.
expect "NOERROR ad 1 -" +dnssec www.expired.example A
ACTION=stratum /sbin/hotplug-call ntp || fail "hotplug-call ntp"
[ -e /var/state/ntpd-synced ] || fail "the ntp hotplug did not mark the clock"
# Within 10 s, without a restart: asked every half second, 21 times.
i=0
until [ "$(got +dnssec www.expired.example A)" = "SERVFAIL - 0 7" ]; do
	i=$((i + 1))
	[ $i -le 21 ] || fail "still answered 10 s after the clock was set: $(got +dnssec www.expired.example A)"
	sleep 0.5
done
echo "   bogus (EDE 7) $((i / 2)).$((i % 2 * 5)) s after the clock was set"
expect "SERVFAIL - 0 8" +dnssec www.future.example A
hydradns status | grep -q '^dnssec ' && fail "the status line stayed: $(hydradns status)"
expect "NOERROR ad 1 -" +dnssec www.alg8.example TXT
echo "PASS dnssec"
