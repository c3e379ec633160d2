#!/usr/bin/env bash
# The OpenWrt userland rig is vendored so that a clone tests itself: its
# scripts, files/, shims/, README.md and SOURCES.md in tests/openwrt/userland/
# (byte for byte), its source tarballs in vendor/openwrt-src/ (each with its
# section in vendor/openwrt-src/SOURCES.md). This refreshes the copy from
# the team's ../shared/openwrt-userland, where the rig is developed.
#   scripts/sync-rig.sh           copy ../shared/openwrt-userland in
#   scripts/sync-rig.sh --check   exit 1 if the copy differs from it
# scripts/test.sh runs --check when ../shared/openwrt-userland exists, so a
# rig change there cannot go untested here unnoticed.
set -euo pipefail
cd "$(dirname "$0")/.."
upstream=${RIG_UPSTREAM:-../shared/openwrt-userland}
copy=tests/openwrt/userland
tarballs=vendor/openwrt-src
[ -d "$upstream" ] || { echo "scripts/sync-rig.sh: no $upstream to sync from" >&2; exit 1; }

if [ "${1:-}" = --check ]; then
	stale=$(
		diff -rq --exclude=src "$upstream" "$copy" || true
		for t in "$upstream"/src/*.tar.gz; do
			cmp -s "$t" "$tarballs/${t##*/}" || echo "$tarballs/${t##*/}: differs from or missing beside $t"
		done
	)
	if [ -n "$stale" ]; then
		printf '%s\n' "$stale" >&2
		echo "error: the vendored OpenWrt rig differs from $upstream: run scripts/sync-rig.sh, fill in vendor/openwrt-src/SOURCES.md for new tarballs, and commit" >&2
		exit 1
	fi
	exit 0
fi

rm -rf "$copy"
mkdir -p "$copy" "$tarballs"
(cd "$upstream" && tar --exclude=./src -cf - .) | tar -xf - -C "$copy" --no-same-owner
# The shared copy is read-only; the vendored one is a normal part of the tree.
chmod -R u+w "$copy"
for t in "$upstream"/src/*.tar.gz; do
	name=${t##*/}
	# One tarball per project: a newer commit replaces the old one.
	for old in "$tarballs/${name%-*}"-*.tar.gz; do
		[ -e "$old" ] && [ "${old##*/}" != "$name" ] && rm -v "$old"
	done
	cmp -s "$t" "$tarballs/$name" || { cp "$t" "$tarballs/$name" && chmod 0644 "$tarballs/$name" && echo "$tarballs/$name"; }
done
# A tarball without its section would ship without its source and licence.
for t in "$tarballs"/*.tar.gz; do
	grep -q "^## ${t##*/}\$" "$tarballs/SOURCES.md" 2> /dev/null ||
		echo "note: add a section for ${t##*/} to $tarballs/SOURCES.md (upstream, commit, licence, sha256)" >&2
done
