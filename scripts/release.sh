#!/usr/bin/env bash
# Builds a release: the static binaries, the .ipk and .apk packages of
# hydradns and luci-app-hydradns, and two signed feeds a router installs
# and upgrades from. Run it from a clean checkout; see --help.
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022
export LC_ALL=C TZ=UTC

usage() {
	cat << 'EOF'
Usage: scripts/release.sh [--key-dir DIR | --key-env] [--arch ARCH]... [--release N] [--prebuilt DIR]
                          [--allow-dirty] OUTDIR
       scripts/release.sh --check [--arch ARCH]...
       scripts/release.sh --make-keys DIR

Builds the static hydradns binaries (scripts/build-release.sh), the .ipk and
.apk of hydradns and luci-app-hydradns, and lays out:
  OUTDIR/opkg/ARCH/   Packages, Packages.gz, Packages.sig (usign), the .ipk
                      files: the feed for OpenWrt 24.10 and older (opkg)
  OUTDIR/apk/ARCH/    packages.adb and the .apk files, each signed (EC P-256):
                      the feed for OpenWrt 25.12 and newer (apk)
  OUTDIR/keys/        hydradns-opkg.pub (usign) and hydradns-apk.pem: the
                      public keys a router trusts the feeds with
  OUTDIR/SHA256SUMS   every package of both feeds (paths relative to OUTDIR),
  OUTDIR/SHA256SUMS.sig   signed with the usign key
  OUTDIR/BUILDINFO    the commit and the tools' versions

Options:
  --key-dir DIR   the signing keys, under OpenWrt's names: key-build and
                  key-build.pub (usign), private-key.pem and public-key.pem
                  (EC P-256, for apk). Read only. Without it a throwaway key
                  pair is made for this run (and the output says so).
  --key-env       the same four keys from the environment: OPKG_SIGNING_KEY,
                  OPKG_PUBLIC_KEY, APK_SIGNING_KEY, APK_PUBLIC_KEY (the
                  release workflow's secrets). They are written into this
                  run's private directory, taken out of the environment
                  before anything else runs, and removed with the directory
                  when the run ends, however it ends
  --allow-dirty   build from a checkout with uncommitted changes (the rig's
                  test feeds): the packages are then not the commit's.
                  Without it such a checkout is refused
  --arch ARCH     an OpenWrt package architecture (repeatable; default: all
                  of them): x86_64 aarch64_generic aarch64_cortex-a53
                  aarch64_cortex-a72 arm_cortex-a7_neon-vfpv4
                  arm_cortex-a9_vfpv3-d16 arm_cortex-a15_neon-vfpv4
  --release N     the package release: 0.1.0-N (opkg), 0.1.0-rN (apk);
                  default openwrt/package.sh's
  --prebuilt DIR  take the static binaries from DIR, named as
                  scripts/build-release.sh leaves them in dist/
                  (hydradns-VERSION-TARGET), instead of building them
  --check         build everything twice from this commit and compare:
                  here (hydradns compiled afresh, its dependencies reused),
                  and in a clone of the commit elsewhere (everything
                  compiled, in a target directory of its own). Binaries,
                  packages, indexes and sums must be byte-identical apart
                  from the apk signatures (and, in packages.adb, the sizes
                  of the signed .apks)
  --make-keys DIR write a new key pair under the names --key-dir reads
                  (DIR must not have them yet), then stop
  -h, --help      this text

Builds apk-tools v3 and usign from vendor/openwrt-src/ when the machine
lacks them (into target/tools/), and installs the Debian packages and Rust
tools scripts/build-release.sh needs. Package timestamps are the commit's
(SOURCE_DATE_EPOCH).
EOF
}

# OpenWrt package architecture -> Rust target. The binaries are static, so
# one build serves every CPU of its family: the armv7 one is hard-float
# with VFPv3-D16 only, which every listed ARM core has.
targets=(
	x86_64:x86_64-unknown-linux-musl
	aarch64_generic:aarch64-unknown-linux-musl
	aarch64_cortex-a53:aarch64-unknown-linux-musl
	aarch64_cortex-a72:aarch64-unknown-linux-musl
	arm_cortex-a7_neon-vfpv4:armv7-unknown-linux-musleabihf
	arm_cortex-a9_vfpv3-d16:armv7-unknown-linux-musleabihf
	arm_cortex-a15_neon-vfpv4:armv7-unknown-linux-musleabihf
)
target_of() {
	local t
	for t in "${targets[@]}"; do
		[ "${t%%:*}" != "$1" ] || { echo "${t#*:}"; return 0; }
	done
	return 1
}

die() { echo "scripts/release.sh: $*" >&2; exit 2; }
say() { printf '== %s\n' "$*" >&2; }

key_dir="" key_env="" allow_dirty="" release="" prebuilt="" check="" make_keys="" out=""
arches=()
while [ $# -gt 0 ]; do
	case "$1" in
	--key-dir) [ $# -ge 2 ] || die "--key-dir needs a directory"; key_dir=$2; shift 2 ;;
	--arch) [ $# -ge 2 ] || die "--arch needs an architecture"; arches+=("$2"); shift 2 ;;
	--release) [ $# -ge 2 ] || die "--release needs a number"; release=$2; shift 2 ;;
	--prebuilt) [ $# -ge 2 ] || die "--prebuilt needs a directory"; prebuilt=$2; shift 2 ;;
	--make-keys) [ $# -ge 2 ] || die "--make-keys needs a directory"; make_keys=$2; shift 2 ;;
	--key-env) key_env=1; shift ;;
	--allow-dirty) allow_dirty=1; shift ;;
	--check) check=1; shift ;;
	-h | --help) usage; exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) [ -z "$out" ] || die "one OUTDIR only"; out=$1; shift ;;
	esac
done
case "$release" in *[!0-9]*) die "--release must be a number, not '$release'" ;; esac
[ ${#arches[@]} -gt 0 ] || for t in "${targets[@]}"; do arches+=("${t%%:*}"); done
for a in "${arches[@]}"; do target_of "$a" > /dev/null || die "unknown architecture '$a' (see --help)"; done
if [ -n "$check" ]; then
	[ -z "$out" ] || die "--check takes no OUTDIR"
	[ -z "$prebuilt" ] || die "--check builds the binaries itself: no --prebuilt"
elif [ -z "$make_keys" ]; then
	[ -n "$out" ] || die "no OUTDIR (see --help)"
fi
if [ -n "$key_env" ]; then
	[ -z "$key_dir" ] || die "--key-env or --key-dir, not both"
	for v in OPKG_SIGNING_KEY OPKG_PUBLIC_KEY APK_SIGNING_KEY APK_PUBLIC_KEY; do
		[ -n "${!v:-}" ] || die "--key-env: $v is not set"
	done
	# Kept in this shell only: no tool this script runs inherits them.
	export -n OPKG_SIGNING_KEY OPKG_PUBLIC_KEY APK_SIGNING_KEY APK_PUBLIC_KEY
fi
[ -z "$prebuilt" ] || prebuilt=$(cd "$prebuilt" && pwd)
[ -z "$key_dir" ] || key_dir=$(cd "$key_dir" && pwd)

if [ -z "$make_keys" ] && [ -n "$(git status --porcelain --untracked-files=no 2> /dev/null)" ]; then
	[ -n "$allow_dirty" ] || die "the checkout has uncommitted changes: the packages would not be the commit's (commit them, or --allow-dirty)"
	say "warning: the checkout has uncommitted changes; the packages are not the commit's"
fi

# shellcheck source=openwrt/host-tools.sh
. openwrt/host-tools.sh
command -v openssl > /dev/null || tools_need_debs openssl
usign=$(host_tool usign)
apk=$(host_tool apk)
export APK=$apk

# Writes a new key pair into DIR under OpenWrt's names.
new_keys() {
	local dir=$1 f
	mkdir -p "$dir"
	for f in key-build key-build.pub private-key.pem public-key.pem; do
		[ ! -e "$dir/$f" ] || die "$dir/$f exists: not overwriting a key"
	done
	"$usign" -G -s "$dir/key-build" -p "$dir/key-build.pub" -c "HydraDNS feed key"
	openssl ecparam -name prime256v1 -genkey -noout -out "$dir/private-key.pem" 2> /dev/null
	openssl ec -in "$dir/private-key.pem" -pubout -out "$dir/public-key.pem" 2> /dev/null
	chmod 0600 "$dir/key-build" "$dir/private-key.pem"
}
if [ -n "$make_keys" ]; then
	new_keys "$make_keys"
	say "keys written to $make_keys (usign fingerprint $("$usign" -F -p "$make_keys/key-build.pub"))"
	exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "$key_env" ]; then
	key_dir="$work/keys"
	(
		umask 077
		mkdir "$key_dir"
		printf '%s\n' "$OPKG_SIGNING_KEY" > "$key_dir/key-build"
		printf '%s\n' "$OPKG_PUBLIC_KEY" > "$key_dir/key-build.pub"
		printf '%s\n' "$APK_SIGNING_KEY" > "$key_dir/private-key.pem"
		printf '%s\n' "$APK_PUBLIC_KEY" > "$key_dir/public-key.pem"
	) || die "--key-env: cannot write the keys"
	unset OPKG_SIGNING_KEY OPKG_PUBLIC_KEY APK_SIGNING_KEY APK_PUBLIC_KEY
elif [ -z "$key_dir" ]; then
	key_dir="$work/keys"
	new_keys "$key_dir"
	say "no --key-dir: signing with a throwaway key pair made for this run (usign $("$usign" -F -p "$key_dir/key-build.pub"))"
fi
for f in key-build key-build.pub private-key.pem public-key.pem; do
	[ -f "$key_dir/$f" ] || die "no $key_dir/$f (see --help)"
done
# apk reads trusted keys from a directory, by absolute path only (a relative
# --keys-dir silently trusts nothing).
mkdir -p "$work/trusted"
cp "$key_dir/public-key.pem" "$work/trusted/hydradns.pem"

commit=$(git rev-parse HEAD)
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
export SOURCE_DATE_EPOCH
[ -z "$release" ] || export RELEASE=$release
version=$(awk -F'"' '/^version =/ {print $2; exit}' Cargo.toml)

# The Rust targets the architectures need, once each.
rust_targets=()
for a in "${arches[@]}"; do
	t=$(target_of "$a")
	[[ " ${rust_targets[*]} " == *" $t "* ]] || rust_targets+=("$t")
done

# The static binaries into DIR/hydradns-VERSION-TARGET. FRESH: compile
# hydradns itself anew (its dependencies are reused), as --check needs.
binaries() {
	local dir=$1 fresh=${2:-} t
	mkdir -p "$dir"
	for t in "${rust_targets[@]}"; do
		if [ -n "$prebuilt" ]; then
			[ -f "$prebuilt/hydradns-$version-$t" ] || die "no $prebuilt/hydradns-$version-$t"
			cp "$prebuilt/hydradns-$version-$t" "$dir/"
			continue
		fi
		[ -z "$fresh" ] || cargo clean --quiet --release --target "$t" -p hydradns
		say "building the $t binary"
		scripts/build-release.sh "$t" > "$work/build-release.log" 2>&1 || { cat "$work/build-release.log" >&2; exit 1; }
		cp "dist/hydradns-$version-$t" "$dir/"
	done
}

# The feeds from the binaries in BINDIR into OUT.
feeds() {
	local bins=$1 out=$2 stage a t ipk apkf luci_ipk luci_apk name d
	stage=$(mktemp -d "$work/stage.XXXXXX")
	mkdir -p "$out"
	say "packages: luci-app-hydradns"
	openwrt/build-luci.sh "$stage/luci" > "$stage/luci.list"
	luci_ipk=$(grep '\.ipk$' "$stage/luci.list")
	luci_apk=$(grep '\.apk$' "$stage/luci.list")
	sign_apk "$luci_apk"
	for a in "${arches[@]}"; do
		t=$(target_of "$a")
		say "packages and feeds: $a"
		ipk=$(openwrt/build-ipk.sh "$bins/hydradns-$version-$t" "$a" "$stage/$a")
		apkf=$(openwrt/build-apk.sh "$bins/hydradns-$version-$t" "$a" "$stage/$a")
		sign_apk "$apkf"

		d="$out/opkg/$a"
		mkdir -p "$d"
		cp "$ipk" "$luci_ipk" "$d/"
		opkg_index "$d"

		# apk finds a package beside its index as NAME-VERSION.apk.
		d="$out/apk/$a"
		mkdir -p "$d"
		for f in "$apkf" "$luci_apk"; do
			name=$(basename "$f" .apk)
			name=${name%_"$a"}
			cp "$f" "$d/${name%_noarch}.apk"
		done
		"$apk" mkndx --quiet --keys-dir "$work/trusted" --sign-key "$key_dir/private-key.pem" \
			--output "$d/packages.adb" "$d"/*.apk
		# adbsign and mkndx can print an error and still exit 0: check.
		"$apk" verify --quiet --keys-dir "$work/trusted" "$d/packages.adb" "$d"/*.apk > /dev/null ||
			die "the apk feed $d does not verify"
	done

	mkdir -p "$out/keys"
	cp "$key_dir/key-build.pub" "$out/keys/hydradns-opkg.pub"
	cp "$key_dir/public-key.pem" "$out/keys/hydradns-apk.pem"
	(cd "$out" && find opkg apk -name '*.ipk' -o -name '*.apk' | sort | xargs sha256sum) > "$out/SHA256SUMS"
	"$usign" -S -m "$out/SHA256SUMS" -s "$key_dir/key-build" -x "$out/SHA256SUMS.sig"
	"$usign" -V -q -m "$out/SHA256SUMS" -p "$key_dir/key-build.pub" -x "$out/SHA256SUMS.sig"
	{
		echo "commit $commit"
		echo "SOURCE_DATE_EPOCH $SOURCE_DATE_EPOCH"
		rustc -V
		echo "zig $(python3 -m ziglang version 2> /dev/null || echo '?')"
		cargo-zigbuild --version 2> /dev/null || echo "cargo-zigbuild ?"
		echo "apk-tools $(basename "$(dirname "$(dirname "$apk")")"), usign $(basename "$(dirname "$(dirname "$usign")")")"
	} > "$out/BUILDINFO"
	rm -rf "$stage"
}

# Signs an .apk in place with the apk key.
sign_apk() {
	"$apk" adbsign --quiet --allow-untrusted --sign-key "$key_dir/private-key.pem" "$1"
	"$apk" verify --quiet --keys-dir "$work/trusted" "$1" > /dev/null || die "$1: signing failed"
}

# Packages as OpenWrt's package/Makefile writes it: each package's control
# file with Filename, Size and SHA256sum, less the fields a router does not
# read; padded when its length would hit usign's SHA-512 bug; then gzipped
# and signed.
opkg_index() {
	local d=$1 f
	for f in "$d"/*.ipk; do
		tar -xzOf "$f" ./control.tar.gz | tar -xzOf - ./control |
			sed "s/^Description:/Filename: ${f##*/}\nSize: $(stat -c %s "$f")\nSHA256sum: $(sha256sum "$f" | cut -d' ' -f1)\nDescription:/"
		echo
	done | grep -vE '^(Maintainer|LicenseFiles|Source|SourceName|Require|SourceDateEpoch)' > "$d/Packages"
	case $(((64 + $(stat -c %s "$d/Packages")) % 128)) in
	110 | 111) printf '\n\n' >> "$d/Packages" ;;
	esac
	gzip -9nc "$d/Packages" > "$d/Packages.gz"
	"$usign" -S -m "$d/Packages" -s "$key_dir/key-build" -x "$d/Packages.sig"
	"$usign" -V -q -m "$d/Packages" -p "$key_dir/key-build.pub" -x "$d/Packages.sig"
}

if [ -z "$check" ]; then
	binaries "$work/bin"
	rm -rf "$out"
	feeds "$work/bin" "$out"
	say "done: $out ($(cd "$out" && find . -type f | wc -l) files)"
	exit 0
fi

# --check: two builds, one key pair (usign's ed25519 signatures are
# deterministic, so Packages.sig must match too; ECDSA's are not). The
# second from a clone at another path, so that neither this checkout's
# path, its untracked files nor its compiled dependencies can make the two
# agree; the tools from vendor/ are shared (built from the same tarballs).
binaries "$work/bin1" fresh
feeds "$work/bin1" "$work/a"
say "a clone of $commit at $work/clone"
git clone --quiet --no-checkout "$PWD" "$work/clone"
git -C "$work/clone" checkout --quiet --detach "$commit"
arch_args=()
for a in "${arches[@]}"; do arch_args+=(--arch "$a"); done
HYDRADNS_TOOLS=$tools_dir "$work/clone/scripts/release.sh" --key-dir "$key_dir" ${release:+--release "$release"} \
	"${arch_args[@]}" "$work/b" 2>&1 | sed 's/^/   clone: /' >&2
[ "${PIPESTATUS[0]}" = 0 ] || die "the build in the clone failed"
mkdir -p "$work/bin2"
for t in "${rust_targets[@]}"; do cp "$work/clone/dist/hydradns-$version-$t" "$work/bin2/"; done
say "comparing the two builds"
differ=0 compared=0
# same WHAT A B
same() { compared=$((compared + 1)); cmp -s "$2" "$3" || { echo "differs: $1" >&2; differ=1; }; }
for t in "${rust_targets[@]}"; do same "hydradns-$version-$t" "$work/bin1/hydradns-$version-$t" "$work/bin2/hydradns-$version-$t"; done
(cd "$work/a" && find . -type f | sort) > "$work/a.files"
(cd "$work/b" && find . -type f | sort) > "$work/b.files"
cmp -s "$work/a.files" "$work/b.files" || { diff "$work/a.files" "$work/b.files" >&2; differ=1; }
while read -r f; do
	case "$f" in
	*.apk)
		# The same package once its signature is taken out.
		cp "$work/a/$f" "$work/x.apk" && cp "$work/b/$f" "$work/y.apk"
		"$apk" adbsign --quiet --allow-untrusted --reset-signatures "$work/x.apk" "$work/y.apk"
		same "$f" "$work/x.apk" "$work/y.apk" ;;
	*/packages.adb)
		for x in a b; do
			"$apk" adbdump --format json "$work/$x/$f" | grep -v '"file-size":' > "$work/$x.json"
		done
		same "$f" "$work/a.json" "$work/b.json" ;;
	./SHA256SUMS)
		grep -v '\.apk$' "$work/a/$f" > "$work/a.sums" && grep -v '\.apk$' "$work/b/$f" > "$work/b.sums"
		same "$f" "$work/a.sums" "$work/b.sums" ;;
	./SHA256SUMS.sig | ./keys/*) ;;
	*) same "$f" "$work/a/$f" "$work/b/$f" ;;
	esac
done < "$work/a.files"
if [ $differ = 0 ]; then
	say "reproducible: $compared files compared, the same in both builds (${arches[*]})"
else
	say "NOT reproducible: see the files above"
	exit 1
fi
