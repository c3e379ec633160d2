#!/bin/sh
# Power cuts, last boot: replace mode serves the LAN.
# shellcheck source=tests/openwrt/rig/powercut-lib.sh
. /rig/mnt/powercut-lib.sh

boot_checks
grep -qx 'port=5354' "$(cat /var/run/hydradns.dnsmasq)" || fail "not in replace mode"
echo "PASS powercut-4"
