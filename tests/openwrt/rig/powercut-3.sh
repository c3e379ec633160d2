#!/bin/sh
# Power cuts, third boot: the cut comes right after a change to replace
# mode has been applied (dnsmasq restarted on its new port).
# shellcheck source=tests/openwrt/rig/powercut-lib.sh
. /rig/mnt/powercut-lib.sh

boot_checks
set_mode replace
/etc/init.d/hydradns reload
wait_for 15 0.0.0.0 ask blocked.example 127.0.0.1 || fail "replace mode"
cut powercut-3
