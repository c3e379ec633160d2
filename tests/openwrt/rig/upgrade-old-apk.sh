#!/bin/sh
# upgrade-old.sh with apk (OpenWrt 25.12).
PKG_INSTALL=apk PASS_NAME=upgrade-old-apk
# shellcheck source=tests/openwrt/rig/upgrade-old.sh
. /rig/mnt/upgrade-old.sh
