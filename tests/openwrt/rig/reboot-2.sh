#!/bin/sh
# Reboot, second boot: started from /etc/rc.d (S18, before dnsmasq's S19) in
# replace mode, /etc/config/dhcp not written by the shutdown or the boot.
# Then the owner disables the service and reboots.
# shellcheck source=tests/openwrt/rig/lib.sh
. /rig/mnt/lib.sh

check_daemon
wait_for 15 0.0.0.0 ask blocked.example 127.0.0.1 || fail "not serving port 53 after the reboot"
wait_until 10 running dnsmasq || fail "dnsmasq not running"
[ "$(file_id /etc/config/dhcp)" = "$(cat /etc/dhcp.before-reboot)" ] ||
	fail "/etc/config/dhcp was written: $(cat /etc/dhcp.before-reboot) -> $(file_id /etc/config/dhcp)"
/etc/init.d/hydradns disable
echo "PASS reboot-2"
