#!/bin/sh
# Power cuts, second boot: replace mode from the start; the cut comes in
# the middle of going back to upstream mode (the reload just started).
# shellcheck source=tests/openwrt/rig/powercut-lib.sh
. /rig/mnt/powercut-lib.sh

boot_checks
grep -qx 'port=5354' "$(cat /var/run/hydradns.dnsmasq)" || fail "not in replace mode"
set_mode upstream
/etc/init.d/hydradns reload &
sleep 0.3
cut powercut-2
