#!/bin/sh
# feed.sh with apk (OpenWrt 25.12).
exec /rig/mnt/feed.sh apk
