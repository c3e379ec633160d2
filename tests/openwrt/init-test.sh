#!/bin/sh
# Runs openwrt/files/hydradns.init under busybox ash against a scratch root
# holding OpenWrt's default dhcp config and our default hydradns config, with
# the real `uci` command (tests/openwrt/build-uci.sh) and the real hydradns
# binary; rc.common, procd and dnsmasq's init script are stand-ins that
# record what they are asked. Checks what the script declares to procd and
# what it does to dnsmasq's settings in every mode, and that it undoes it.
#   busybox ash tests/openwrt/init-test.sh
#   env: HYDRADNS_BIN (default target/debug/hydradns), UCI_BIN (built if unset)
# shellcheck shell=ash
# shellcheck disable=SC2317,SC2329  # the stand-in functions are called by the sourced script
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}

bin=${HYDRADNS_BIN:-$repo/target/debug/hydradns}
[ -x "$bin" ] || fail "$bin not built (cargo build)"
if [ -z "${UCI_BIN:-}" ]; then
	UCI_BIN="$work/uci"
	"$here/build-uci.sh" "$UCI_BIN"
fi

# ---- a scratch router -------------------------------------------------------
HYDRADNS_ROOT="$work/root"
export HYDRADNS_ROOT
conf="$HYDRADNS_ROOT/etc/config"
mkdir -p "$HYDRADNS_ROOT/usr/sbin" "$conf" "$work/save"
ln -s "$bin" "$HYDRADNS_ROOT/usr/sbin/hydradns"

# ---- stand-ins --------------------------------------------------------------
uci() { "$UCI_BIN" -c "$conf" -t "$work/save" "$@"; }
procd_open_instance() { echo "open_instance" >> "$work/procd"; }
procd_set_param() { echo "param $*" >> "$work/procd"; }
procd_close_instance() { echo "close_instance" >> "$work/procd"; }
procd_send_signal() { echo "signal $*" >> "$work/procd"; }
procd_add_reload_trigger() { echo "reload_trigger $*" >> "$work/procd"; }
procd_add_raw_trigger() { echo "raw_trigger $*" >> "$work/procd"; }
logger() { echo "logger $*" >> "$work/calls"; }
dnsmasq_init() { echo "dnsmasq $*" >> "$work/calls"; }
# Whether the package's user exists: switched per test.
id() { [ -f "$work/user-exists" ]; }
chown() { echo "chown $*" >> "$work/calls"; }
# rc.common's start and stop call these around procd.
start() {
	echo "start" >> "$work/calls"
	start_service
}
stop() {
	echo "stop" >> "$work/calls"
	stop_service
}

# The script restarts dnsmasq by its path: test a copy that calls the recorder.
sed "s|/etc/init.d/dnsmasq|dnsmasq_init|g" "$repo/openwrt/files/hydradns.init" > "$work/hydradns.init"
run() { # $1 = function of the init script to call, as rc.common would
	(
		# shellcheck source=/dev/null
		. "$work/hydradns.init"
		"$1"
	)
}

reset() {
	: > "$work/procd"
	: > "$work/calls"
	rm -rf "${HYDRADNS_ROOT:?}/etc/hydradns" "${HYDRADNS_ROOT:?}/var" "$work/save"/*
	cp "$repo/openwrt/files/hydradns.config" "$conf/hydradns"
	# OpenWrt's default /etc/config/dhcp, plus a per-domain server of the
	# user's and a guest pool that names its own DNS server.
	cat > "$conf/dhcp" <<-'EOF'
		config dnsmasq
			option domainneeded '1'
			option localise_queries '1'
			option rebind_protection '1'
			option local '/lan/'
			option domain 'lan'
			option expandhosts '1'
			option authoritative '1'
			option readethers '1'
			option leasefile '/tmp/dhcp.leases'
			option resolvfile '/tmp/resolv.conf.d/resolv.conf.auto'
			option localservice '1'
			list server '/corp.example/10.0.0.1'

		config dhcp 'lan'
			option interface 'lan'
			option start '100'
			option limit '150'
			option leasetime '12h'

		config dhcp 'guest'
			option interface 'guest'
			list dhcp_option '6,192.168.9.1'

		config dhcp 'wan'
			option interface 'wan'
			option ignore '1'

		config odhcpd 'odhcpd'
			option maindhcp '0'
	EOF
	mkdir -p "$work/orig"
	cp "$conf/dhcp" "$work/orig/dhcp"
	if [ -n "${1:-}" ]; then
		uci set "hydradns.main.dnsmasq_mode=$1"
		uci commit hydradns
	fi
}
restarts() { grep -c "^dnsmasq restart$" "$work/calls" || true; }
same_dhcp() {
	"$UCI_BIN" -c "$conf" show dhcp > "$work/a"
	"$UCI_BIN" -c "$work/orig" show dhcp > "$work/b"
	cmp -s "$work/a" "$work/b"
}

# ---- upstream mode (the default) ---------------------------------------------
reset
run start_service
grep -q "^param command $HYDRADNS_ROOT/usr/sbin/hydradns run -c $conf/hydradns --log syslog --allow-root$" "$work/procd" || fail "instance command (no hydradns user: root, said so): $(cat "$work/procd")"
grep -q "^param respawn 3600 5 0$" "$work/procd" || fail "respawn thresholds"
if ! grep -q "^param stdout 1$" "$work/procd" || ! grep -q "^param stderr 1$" "$work/procd"; then fail "stdout/stderr to logd"; fi
grep -q "^param limits as=" "$work/procd" || fail "memory limit"
grep -q "^param file $conf/hydradns$" "$work/procd" || fail "config file watched"
if [ "$(grep -c open_instance "$work/procd")" != 1 ] || [ "$(grep -c close_instance "$work/procd")" != 1 ]; then fail "one instance"; fi
[ "$(uci get 'dhcp.@dnsmasq[0].server')" = "/corp.example/10.0.0.1 127.0.0.1#5353" ] || fail "dnsmasq forwards to us, keeps per-domain servers: $(uci show dhcp)"
[ "$(uci get 'dhcp.@dnsmasq[0].noresolv')" = "1" ] || fail "dnsmasq noresolv"
grep -q "option noresolv '1'" "$conf/dhcp" || fail "dhcp committed to the file"
[ -f "$HYDRADNS_ROOT/etc/hydradns/dnsmasq.backup" ] || fail "backup of dnsmasq settings"
[ "$(restarts)" = 1 ] || fail "dnsmasq restarted once: $(cat "$work/calls")"
# Starting again changes nothing, so dnsmasq is left alone; the backup keeps
# the original settings, not ours.
run start_service
[ "$(restarts)" = 1 ] || fail "an unchanged start does not restart dnsmasq"
grep -q "^server=/corp.example/10.0.0.1$" "$HYDRADNS_ROOT/etc/hydradns/dnsmasq.backup" || fail "backup kept the original servers"
# A reload that only touches lists or upstreams is a SIGHUP...
uci add_list hydradns.main.upstream=192.0.2.53
uci commit hydradns
run reload_service
grep -q "^signal hydradns \* HUP$" "$work/procd" || fail "reload sends SIGHUP"
grep -q "^stop$" "$work/calls" && fail "no restart for a reloadable change"
# ...a new listen address is a restart, and dnsmasq follows it.
uci delete hydradns.main.listen
uci add_list hydradns.main.listen=127.0.0.1:5300
uci commit hydradns
run reload_service
grep -q "^stop$" "$work/calls" || fail "listen change restarts"
[ "$(uci get 'dhcp.@dnsmasq[0].server')" = "/corp.example/10.0.0.1 127.0.0.1#5300" ] || fail "dnsmasq follows the new port"
run stop_service
same_dhcp || fail "stop gives dnsmasq its settings back: $(diff "$work/b" "$work/a")"
[ ! -f "$HYDRADNS_ROOT/etc/hydradns/dnsmasq.backup" ] || fail "backup removed after restore"

# ---- replace mode -----------------------------------------------------------
reset replace
run start_service 2> /dev/null || true
grep -q open_instance "$work/procd" && fail "replace without a :53 listener is refused"
grep -q "logger -t hydradns .*needs a listen address on port 53" "$work/calls" || fail "and says why: $(cat "$work/calls")"
uci delete hydradns.main.listen
uci add_list hydradns.main.listen=0.0.0.0:53
uci add_list hydradns.main.listen='[::]:53'
uci commit hydradns
run start_service
[ "$(uci get 'dhcp.@dnsmasq[0].port')" = "5354" ] || fail "dnsmasq moved to 5354"
uci -q get 'dhcp.@dnsmasq[0].noresolv' > /dev/null && fail "dnsmasq resolves local names itself"
[ "$(uci get dhcp.lan.dhcp_option)" = "6,0.0.0.0" ] || fail "DHCP still names the router as DNS server: $(uci show dhcp)"
[ "$(uci get dhcp.guest.dhcp_option)" = "6,192.168.9.1" ] || fail "a pool's own DNS server kept"
uci -q get dhcp.wan.dhcp_option > /dev/null && fail "ignored pools untouched"
run stop_service
same_dhcp || fail "stop undoes replace mode: $(diff "$work/b" "$work/a")"

# ---- the unprivileged user ---------------------------------------------------
reset
touch "$work/user-exists"
mkdir -p "$HYDRADNS_ROOT/etc/capabilities"
cp "$repo/openwrt/files/hydradns.capabilities.json" "$HYDRADNS_ROOT/etc/capabilities/hydradns.json"
run start_service
grep -q "^param user hydradns$" "$work/procd" || fail "runs as the hydradns user"
grep -q "^param command $HYDRADNS_ROOT/usr/sbin/hydradns run -c $conf/hydradns --log syslog$" "$work/procd" || fail "as the user, without --allow-root"
grep -q "^param capabilities $HYDRADNS_ROOT/etc/capabilities/hydradns.json$" "$work/procd" || fail "with its capabilities"
grep -q "^chown -R hydradns:hydradns .*/etc/hydradns .*/var/run/hydradns .*/tmp/hydradns$" "$work/calls" || fail "owns its directories"
rm "$work/user-exists"

# ---- off, disabled, triggers ----------------------------------------------
reset off
run start_service
grep -q open_instance "$work/procd" || fail "off: runs"
same_dhcp || fail "off: dnsmasq untouched"
[ "$(restarts)" = 0 ] || fail "off: dnsmasq not restarted"
reset
uci set hydradns.main.enabled=0
uci commit hydradns
run start_service
grep -q open_instance "$work/procd" && fail "disabled: no instance"
run reload_service
grep -q "^stop$" "$work/calls" || fail "reload of a disabled service stops it"
run service_triggers
grep -q "^reload_trigger hydradns$" "$work/procd" || fail "uci commit hydradns reloads"
grep -q "^raw_trigger interface.\*.up" "$work/procd" || fail "interface trigger"

# ---- a broken config does not start ----------------------------------------
reset
printf "config hydradns 'main'\n\toption cache_size 'lots'\n" > "$conf/hydradns"
run start_service 2> /dev/null || true
grep -q open_instance "$work/procd" && fail "broken config: no instance"
grep -q "logger -t hydradns .*hydradns:2: option 'cache_size'" "$work/calls" || fail "broken config logged with file:line: $(cat "$work/calls")"
same_dhcp || fail "broken config: dnsmasq untouched"

echo "init script: all checks passed"
