#!/bin/sh
# Reboot, first boot: install, replace mode, then the rig shuts down
# (/etc/rc.d/K* shutdown) as a router does before rebooting.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

uci_written_dhcp
cp /etc/config/dhcp /etc/dhcp.original
opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/opkg.out 2>&1 || fail "opkg install: $(cat /tmp/opkg.out)"
check_daemon
uci add_list hydradns.@blocklist[1].domain=blocked.example
uci set hydradns.main.dnsmasq_mode='replace'
uci delete hydradns.main.listen
uci add_list hydradns.main.listen='0.0.0.0:53'
uci commit hydradns && /etc/init.d/hydradns reload
wait_for 15 0.0.0.0 ask blocked.example 127.0.0.1 || fail "replace mode"
file_id /etc/config/dhcp > /etc/dhcp.before-reboot
echo "PASS reboot-1"
