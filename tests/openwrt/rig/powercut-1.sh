#!/bin/sh
# Power cuts at three points of a mode change (rig.sh kills the rig at CUT;
# each next boot must serve the LAN). First boot: install, upstream mode;
# the cut comes after `uci commit hydradns` of replace mode, before reload.
# shellcheck source=tests/openwrt/rig/powercut-lib.sh
. /rig/mnt/powercut-lib.sh

uci_written_dhcp
cp /etc/config/dhcp /etc/dhcp.factory
opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/install.out 2>&1 || fail "opkg install: $(cat /tmp/install.out)"
check_daemon
uci add_list hydradns.@blocklist[1].domain=blocked.example
# In replace mode LAN devices ask HydraDNS directly, and the rig's LAN is on
# documentation addresses, outside allow_client's private ranges.
for net in 192.0.2.0/24 2001:db8:1::/64 127.0.0.0/8 ::1; do
	uci add_list hydradns.main.allow_client="$net"
done
uci commit hydradns
reload_config
boot_checks
set_mode replace
cut powercut-1
