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
uci commit hydradns
reload_config
boot_checks
set_mode replace
cut powercut-1
