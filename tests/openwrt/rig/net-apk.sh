#!/bin/sh
# net.sh with apk (OpenWrt 25.12).
PKG_INSTALL=apk PASS_NAME=net-apk
# shellcheck source=tests/openwrt/rig/net.sh
. /rig/mnt/net.sh
