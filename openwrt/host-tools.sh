# shellcheck shell=bash
# apk-tools v3 and usign for the machine that builds the packages, built
# from the tarballs in vendor/openwrt-src/ (Debian packages neither) into
# target/tools/, once per tarball. Sourced by openwrt/apk-tool.sh and
# scripts/release.sh. Installs the Debian build packages it lacks (apk-tools:
# meson, ninja, pkg-config, OpenSSL and zlib headers; usign: a C compiler).
#   host_tool apk|usign     prints the path of the tool, building it if needed

tools_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools_dir=${HYDRADNS_TOOLS:-$tools_root/target/tools}

# Installs the Debian packages named that are missing (root, or sudo).
tools_need_debs() {
	local missing=() p sudo=()
	for p in "$@"; do dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -gt 0 ] || return 0
	[ "$(id -u)" = 0 ] || sudo=(sudo)
	echo "installing ${missing[*]} (to build apk-tools or usign)" >&2
	"${sudo[@]}" apt-get install -y -q "${missing[@]}" > /dev/null 2>&1 ||
		{ "${sudo[@]}" apt-get update -q > /dev/null && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" > /dev/null; }
}

host_tool() {
	local name=$1 tarball id dir
	tarball=$(ls "$tools_root"/vendor/openwrt-src/"$([ "$name" = apk ] && echo apk-tools || echo usign)"-*.tar.gz)
	id=$(basename "$tarball" .tar.gz)
	dir="$tools_dir/$id"
	case "$name" in
	apk) [ -x "$dir/bin/apk" ] || build_apk_tools "$tarball" "$dir" >&2; echo "$dir/bin/apk" ;;
	usign) [ -x "$dir/bin/usign" ] || build_usign "$tarball" "$dir" >&2; echo "$dir/bin/usign" ;;
	*) echo "host_tool: no tool '$name'" >&2; return 1 ;;
	esac
}

# Built in a scratch directory and moved into place whole, so an interrupted
# build leaves nothing that looks finished.
build_usign() {
	local tarball=$1 dir=$2 tmp
	command -v cc > /dev/null || tools_need_debs gcc libc6-dev
	echo "building usign from ${tarball##*/}" >&2
	tmp=$(mktemp -d)
	tar -xzf "$tarball" -C "$tmp"
	mkdir -p "$tmp/out/bin"
	# As its CMakeLists.txt does without libubox, less -Werror and -g3.
	(cd "$tmp" && cc -O2 -Wall --std=gnu99 -o out/bin/usign ed25519.c edsign.c f25519.c fprime.c sha512.c main.c base64.c)
	mkdir -p "$(dirname "$dir")"
	rm -rf "$dir" && mv "$tmp/out" "$dir"
	rm -rf "$tmp"
}

build_apk_tools() {
	local tarball=$1 dir=$2 tmp
	tools_need_debs gcc libc6-dev meson ninja-build pkg-config libssl-dev zlib1g-dev
	echo "building apk-tools from ${tarball##*/}" >&2
	tmp=$(mktemp -d)
	mkdir -p "$tmp/src"
	tar -xzf "$tarball" -C "$tmp/src"
	# Options as the rig's build (no Lua, docs, help text, zstd: OpenWrt's
	# own apk is built without zstd), libapk linked in statically so that the
	# binary runs from anywhere.
	(cd "$tmp/src" && VERSION=$(cat VERSION 2> /dev/null || echo 3) meson setup "$tmp/build" --prefix=/ --buildtype=release \
		--default-library=static -Dlua=disabled -Ddocs=disabled -Dhelp=disabled -Dpython=disabled -Dtests=disabled \
		-Dzstd=disabled -Dcrypto_backend=openssl -Durl_backend=libfetch > "$tmp/configure.log" 2>&1) ||
		{ tail -n 30 "$tmp/configure.log" >&2; return 1; }
	ninja -C "$tmp/build" > "$tmp/build.log" 2>&1 || { tail -n 40 "$tmp/build.log" >&2; return 1; }
	mkdir -p "$tmp/out/bin"
	cp "$tmp/build/src/apk" "$tmp/out/bin/apk"
	"$tmp/out/bin/apk" --version | grep -q '^apk-tools 3\.' || { echo "the apk built is not v3" >&2; return 1; }
	mkdir -p "$(dirname "$dir")"
	rm -rf "$dir" && mv "$tmp/out" "$dir"
	rm -rf "$tmp"
}
