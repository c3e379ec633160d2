#!/bin/sh
# replace.sh on an image with procd's ujail (run.sh --ujail), as images with
# procd-ujail installed have it: procd would jail a service that asks.
[ -x /sbin/ujail ] || { echo "FAIL: no /sbin/ujail: not run with --ujail"; exit 1; }
/rig/mnt/replace.sh && echo "PASS replace-ujail"
