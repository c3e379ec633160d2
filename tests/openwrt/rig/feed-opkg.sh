#!/bin/sh
# feed.sh with opkg (OpenWrt 24.10).
exec /rig/mnt/feed.sh opkg
