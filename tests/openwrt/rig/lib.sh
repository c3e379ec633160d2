# shellcheck shell=ash
# shellcheck disable=SC2034,SC2012  # PKGS is for the scenarios; ls -i of fixed paths
# Helpers for the checks that run inside tests/openwrt/userland (busybox
# ash, OpenWrt's procd, ubus, uci, opkg, apk, logd and dnsmasq init script).
# Sourced by each scenario; /rig/mnt holds the packages and these scripts.

PKGS=/rig/mnt/pkgs
# With run.sh --net: CMD in the LAN client's or the WAN host's network
# namespace, as the rig's /rig/lan and /rig/wan do (this copy of the rig has
# /rig/wan as a plain file holding the word "lan", a symlink flattened).
lan() { nsenter --net=/var/run/netns/lan "$@"; }
wan() { nsenter --net=/var/run/netns/wan "$@"; }
step() { echo "-- $*"; }
fail() {
	echo "FAIL: $*"
	echo "---- logread"
	logread | grep -v "dnsmasq\(-dhcp\)\?\[" | tail -n 40
	exit 1
}

# Runs until CMD succeeds or SECONDS pass.
wait_until() {
	local secs=$1 i=0
	shift
	while ! "$@" > /dev/null 2>&1; do
		i=$((i + 1))
		[ $i -le $((secs * 10)) ] || return 1
		sleep 0.1
	done
}

# Runs until CMD prints EXPECTED or SECONDS pass (CMD runs afresh each time).
wait_for() {
	local secs=$1 want=$2 i=0
	shift 2
	until [ "$("$@" 2> /dev/null)" = "$want" ]; do
		i=$((i + 1))
		[ $i -le $((secs * 10)) ] || return 1
		sleep 0.1
	done
}

# The pid procd gives for a service's first instance (empty when not running);
# hydradns's daemon, not its watchdog.
pid_of() {
	local which='[*]'
	[ "$1" != hydradns ] || which=.instance1
	ubus call service list "{\"name\":\"$1\"}" 2>/dev/null | jsonfilter -e "@['$1'].instances$which.pid" | head -n 1
}
running() { [ -n "$(pid_of "$1")" ]; }
stopped() { [ -z "$(pid_of "$1")" ]; }
respawned() { [ -n "$(pid_of "$1")" ] && [ "$(pid_of "$1")" != "$2" ]; }

# The first address dig gets for NAME from SERVER (port 53 unless given).
ask() {
	dig +short +time=2 +tries=1 -p "${3:-53}" "@$2" "$1" A 2>/dev/null | head -n 1
}

# Times the daemon logged TEXT so far.
logged() { logread -e hydradns | grep -cF "$1"; }
# Whether the log has a line matching the extended regex (logread -e
# itself exits 0 whether or not anything matched).
in_log() { logread | grep -qE "$1"; }

# A stand-in for the ISP's resolver (the rig has no WAN): a second dnsmasq,
# at ADDR:PORT: 127.0.0.2:53 is one netifd's resolv.conf.auto can name (it
# has no ports); replace mode needs 0.0.0.0:53 free, so another port there.
# It knows wan.example (with a public address: dnsmasq's rebind protection
# drops the documentation ranges); everything else gets NXDOMAIN.
start_wan_resolver() {
	local at=$1
	dnsmasq --conf-file=/dev/null --port="${at##*:}" --listen-address="${at%:*}" --bind-interfaces \
		--no-resolv --no-hosts --address=/wan.example/93.184.215.14 --address=/#/ \
		--pid-file=/tmp/wan-resolver.pid --user=root 2>&1 || fail "WAN resolver"
}

# As netifd writes it once the WAN is up: a temporary file renamed over it.
wan_up() {
	printf '# Interface wan\nnameserver 127.0.0.2\n' > /tmp/resolv.conf.d/resolv.conf.auto.tmp
	mv /tmp/resolv.conf.d/resolv.conf.auto.tmp /tmp/resolv.conf.d/resolv.conf.auto
}

# A file's inode, modification time and checksum: uci commit renames a new
# file over the old one, so any write changes the first two.
file_id() { echo "$(ls -i "$1" | awk '{ print $1 }') $(date -r "$1" +%s) $(sha256sum < "$1")"; }

# The rig's /etc/config/dhcp is written by hand, with a comment; a router's
# is written by uci (uci-defaults, LuCI), which drops comments. Rewrites it
# as uci does, so that byte-for-byte comparisons compare our changes only.
uci_written_dhcp() {
	uci set dhcp.rig_canonical=rig
	uci commit dhcp
	uci delete dhcp.rig_canonical
	uci commit dhcp
}

# dnsmasq's settings as a file, for byte-for-byte comparisons.
dhcp_sum() { sha256sum /etc/config/dhcp | cut -d' ' -f1; }

# The daemon is up, answers on 127.0.0.1:5353 (blocked names from the
# shipped config's inline list, added by the scenario), and runs unprivileged.
check_daemon() {
	local pid="" status uid
	wait_until 10 running hydradns || fail "hydradns is not running: $(ubus call service list '{"name":"hydradns"}')"
	uid=$(id -u hydradns)
	# It binds its sockets as root, then drops to the user: wait for that,
	# in the process that stays (an install or upgrade may restart it once
	# more: pid_of is asked again each time).
	wait_until 10 dropped_to "$uid" ||
		fail "not running as hydradns ($uid): pid '$pid' $(echo "$status" | grep Uid)"
	echo "$status" | grep -q '^CapEff:	0000000000000000$' || fail "has capabilities: $(echo "$status" | grep Cap)"
	wait_until 10 in_log "hydradns\[$pid\]: ready with" || fail "no 'ready' from $pid in the log"
}

# The daemon's pid and its /proc status, in the caller's $pid and $status,
# once its process runs as UID. One read of the status: the process may be
# restarted (an upgrade's reload) and its /proc entry gone a moment later,
# so the capabilities are checked in the same snapshot as the user.
dropped_to() {
	pid=$(pid_of hydradns)
	[ -n "$pid" ] && status=$(cat "/proc/$pid/status" 2> /dev/null) &&
		echo "$status" | grep -q "^Uid:	$1	$1	$1	$1\$"
}

# A factory-fresh router whose WAN is up: dnsmasq's settings noted in
# $original (and /tmp/dhcp.original), the WAN's resolver on 127.0.0.2:53 and
# named in resolv.conf.auto.
router_with_wan() {
	uci_written_dhcp
	original=$(dhcp_sum)
	cp /etc/config/dhcp /tmp/dhcp.original
	start_wan_resolver 127.0.0.2:53
	wan_up
}

# Blocks NAME the owner's way: uci, then reload_config.
block_with_uci() {
	uci add_list hydradns.@blocklist[1].domain="$1"
	uci commit hydradns
	reload_config
	wait_for 10 0.0.0.0 ask "$1" 127.0.0.1 || fail "$1 not blocked"
}

# Runs the package manager's upgrade (the arguments), then checks what an
# upgrade must do: the new binary runs, dnsmasq is not restarted and
# /etc/config/dhcp not written, the owner's config (kept.example blocked,
# see block_with_uci) is kept, and the service stays enabled.
upgrade_checked() {
	local dnsmasq_pid pid dhcp new
	dnsmasq_pid=$(pid_of dnsmasq)
	pid=$(pid_of hydradns)
	dhcp=$(file_id /etc/config/dhcp)
	"$@" > /tmp/upgrade.out 2>&1 || fail "$*: $(cat /tmp/upgrade.out)"
	wait_until 10 respawned hydradns "$pid" || fail "still the old process"
	check_daemon
	new=$(pid_of hydradns)
	[ "$(md5sum < "/proc/$new/exe")" = "$(md5sum < /usr/sbin/hydradns)" ] || fail "not running the new binary"
	[ "$(pid_of dnsmasq)" = "$dnsmasq_pid" ] || fail "the upgrade restarted dnsmasq"
	[ "$(file_id /etc/config/dhcp)" = "$dhcp" ] || fail "the upgrade wrote /etc/config/dhcp"
	uci -q get hydradns.@blocklist[1].domain | grep -q kept.example || fail "the owner's config was replaced"
	wait_for 10 0.0.0.0 ask kept.example 127.0.0.1 || fail "kept.example after the upgrade"
	[ -L /etc/rc.d/S18hydradns ] || fail "disabled by the upgrade"
}

# A LAN device asking SERVER once every 100 ms while CMD runs (the rest of
# the arguments), from 3 s before it until 8 s after it ended, each time a
# name never asked before (no cache answers for the gateway): one under
# BLOCKED, which the gateway blocks, then one under ALLOWED, which it does
# not, and so on; 1,200 queries (2 minutes) at most. Fails when a blocked
# name is answered with another address than 0.0.0.0, or when more than 10
# queries in a row get no address (no reply within 1 s, SERVFAIL, REFUSED,
# no answer); prints what it counted as "stream: LABEL: …".
stream_around() {
	local label=$1 server=$2 blocked=$3 allowed=$4 stop=/tmp/stream.stop dir=/tmp/stream n i name
	shift 4
	rm -rf "$dir" "$stop"
	mkdir -p "$dir"
	(
		i=0
		while [ $i -lt 1200 ] && [ ! -f "$stop" ]; do
			i=$((i + 1))
			name=q$i.$allowed
			[ $((i % 2)) = 0 ] || name=q$i.$blocked
			lan dig +time=1 +tries=1 "@$server" "$name" A > "$dir/$i" 2>&1 &
			sleep 0.1
		done
		wait
	) &
	sleep 3
	"$@" > /tmp/stream.out 2>&1 || { touch "$stop"; wait; fail "$*: $(cat /tmp/stream.out)"; }
	sleep 8
	touch "$stop"
	wait
	n=$(ls "$dir" | wc -l)
	i=0
	# One line a query, in order: its number, b (blocked) or a (allowed),
	# what came back (the first address, else the status, else "none").
	while [ $i -lt "$n" ]; do
		i=$((i + 1))
		awk -v i=$i '/^;; ->>HEADER<<-/ { s = $6; sub(",", "", s) }
			!/^;/ && $4 == "A" && a == "" { a = $5 }
			END { print i, (i % 2 ? "b" : "a"), (a != "" ? a : (s != "" ? s : "none")) }' "$dir/$i"
	done > /tmp/stream.txt
	awk -v label="$label" '
		{ addr = $3 ~ /^[0-9.]+$/ }
		$2 == "b" && addr && $3 != "0.0.0.0" { leaked++ }
		{ ok = addr && ($2 == "b") == ($3 == "0.0.0.0") }
		!ok { lost++; run++; if (run > most) most = run; if (shown++ < 30) bad = bad " " $0 ";" }
		ok { run = 0 }
		END {
			printf "stream: %s: %d queries, %d unanswered (at most %d in a row), %d blocked names answered\n", label, NR, lost, most, leaked
			if (bad != "") print "  not as expected:" bad
			exit (leaked > 0 || most > 10 || NR < 100)
		}' /tmp/stream.txt || fail "$label: a blocked name answered, or too many unanswered in a row"
}

# tests/openwrt/luci.sh's turn: /rig/ready tells the host to drive LuCI,
# /rig/stop (its verdict) that it has finished. EACH (a command; `:` for
# none) runs every half second meanwhile. Fails unless the host's checks
# passed.
host_drives_luci() {
	local i=0
	touch /rig/ready
	echo "-- ready: the host drives LuCI now"
	until [ -f /rig/stop ]; do
		i=$((i + 1))
		[ $i -le 600 ] || fail "the host never finished"
		"$1"
		sleep 0.5
	done
	grep -qx pass /rig/stop || fail "the host's checks failed"
}
