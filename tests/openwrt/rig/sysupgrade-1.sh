#!/bin/sh
# Sysupgrade, before: the package installed and serving the LAN in upstream
# mode with force DNS; the host then sysupgrades to an image without it
# (/etc/config kept). See sysupgrade-2.sh.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

cp /etc/config/dhcp /etc/dhcp.factory
opkg install "$PKGS"/hydradns_*-3_x86_64.ipk > /tmp/install.out 2>&1 || fail "opkg install: $(cat /tmp/install.out)"
check_daemon
wait_until 15 grep -qx no-resolv "$(cat /var/run/hydradns.dnsmasq)" || fail "not handed over"
cmp -s /etc/config/dhcp /etc/dhcp.factory || fail "dhcp written: $(diff /etc/dhcp.factory /etc/config/dhcp)"
cp /etc/config/dhcp /etc/config/dhcp.before-upgrade
echo "PASS sysupgrade-1"
