#!/bin/sh
# shellcheck disable=SC2015,SC2012  # A && B || fail is meant; ls of fixed paths
# Install with opkg on a factory-fresh image (OpenWrt 24.10's way), then the
# service's life as the README tells it: upstream mode behind the real
# dnsmasq, the WAN's resolvers picked up by themselves, uci commit +
# reload_config, reload, respawn, interface events, restart, removal.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

uci_written_dhcp
original=$(dhcp_sum)
cp /etc/config/dhcp /tmp/dhcp.original
start_wan_resolver 127.0.0.2:53
dnsmasq_pid=$(pid_of dnsmasq)

step "opkg install"
opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/opkg.out 2>&1 || fail "opkg install: $(cat /tmp/opkg.out)"
[ -L /etc/rc.d/S18hydradns ] && [ -L /etc/rc.d/K85hydradns ] || fail "not enabled: $(ls /etc/rc.d)"
check_daemon
# The household's browsing is the daemon's alone.
for dir in /etc/hydradns /tmp/hydradns; do
	# shellcheck disable=SC2012  # fixed paths
	[ "$(ls -ld "$dir" | cut -c1-10)" = drwx------ ] || fail "$dir is not private: $(ls -ld "$dir")"
done
wait_until 10 test -f /tmp/hydradns/queries.db || fail "no query log"
# shellcheck disable=SC2012  # a fixed path
[ "$(ls -l /tmp/hydradns/queries.db | cut -c1-10)" = -rw------- ] || fail "the query log is readable by others: $(ls -l /tmp/hydradns)"

step "hydradns status: the first look after install"
out=$(hydradns status) || fail "status exit $?: $out"
echo "$out" | grep -q "^hydradns     running" || fail "status: $out"
echo "$out" | grep -q "^listen       127.0.0.1:5353, .*(dnsmasq_mode upstream)$" || fail "status listen: $out"
hydradns status --json | jsonfilter -e '@.schema' | grep -qx 1 || fail "status --json schema"

step "what procd was told"
info=$(ubus call service list '{"name":"hydradns"}')
[ "$(echo "$info" | jsonfilter -e '@.hydradns.instances.instance1.limits.nofile')" = "4096 4096" ] || fail "limits: $info"
[ "$(echo "$info" | jsonfilter -e '@.hydradns.instances.instance1.respawn.retry')" = 0 ] || fail "respawn: $info"
[ "$(echo "$info" | jsonfilter -e '@.hydradns.instances.instance1.command[*]' | tr '\n' ' ')" = "/usr/sbin/hydradns run -c /etc/config/hydradns --log syslog " ] ||
	fail "command: $info"

step "its user and group have ids of their own"
uid=$(id -u hydradns)
gid=$(id -g hydradns)
[ "$(cut -d: -f3 /etc/passwd | grep -cx "$uid")" = 1 ] || fail "uid $uid is shared: $(cat /etc/passwd)"
[ "$(cut -d: -f3 /etc/group | grep -cx "$gid")" = 1 ] || fail "gid $gid is shared: $(cat /etc/group)"
[ "$uid" != "$(id -u dnsmasq)" ] || fail "dnsmasq's uid"
[ "$(ls -ld /etc/hydradns | awk '{ print $3 }')" = hydradns ] || fail "/etc/hydradns is not the daemon's"

step "upstream mode: dnsmasq forwards to us, once restarted, and nothing is committed"
[ "$(dhcp_sum)" = "$original" ] || fail "/etc/config/dhcp was written: $(diff /tmp/dhcp.original /etc/config/dhcp)"
# A file in the conf-dir dnsmasq's init script gives its instance, on tmpfs.
conf=$(ls /tmp/dnsmasq*.d/hydradns.conf 2>/dev/null)
[ -n "$conf" ] || fail "no hydradns.conf in dnsmasq's conf-dir: $(ls -d /tmp/dnsmasq*)"
grep -q "^conf-dir=${conf%/*}\$" /var/etc/dnsmasq.conf.* || fail "dnsmasq does not read ${conf%/*}: $(grep conf-dir /var/etc/dnsmasq.conf.*)"
for line in no-resolv server=127.0.0.1#5353 add-subnet=32,128 strip-subnet add-mac strip-mac proxy-dnssec; do
	grep -qx "$line" "$conf" || fail "$conf lacks $line: $(cat "$conf")"
done
[ "$(pid_of dnsmasq)" != "$dnsmasq_pid" ] || fail "dnsmasq was not restarted for its new settings"
grep -q '127.0.0.1#5353' /proc/"$(pid_of dnsmasq)"/cmdline /var/etc/dnsmasq.conf.* && fail "our server is in dnsmasq's own config"
logread -e hydradns | grep -q 'from built-in fallback' || fail "expected the fallback before the WAN is up"
[ ! -e /etc/hydradns-dnsmasq.backup ] || fail "a backup of dnsmasq's settings was written"
[ "$(ls -l /var/run/hydradns.dnsmasq | awk '{ print $1 $3 }')" = "-rw-r--r--root" ] ||
	fail "where our file is, is not root's: $(ls -l /var/run/hydradns.dnsmasq)"

step "the WAN comes up: its resolver is used, without a reload"
pid=$(pid_of hydradns)
wan_up
wait_until 10 in_log 'upstreams now 127.0.0.2:53' || fail "resolv.conf.auto not followed"
[ "$(ask wan.example 127.0.0.1)" = 93.184.215.14 ] || fail "wan.example through dnsmasq and hydradns: $(dig -p 53 @127.0.0.1 wan.example)"
[ "$(ask wan.example 127.0.0.1 5353)" = 93.184.215.14 ] || fail "wan.example from hydradns"
[ "$(pid_of hydradns)" = "$pid" ] && [ "$(logged reloaded)" = 0 ] || fail "a reload or restart happened"

step "first uci commit + reload_config after install applies (SIGHUP, same process)"
uci add hydradns blocklist > /dev/null
uci set hydradns.@blocklist[-1].name=test
uci add_list hydradns.@blocklist[-1].domain=blocked.example
uci commit hydradns
reload_config
wait_until 10 in_log 'hydradns.*reloaded /etc/config/hydradns' || fail "reload_config did not reach hydradns"
wait_for 10 0.0.0.0 ask blocked.example 127.0.0.1 || fail "blocked.example not blocked through dnsmasq"
[ "$(pid_of hydradns)" = "$pid" ] || fail "reload restarted the daemon"

step "groups through uci: a client's group list applies behind dnsmasq; the ntp hotplug marks the clock"
[ -x /etc/hotplug.d/ntp/25-hydradns ] || fail "no ntp hotplug script"
rm -f /var/state/ntpd-synced
uci set hydradns.kids=group
uci set hydradns.kids.schedule=all_day
uci set hydradns.all_day=schedule
uci set hydradns.all_day.start=00:00
uci set hydradns.all_day.end=00:00
uci add hydradns client > /dev/null
uci set hydradns.@client[-1].name=router-itself
uci add_list hydradns.@client[-1].match=127.0.0.1
uci add_list hydradns.@client[-1].group=kids
uci add_list hydradns.@client[-1].group=default
uci add hydradns blocklist > /dev/null
uci set hydradns.@blocklist[-1].name=kids_list
uci add_list hydradns.@blocklist[-1].domain=kids-only.example
uci add_list hydradns.@blocklist[-1].group=kids
uci commit hydradns
reload_config
# dnsmasq names the client (addsubnet): 127.0.0.1, the kids' client.
wait_for 10 0.0.0.0 ask kids-only.example 127.0.0.1 || fail "the kids' list does not apply through dnsmasq"
wait_for 10 0.0.0.0 ask blocked.example 127.0.0.1 || fail "the default group's list stopped applying"
out=$(hydradns check -c /etc/config/hydradns --client 127.0.0.1 kids-only.example)
echo "$out" | grep -q "blocked by list 'kids_list' of group 'kids'" || fail "check --client: $out"
echo "$out" | grep -q "clock is not known good" || fail "no marker yet, yet: $out"
ACTION=stratum /etc/hotplug.d/ntp/25-hydradns
[ -e /var/state/ntpd-synced ] || fail "the hotplug script did not mark the clock"
out=$(hydradns check -c /etc/config/hydradns --client 127.0.0.1 kids-only.example)
echo "$out" | grep -q "inside its window now" || fail "check --client after the marker: $out"

step "/etc/init.d/hydradns reload: SIGHUP"
/etc/init.d/hydradns reload
wait_for 10 3 logged reloaded || fail "reload: $(logged reloaded) reloads logged"
[ "$(pid_of hydradns)" = "$pid" ] || fail "reload restarted the daemon"

step "interface events: the WAN's retries failed downloads, the LAN's do nothing"
ubus call service event '{"type":"interface.update","data":{"interface":"lan"}}'
ubus call service event '{"type":"interface.down","data":{"interface":"wan"}}'
sleep 2
[ "$(logged 'the network changed')" = 0 ] || fail "a LAN or down event reached the daemon"
ubus call service event '{"type":"interface.update","data":{"interface":"wan"}}'
wait_for 10 1 logged 'the network changed' || fail "the WAN's event did not reach the daemon"
[ "$(pid_of hydradns)" = "$pid" ] && [ "$(logged reloaded)" = 3 ] || fail "an interface event reloaded or restarted"

step "respawn after kill -9"
kill -9 "$pid"
wait_until 15 respawned hydradns "$pid" || fail "not respawned"
check_daemon
wait_for 10 0.0.0.0 ask blocked.example 127.0.0.1 5353 || fail "not answering after respawn"

step "restart: dnsmasq untouched"
dnsmasq_pid=$(pid_of dnsmasq)
sum=$(dhcp_sum)
/etc/init.d/hydradns restart
check_daemon
[ "$(pid_of dnsmasq)" = "$dnsmasq_pid" ] || fail "restart restarted dnsmasq"
[ "$(dhcp_sum)" = "$sum" ] || fail "restart changed /etc/config/dhcp"
wait_for 10 93.184.215.14 ask wan.example 127.0.0.1 || fail "not answering after restart"

step "root's state is in a directory of root's alone; the daemon's symlinks lead root nowhere"
# shellcheck disable=SC2012  # fixed paths
[ "$(ls -ld /var/run/hydradns-root | awk '{ print $1 $3 }')" = drwx------root ] ||
	fail "root's directory: $(ls -ld /var/run/hydradns-root)"
[ -f /var/run/hydradns-root/restart.key ] && [ ! -e /var/run/hydradns/restart.key ] ||
	fail "restart.key: $(ls -la /var/run/hydradns /var/run/hydradns-root)"
printf 'root only\n' > /etc/victim && chmod 600 /etc/victim
mkdir -p /etc/victimdir
victim=$(file_id /etc/victim)
# What the daemon's user could plant in its directory (owned as it would
# be): the staged dhcp changes' place leading into a directory of root's.
ln -s /etc/victimdir /var/run/hydradns/dhcp.staged && chown -h hydradns: /var/run/hydradns/dhcp.staged
uci set 'dhcp.@dnsmasq[0].localttl=7'
staged=$(uci changes dhcp)
# A stop hands DNS back to dnsmasq, restarting it with the owner's staged
# changes set aside.
/etc/init.d/hydradns stop
[ -z "$(ls -A /etc/victimdir)" ] || fail "root moved the staged changes through a symlink: $(ls -la /etc/victimdir)"
[ "$(uci changes dhcp)" = "$staged" ] || fail "staged changes: before '$staged', now '$(uci changes dhcp)'"
/etc/init.d/hydradns start
check_daemon
# A start while running (as the watchdog's filtered and unfiltered do)
# writes the restart key again and looks for a legacy backup.
for f in /var/run/hydradns/restart.key /etc/hydradns/dnsmasq.backup; do
	ln -sfn /etc/victim "$f" && chown -h hydradns: "$f" || fail "cannot plant $f"
done
/etc/init.d/hydradns start
check_daemon
[ "$(file_id /etc/victim)" = "$victim" ] || fail "root wrote through a symlink of the daemon's"
[ ! -e /etc/hydradns-dnsmasq.backup ] || fail "a symlinked legacy backup was imported"
in_log "dnsmasq.backup not imported \\(not a regular file\\)" || fail "the refused backup is not logged"
# /tmp/hydradns is the daemon's entry in world-writable /tmp: it may make
# it a link to anywhere. A start (fail-open's happen while it runs) acts on
# nothing through it.
chmod 755 /etc/victimdir
victimdir=$(ls -ldn /etc/victimdir | awk '{ print $1, $3, $4 }')
mv /tmp/hydradns /tmp/hydradns.real
ln -s /etc/victimdir /tmp/hydradns && chown -h hydradns: /tmp/hydradns
/etc/init.d/hydradns start
[ "$(ls -ldn /etc/victimdir | awk '{ print $1, $3, $4 }')" = "$victimdir" ] ||
	fail "a start changed what the daemon's link in /tmp points at: $(ls -ldn /etc/victimdir), was $victimdir"
[ -L /tmp/hydradns ] || fail "the daemon's own entry was replaced: $(ls -ld /tmp/hydradns)"
# Someone else's entry at that name is set aside, and the daemon gets a
# directory of its own.
chown -h 65534:65534 /tmp/hydradns
/etc/init.d/hydradns start
[ "$(ls -ldn /etc/victimdir | awk '{ print $1, $3, $4 }')" = "$victimdir" ] || fail "a start changed /etc/victimdir: $(ls -ldn /etc/victimdir)"
[ ! -L /tmp/hydradns ] && [ "$(ls -ld /tmp/hydradns | awk '{ print $1 $3 }')" = drwx------hydradns ] ||
	fail "no directory of the daemon's at /tmp/hydradns: $(ls -ld /tmp/hydradns)"
aside=$(ls -d /tmp/hydradns.aside.* 2> /dev/null | head -n 1)
[ -L "$aside/hydradns" ] || fail "someone else's entry not set aside: $(ls -la /tmp)"
in_log "hydradns: /tmp/hydradns was not hydradns's \\(owner 65534\\): moved to /tmp/hydradns.aside." || fail "the move is not logged"
rm -rf /tmp/hydradns /tmp/hydradns.aside.*
mv /tmp/hydradns.real /tmp/hydradns
rm -rf /var/run/hydradns/restart.key /var/run/hydradns/dhcp.staged /etc/hydradns/dnsmasq.backup.refused /etc/victim /etc/victimdir
# A regular file of the daemon's, on a router 0.1.0-1 never touched: refused too.
printf 'port=0\n' > /etc/hydradns/dnsmasq.backup && chown hydradns: /etc/hydradns/dnsmasq.backup
/etc/init.d/hydradns restart
check_daemon
[ ! -e /etc/hydradns-dnsmasq.backup ] && [ "$(uci -q get 'dhcp.@dnsmasq[0].port')" != 0 ] ||
	fail "the daemon's backup was imported"
in_log "not imported \\(not root's, and dhcp holds nothing 0.1.0-1 committed\\)" || fail "not logged"
rm -f /etc/hydradns/dnsmasq.backup.refused
uci revert dhcp
# The stop gave dnsmasq its port back, the start took it again.
dnsmasq_pid=$(pid_of dnsmasq)

step "a reload that needs a restart: dnsmasq untouched"
pid=$(pid_of hydradns)
dhcp=$(file_id /etc/config/dhcp)
uci set hydradns.querylog.retention=2d
uci commit hydradns
reload_config
wait_until 15 respawned hydradns "$pid" || fail "a query log change did not restart"
check_daemon
[ "$(pid_of dnsmasq)" = "$dnsmasq_pid" ] || fail "the restart restarted dnsmasq"
[ "$(file_id /etc/config/dhcp)" = "$dhcp" ] || fail "the restart wrote /etc/config/dhcp"

step "metrics: uci sets metrics_listen and metrics_textfile; the restart serves and writes them as the daemon's user"
pid=$(pid_of hydradns)
uci set hydradns.main.metrics_listen=127.0.0.1:9153
uci set hydradns.main.metrics_textfile=/var/prometheus/hydradns.prom
uci commit hydradns
reload_config
wait_until 15 respawned hydradns "$pid" || fail "metrics_listen did not restart"
check_daemon
wait_until 10 grep -q '^hydradns_build_info' /var/prometheus/hydradns.prom ||
	fail "no textfile: $(ls -la /var/prometheus) $(logread -e hydradns | grep metrics)"
wget -q -O /tmp/metrics.http http://127.0.0.1:9153/metrics || fail "GET /metrics"
grep -q '^hydradns_queries_total{proto="udp"} ' /tmp/metrics.http || fail "metrics over HTTP: $(head /tmp/metrics.http)"
hydradns metrics | grep -q '^# TYPE hydradns_request_duration_seconds histogram$' || fail "hydradns metrics"
# The directory was missing: made for the daemon.
[ "$(ls -ld /var/prometheus | awk '{ print $1 $3 }')" = "drwxr-xr-xhydradns" ] ||
	fail "/var/prometheus: $(ls -ld /var/prometheus)"
# An existing directory the daemon cannot write is left as it is (and the
# daemon runs without its textfile).
etc_mode=$(ls -ldn /etc | awk '{ print $1, $3, $4 }')
uci set hydradns.main.metrics_textfile=/etc/x.prom
uci commit hydradns
/etc/init.d/hydradns restart
check_daemon
[ "$(ls -ldn /etc | awk '{ print $1, $3, $4 }')" = "$etc_mode" ] || fail "/etc changed: $(ls -ldn /etc), was $etc_mode"
[ ! -e /etc/x.prom ] || fail "a textfile in /etc"
# A world-writable directory is left as it is.
tmp_mode=$(ls -ld /tmp | awk '{ print $1 $3 $4 }')
uci set hydradns.main.metrics_textfile=/tmp/hydradns.prom
uci commit hydradns
/etc/init.d/hydradns restart
check_daemon
wait_until 10 grep -q '^hydradns_build_info' /tmp/hydradns.prom || fail "no textfile in /tmp"
[ "$(ls -ld /tmp | awk '{ print $1 $3 $4 }')" = "$tmp_mode" ] || fail "/tmp changed: $(ls -ld /tmp), was $tmp_mode"

step "NTP servers: the init script passes system.ntp.server to the daemon; a change restarts it"
pid=$(pid_of hydradns)
plain_domains() { tr '\0' '\n' < "/proc/$(pid_of hydradns)/environ" | sed -n 's/^HYDRADNS_PLAIN_DOMAINS=//p'; }
[ "$(plain_domains)" = "$(uci -q get system.ntp.server | tr '\n' ' ' | sed 's/ *$//')" ] ||
	fail "HYDRADNS_PLAIN_DOMAINS '$(plain_domains)' is not system.ntp.server"
uci -q get system.ntp >/dev/null || uci set system.ntp=timeserver
uci -q delete system.ntp.server
uci add_list system.ntp.server=0.test.pool.ntp.org
uci add_list system.ntp.server=time.example.net
uci commit system
reload_config
wait_until 15 respawned hydradns "$pid" || fail "an NTP server change did not restart"
check_daemon
[ "$(plain_domains)" = "0.test.pool.ntp.org time.example.net" ] || fail "after the change: '$(plain_domains)'"

step "a fatal error is logged once"
cp /etc/config/hydradns /tmp/hydradns.conf
uci set hydradns.main.user=nosuchuser
uci commit hydradns
/etc/init.d/hydradns restart
wait_until 10 in_log "hydradns.*user 'nosuchuser' does not exist" || fail "no error for a missing user"
line=$(logread | grep "user 'nosuchuser' does not exist" | head -n 1)
tag=$(echo "$line" | sed -n 's/.*\(hydradns\[[0-9]*\]\).*/\1/p')
[ -n "$tag" ] && [ "$(logread | grep -F "$tag" | grep -c 'does not exist')" = 1 ] ||
	fail "logged more than once by one process: $(logread | grep 'does not exist')"
cp /tmp/hydradns.conf /etc/config/hydradns
/etc/init.d/hydradns restart
check_daemon

step "a broken config at start: not started, said with file:line, dnsmasq on its own"
dnsmasq_pid=$(pid_of dnsmasq)
uci set hydradns.main.cache_size=many
uci commit hydradns
/etc/init.d/hydradns restart
wait_until 10 in_log "hydradns: /etc/config/hydradns has errors, not applied: /etc/config/hydradns:[0-9]*: option 'cache_size'" ||
	fail "not logged: $(logread | tail -n 5)"
wait_until 10 stopped hydradns || fail "running with a broken config"
[ ! -e "$conf" ] || fail "dnsmasq left forwarding to nothing"
[ "$(pid_of dnsmasq)" != "$dnsmasq_pid" ] || fail "dnsmasq not restarted on its own settings"
wait_for 10 93.184.215.14 ask wan.example 127.0.0.1 || fail "dnsmasq does not answer on its own"
cp /tmp/hydradns.conf /etc/config/hydradns
/etc/init.d/hydradns restart
check_daemon
wait_until 10 grep -qx no-resolv "$conf" || fail "upstream mode again"

step "LuCI's rpcd plugin, the daemon stopped: status loads nothing; check one at a time, ended with the call; undo expands nothing"
# Called as rpcd calls it (rpcd's timeout SIGKILLs the plugin's shell).
rpc() { echo "$2" | /rig/mnt/luci.hydradns call "$1"; }
# The checks that load the lists themselves (not answered by the gateway).
full_checks() {
	for p in /proc/[0-9]*; do
		tr '\0' ' ' < "$p/cmdline" 2> /dev/null | grep -q '^/usr/sbin/hydradns check --one-at-a-time ' && echo "${p#/proc/}"
	done
}
some_full_check() { [ -n "$(full_checks)" ]; }
no_full_check() { [ -z "$(full_checks)" ]; }
/etc/init.d/hydradns stop
wait_until 10 stopped hydradns || fail "still running after stop"
# status reads no list file: a FIFO at a list's .meta would hang a reader.
meta=$(hydradns status --json | jsonfilter -e '@.lists[@.name="hagezi-light"].files[0]')
meta=${meta%.list}.meta
[ "$meta" != .meta ] || fail "no file for hagezi-light in status"
rm -f "$meta" && mkfifo "$meta"
timeout 5 sh -c 'echo {} | /rig/mnt/luci.hydradns call status' > /tmp/rpc-status.out ||
	fail "rpcd status with the daemon down did not answer within 5 s: $(cat /tmp/rpc-status.out)"
[ "$(jsonfilter -i /tmp/rpc-status.out -e '@.running')" = false ] || fail "rpcd status: $(cat /tmp/rpc-status.out)"
rm -f "$meta"
# 2,000,000 names: a check that loads them runs a second or more.
awk 'BEGIN { for (i = 0; i < 2000000; i++) printf "b%d.example\n", i }' > /tmp/big.list
uci add hydradns blocklist > /dev/null
uci set hydradns.@blocklist[-1].name=big
uci set hydradns.@blocklist[-1].path=/tmp/big.list
uci commit hydradns
rpc check '{"name":"b1.example"}' > /tmp/rpc-check1.out &
wait_until 30 some_full_check || fail "no check loading the lists: $(cat /tmp/rpc-check1.out)"
child=$(full_checks)
kill -STOP "$child"
# The shell rpcd would have started: the topmost plugin process above the
# check (a subshell of the plugin's between them would outlive it).
shell=$child
while parent=$(awk '{ print $4 }' "/proc/$shell/stat") &&
	tr '\0' ' ' < "/proc/$parent/cmdline" | grep -q 'luci\.hydradns call check'; do
	shell=$parent
done
[ "$shell" != "$child" ] || fail "no plugin shell above the check"
out=$(rpc check '{"name":"b2.example"}')
echo "$out" | jsonfilter -e '@.error' | grep -q '^busy: ' || fail "a second check at once: $out"
# rpcd's timeout kills the plugin's shell: its check goes with it.
kill -9 "$shell"
wait_until 5 no_full_check || fail "a check outlived the plugin's shell: $(full_checks)"
out=$(rpc check '{"name":"b3.example"}')
echo "$out" | jsonfilter -e '@.output' | grep -q "^b3.example: blocked by list 'big'" || fail "a check after one was killed: $out"
uci delete hydradns.@blocklist[-1]
uci commit hydradns
rm -f /tmp/big.list
# No word of undo's is expanded against root's files.
touch /root/hydradns-secret-name
out=$(rpc undo '{"domain":"x.example","undo":"/root/*"}')
echo "$out" | grep -q secret && fail "undo expanded a glob: $out"
echo "$out" | jsonfilter -e '@.error' | grep -q 'not a LuCI list' || fail "undo: $out"
rm -f /root/hydradns-secret-name

step "a reinstall whose install half fails (no feed has it): removed once opkg has ended"
/etc/init.d/hydradns start
check_daemon
dnsmasq_pid=$(pid_of dnsmasq)
opkg install --force-reinstall hydradns > /tmp/opkg.out 2>&1 && fail "reinstalled from no feed: $(cat /tmp/opkg.out)"
grep -q '^Removing package hydradns' /tmp/opkg.out || fail "opkg did not remove it first: $(cat /tmp/opkg.out)"
wait_until 10 stopped hydradns || fail "still running after the reinstall failed"
wait_until 10 in_log 'hydradns: the reinstall did not put the package back: removed' || fail "not logged"
[ ! -e "$conf" ] || fail "our file left in dnsmasq's conf-dir"
[ "$(pid_of dnsmasq)" != "$dnsmasq_pid" ] || fail "dnsmasq not restarted on its own settings"
wait_for 10 93.184.215.14 ask wan.example 127.0.0.1 || fail "dnsmasq does not answer on its own"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp differs: $(diff /tmp/dhcp.original /etc/config/dhcp)"
no_copy() { ! ls -d /var/run/hydradns-root/reinstall.* > /dev/null 2>&1; }
wait_until 5 no_copy || fail "the script's copy stayed: $(ls -la /var/run/hydradns-root)"
opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/opkg.out 2>&1 || fail "opkg install: $(cat /tmp/opkg.out)"
check_daemon
wait_until 10 grep -qx no-resolv "$conf" || fail "upstream mode again"

step "opkg remove: dnsmasq's settings back byte for byte"
opkg remove hydradns > /tmp/opkg.out 2>&1 || fail "opkg remove: $(cat /tmp/opkg.out)"
wait_until 10 stopped hydradns || fail "still running after removal"
[ "$(dhcp_sum)" = "$original" ] || fail "dhcp differs: $(diff /tmp/dhcp.original /etc/config/dhcp)"
[ ! -e "$conf" ] || fail "our file left in dnsmasq's conf-dir"
wait_until 10 running dnsmasq || fail "dnsmasq down"
wait_for 10 93.184.215.14 ask wan.example 127.0.0.1 || fail "dnsmasq does not answer on its own"
echo "PASS opkg"
