#!/bin/sh
# shellcheck disable=SC2015,SC2016  # A && B || fail is meant; a crypt hash
# luci-app-hydradns on the real web stack (rpcd, uhttpd, LuCI): installed
# with opkg or apk beside hydradns, some queries answered, a read-only rpcd
# login added; then the host (tests/openwrt/luci.sh) drives /ubus and a
# real browser against it while this waits; afterwards, what the browser
# did must show in the gateway's answers.
#   /rig/mnt/luci.sh opkg|apk
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh
mode=$1

router_with_wan
# The rig lays out luci-base without registering it with a package manager;
# an empty package of that name registers it, so our Depends resolves.
step "$mode: install hydradns, then luci-app-hydradns"
# hydradns alone first: its own postinst has rpcd read the API's object.
case "$mode" in
opkg)
	opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/install.out 2>&1 || fail "opkg install: $(cat /tmp/install.out)"
	;;
apk)
	apk add --initdb --allow-untrusted "$PKGS"/hydradns-*-r3_x86_64.apk > /tmp/install.out 2>&1 ||
		fail "apk add: $(cat /tmp/install.out)"
	;;
esac
[ -x /usr/libexec/rpcd/hydradns ] && [ -f /usr/share/rpcd/acl.d/hydradns-api.json ] || fail "no API plugin or ACL"
wait_until 10 sh -c 'ubus list hydradns' || fail "rpcd has no hydradns object: $(ubus list)"
case "$mode" in
opkg)
	opkg install "$PKGS"/luci-base_*_all.ipk "$PKGS"/luci-app-hydradns_*_all.ipk \
		> /tmp/install.out 2>&1 || fail "opkg install: $(cat /tmp/install.out)"
	;;
apk)
	apk add --allow-untrusted "$PKGS"/luci-base-*_noarch.apk "$PKGS"/luci-app-hydradns-*_noarch.apk \
		> /tmp/install.out 2>&1 || fail "apk add: $(cat /tmp/install.out)"
	apk info -e luci-app-hydradns > /dev/null || fail "not installed: $(apk info)"
	;;
esac
check_daemon
[ -x /usr/libexec/rpcd/luci.hydradns ] || fail "no rpcd plugin"
# The postinst had rpcd read the new plugin and ACL.
wait_until 10 sh -c 'ubus list luci.hydradns' || fail "rpcd has no luci.hydradns: $(ubus list)"
ubus call luci.hydradns status | jsonfilter -e '@.running' | grep -qx true || fail "status: $(ubus call luci.hydradns status)"

step "$mode: a list, and queries to show"
uci set hydradns.rigads=blocklist
uci add_list hydradns.rigads.domain=ads.example
uci add_list hydradns.rigads.domain=tracker.example
# A group with neither schedule nor answer mode (both optional): LuCI's
# Settings must still save (issue 48).
uci set hydradns.guests=group
# rigads for default and guests, and a guest device: Allow for one
# device's groups (default) leaves the guests blocked.
uci add_list hydradns.rigads.group=default
uci add_list hydradns.rigads.group=guests
uci set hydradns.guestdev=client
uci add_list hydradns.guestdev.match=127.0.0.9
uci add_list hydradns.guestdev.group=guests
# A tablet the DHCP leases name, for the Devices page (dnsmasq's own file
# is left alone: it rewrites it).
echo "0 02:00:5e:10:00:42 192.168.1.42 kids-tablet *" > /tmp/rig-dhcp.leases
uci set hydradns.main.leases_file=/tmp/rig-dhcp.leases
uci commit hydradns
reload_config
wait_for 10 0.0.0.0 ask ads.example 127.0.0.1 || fail "ads.example not blocked"
# More than a page of the Queries page's 100 rows (first: the
# plugin's checks read the last 100 rows for the blocked ones below).
i=0
while [ $i -lt 110 ]; do
	i=$((i + 1))
	ask "page$i.example" 127.0.0.1 5353 > /dev/null
done
# Straight to the gateway: dnsmasq would answer repeats from its cache.
for _ in 1 2 3; do ask ads.example 127.0.0.1 5353 > /dev/null; done
for _ in 1 2; do ask wan.example 127.0.0.1 5353 > /dev/null; done
# Firefox's canary, which block_bypass answers before any list.
for _ in 1 2; do ask use-application-dns.net 127.0.0.1 5353 > /dev/null; done
for _ in 1 2; do ask tracker.example 127.0.0.1 5353 > /dev/null; done

step "$mode: a login that may only look (rpcd ACL luci-app-hydradns, read)"
uci add rpcd login > /dev/null
uci set 'rpcd.@login[-1].username=viewer'
# `openssl passwd -1 -salt hydrarig viewer`: rpcd checks it with crypt(3).
uci set 'rpcd.@login[-1].password=$1$hydrarig$upJgt07L.LJTkLmpplhyU0'
uci add_list 'rpcd.@login[-1].read=luci-app-hydradns'
# And LuCI's own pages, to look at ours in a browser (still no write).
uci add_list 'rpcd.@login[-1].read=*'
# And Home Assistant's, for the API alone (docs/operation.md): the
# hydradns object's reading and acting methods, nothing else.
uci add rpcd login > /dev/null
uci set 'rpcd.@login[-1].username=homeassistant'
# `openssl passwd -1 -salt hydraapi apisecret`
uci set 'rpcd.@login[-1].password=$1$hydraapi$RZ91alA25C.9mkm5D1Le/0'
uci add_list 'rpcd.@login[-1].read=hydradns-api'
uci add_list 'rpcd.@login[-1].write=hydradns-api'
uci commit rpcd
killall -HUP rpcd
wait_until 10 sh -c 'ubus list luci.hydradns' || fail "rpcd did not come back"

step "$mode: firewall zones for force DNS's zone list"
# This image has no fw4; LuCI offers the zones of /etc/config/firewall.
[ -f /etc/config/firewall ] || printf "config zone\n\toption name '%s'\n\n" lan wan guest > /etc/config/firewall

watchdog_pid() { ubus call service list '{"name":"hydradns"}' | jsonfilter -e '@.hydradns.instances.watchdog.pid'; }
# The host's stand-in for the watchdog failing DNS open, and back. The
# real watchdog is frozen meanwhile: it would see the daemon answer and
# undo the stand-in (filtered, the state file removed) before the page
# next polls.
stand_in() {
	if [ -f /rig/unfiltered ]; then
		kill -STOP "$(watchdog_pid)" 2> /dev/null
		mv /rig/unfiltered /var/run/hydradns.unfiltered
	fi
	if [ -f /rig/filtered ]; then
		rm -f /rig/filtered /var/run/hydradns.unfiltered
		kill -CONT "$(watchdog_pid)" 2> /dev/null
	fi
}
# Issue 58: data from outside that holds markup, each from where the router
# really gets it, made when the host asks (/rig/hostile; the answer in
# /rig/hostile.done): a list server's redirect, a services catalogue, a
# list's line, a DHCP lease, /etc/ethers and a `config client` name. Each
# payload sets window.__pwned if a page runs it (luci-check.py watches).
IMG='<img src=x onerror="window.__pwned=1">'
SVG='<svg onload="window.__pwned=1">'
has_list() { hydradns status --json | jsonfilter -e '@.lists[*].name' | grep -qx hostileline; }
failed_download() { [ -n "$(hydradns status --json | jsonfilter -e "@.lists[@.name='redirected'].last_error")" ]; }
logged_from() { hydradns log --json --client 127.0.0.67 --limit 5 | grep -q hostile-line; }
hostile_sources() {
	# The list server and the catalogue: a CGI and a file of the web server
	# the rig already runs (uhttpd on 127.0.0.1:8080, OpenWrt's cgi-bin).
	mkdir -p /www/cgi-bin /www/hydradns-rig /etc/hydradns
	cat > /www/cgi-bin/hydradns-rig-302 <<-EOF
	#!/bin/sh
	printf 'Status: 302 Found\r\nLocation: /%s\r\nContent-Type: text/plain\r\n\r\n' '$IMG$SVG'
	EOF
	chmod 755 /www/cgi-bin/hydradns-rig-302
	# HostlistsRegistry's layout (docs/configuration.md): a category and a
	# name that hold markup, two services of a category named __proto__,
	# and TikTok (the groups the run made block it).
	cat > /www/hydradns-rig/services.json <<-'EOF'
	{"blocked_services": [
	 {"id": "rig_category", "name": "Rig category", "group": "<svg onload=\"window.__pwned=1\">", "rules": ["||rig-category.example^"]},
	 {"id": "rig_name", "name": "Rig <img src=x onerror=\"window.__pwned=1\">", "group": "rig", "rules": ["||rig-name.example^"]},
	 {"id": "rig_proto_one", "name": "Rig proto one", "group": "__proto__", "rules": ["||proto-one.example^"]},
	 {"id": "rig_proto_two", "name": "Rig proto two", "group": "__proto__", "rules": ["||proto-two.example^"]},
	 {"id": "tiktok", "name": "TikTok", "group": "social", "rules": ["||tiktok.com^"]}
	]}
	EOF
	printf '0.0.0.0 hostile-line.example # %s%s\n' "$IMG" "$SVG" > /etc/hydradns/rig-hostile.txt
	chmod 644 /etc/hydradns/rig-hostile.txt
	uci set hydradns.main.services_url=http://127.0.0.1:8080/hydradns-rig/services.json
	uci set hydradns.redirected=blocklist
	uci set hydradns.redirected.url=http://127.0.0.1:8080/cgi-bin/hydradns-rig-302
	uci set hydradns.hostileline=blocklist
	uci add_list hydradns.hostileline.path=/etc/hydradns/rig-hostile.txt
	# Devices: a DHCP lease (dnsmasq's file has no spaces in a name), an
	# ethers line and a rule's name, each holding markup.
	echo "0 02:00:5e:10:00:66 127.0.0.66 <svg/onload=window.__pwned=1> *" >> /tmp/rig-dhcp.leases
	echo "02:00:5e:10:00:68 <img/src='x'/onerror=window.__pwned=1>" >> /etc/ethers
	uci set hydradns.hostilename=client
	uci set hydradns.hostilename.name="$IMG"
	uci add_list hydradns.hostilename.match=127.0.0.67
	uci commit hydradns
	# The Overview's Revert (header_apply_refused, earlier in the run) once
	# left the file root's alone, and the daemon refused every reload.
	case "$(ls -l /etc/config/hydradns)" in
	-rw-r--r--*) ;;
	*) echo "the config after the Overview's Revert: $(ls -l /etc/config/hydradns)"; return 1 ;;
	esac
	reload_config
	wait_until 15 has_list || { echo "the local list not loaded: $(hydradns status)"; return 1; }
	hydradns update
	wait_until 15 failed_download || { echo "no download error for the redirect: $(hydradns status)"; return 1; }
	# The catalogue downloaded: its __proto__ services listed.
	wait_until 15 sh -c 'hydradns services | grep -q rig_proto_one' || { echo "the catalogue: $(hydradns services | head)"; return 1; }
	# The lease's and the rule's devices ask (a 127/8 address of their own).
	for c in 127.0.0.66 127.0.0.67; do
		dig +short +time=2 +tries=1 -b "$c" -p 5353 @127.0.0.1 hostile-line.example A > /dev/null
	done
	wait_until 10 logged_from || { echo "not logged: $(hydradns log --limit 5)"; return 1; }
}
hostile_on_request() {
	[ -f /rig/hostile ] || return 0
	rm -f /rig/hostile
	if (hostile_sources) > /tmp/hostile.out 2>&1; then echo ok > /rig/.hostile.done; else echo failed > /rig/.hostile.done; fi
	cat /tmp/hostile.out >> /rig/.hostile.done
	mv /rig/.hostile.done /rig/hostile.done
}
# The host's question about the gateway's state, to set beside what the
# API answered: /rig/cli holds one of a fixed set of requests, answered in
# /rig/cli.out with what the command line printed.
cli_on_request() {
	[ -f /rig/cli ] || return 0
	req=$(cat /rig/cli)
	rm -f /rig/cli
	case "$req" in
	stats | devices | exceptions) hydradns "$req" --json ;;
	status) hydradns status --live --json ;;
	config) uci export hydradns ;;
	# A name asked by a device of group default alone that LuCI's checks
	# never meet (127.0.0.10), straight to the gateway.
	"ask "*)
		case "${req#ask }" in
		*[!a-z0-9.-]*) echo "not a name" ;;
		*) dig +short +time=2 +tries=1 -b 127.0.0.10 -p 5353 @127.0.0.1 "${req#ask }" A | head -n 1 ;;
		esac
		;;
	*) echo "unknown request" ;;
	esac > /rig/.cli.out 2>&1
	mv /rig/.cli.out /rig/cli.out
}
host_drives() {
	stand_in
	hostile_on_request
	cli_on_request
}
host_drives_luci host_drives

step "$mode: what the host did through LuCI"
# The browser's "Allow" on the top blocked name: in UCI, and answered.
uci -q get hydradns.luci_allow.domain | grep -qw ads.example || fail "no luci_allow: $(uci show hydradns)"
hydradns check -c /etc/config/hydradns ads.example | grep -q 'allowed' ||
	fail "ads.example not allowed: $(hydradns check -c /etc/config/hydradns ads.example)"
not_blocked() { [ "$(ask ads.example 127.0.0.1)" != 0.0.0.0 ]; }
wait_until 10 not_blocked || fail "ads.example still blocked"
# Force DNS's tab: the exemption saved through check-config; the defaults
# the form showed but nobody changed are not written.
[ "$(uci -q get hydradns.main.force_dns_exempt)" = 192.0.2.7 ] ||
	fail "force_dns_exempt: $(uci -q get hydradns.main.force_dns_exempt)"
[ -z "$(uci -q get hydradns.main.force_dns_port)$(uci -q get hydradns.main.force_dns_zone)" ] ||
	fail "defaults written: $(uci show hydradns.main)"
hydradns check-config -c /etc/config/hydradns > /dev/null || fail "check-config: $(hydradns check-config -c /etc/config/hydradns)"
# Issue 48: the device added without a group (matching 127.0.0.1) is in
# 'default', whose lists block for it; the group and schedule set up.
out=$(hydradns check -c /etc/config/hydradns --client 127.0.0.1 tracker.example)
echo "$out" | grep -q "blocked by list 'rigads'" || fail "a device without group is not filtered: $out"
[ "$(uci -q get hydradns.nights.start)" = 21:00 ] && [ "$(uci -q get hydradns.kids)" = group ] ||
	fail "the group and schedule: $(uci show hydradns)"
[ "$(uci -q get hydradns.main.upstream_timeout)" = 2s ] || fail "the refused config reverted: $(uci show hydradns.main)"
# The Devices page's "Add to group…": the tablet, by its MAC, in guests.
out=$(hydradns check -c /etc/config/hydradns --client 02:00:5e:10:00:42 tracker.example)
echo "$out" | grep -q "^client 02:00:5e:10:00:42: config client 'kids-tablet' (.*), groups: default,guests$" &&
	echo "$out" | grep -q "blocked by list 'rigads'" || fail "the tablet is not in guests: $out"
# Issue 60: kids' upstreams, chosen from a preset in the browser, are the
# set a device of kids is answered from (a copy of the config with such a
# device); the exceptions the browser made were all ended.
cp /etc/config/hydradns /tmp/kids.conf
printf "\nconfig client 'kidsdev'\n\tlist match '127.0.0.8'\n\tlist group 'kids'\n" >> /tmp/kids.conf
out=$(hydradns check -c /tmp/kids.conf --client 127.0.0.8 x.example)
echo "$out" | grep -q "upstreams: set 'kids': tls://family\.cloudflare-dns\.com:853" || fail "kids' upstreams: $out"
rm -f /tmp/kids.conf
[ -z "$(hydradns exceptions --json | jsonfilter -e '@.exceptions[*]')" ] || fail "exceptions left: $(hydradns exceptions)"
[ ! -f /var/run/hydradns.refused ] || fail "refused: $(cat /var/run/hydradns.refused)"
# The browser's part ends with the file gone.
[ ! -f /var/run/hydradns.unfiltered ] || fail "/var/run/hydradns.unfiltered left"
# The plugin's temporary files are gone (/tmp is RAM on a router).
[ -z "$(ls /tmp/tmp.* /tmp/hydradns-check.* 2> /dev/null)" ] || fail "left in /tmp: $(ls /tmp)"
# The browser's pause is still running.
[ "$(hydradns stats --json | jsonfilter -e '@.paused_until')" -gt "$(date +%s)" ] || fail "not paused: $(hydradns stats)"
echo "PASS luci"
