#!/usr/bin/env bash
# Makes the signed zones of the DNSSEC comparison rig (tests/dnssec/run.sh)
# in OUT: a root '.', the TLD 'example.' and one child per case, each child
# carrying its case's defect. New keys on every run (no private key is kept
# in the repository, and nothing expires between runs): ldns (ldnsutils) signs,
# BIND (bind9-utils) signs the NSEC3 opt-out zone as in
# tests/data/dnssec/make.sh, and tests/dnssec/zonetool.py plants the defects
# a signer will not make. Writes OUT/zones.list (name, file) and
# OUT/root.anchor (the root's DS, a trust-anchor-file / trust_anchor_file).
#   tests/dnssec/zones.sh OUT
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
tool() { python3 "$here/zonetool.py" "$@"; }
cd "$out"

# Valid from a day ago for 60 days: wide enough for any run, and fresh
# keys each run keep the dates out of the cases that are not about them.
# Those that are use fixed dates: 2020 (expired) and 2040 (not yet valid).
inception=$(date -u -d '-1 day' +%Y%m%d%H%M%S)
expiration=$(date -u -d '+60 days' +%Y%m%d%H%M%S)

# The records of every child zone: data of several types at www, a CNAME,
# a wildcard and an empty non-terminal (b.ent).
child_body() {
    cat <<ZONE
\$ORIGIN $1.
\$TTL 3600
@ IN SOA ns.example. hostmaster.example. 1 7200 3600 1209600 3600
@ IN NS ns.example.
@ IN MX 10 mail
mail IN A 192.0.2.25
www IN A 192.0.2.1
www IN AAAA 2001:db8::1
www IN TXT "hello world"
cname IN CNAME www
*.wild IN A 192.0.2.2
*.wild IN TXT "from the wildcard"
a.b.ent IN A 192.0.2.3
ZONE
}

: > tld.ds
: > zones.list
children=()
served() { printf '%s.\t%s\n' "$1" "$2" >> zones.list; }

# sign NAME ALGORITHM BITS(0: the algorithm's own) DS-DIGESTS SPLIT(ksk+zsk: 1)
#      [ldns-signzone options…]
# Signs NAME.zone (child_body plus $extra unless it exists) into
# NAME.signed and appends the DS records for its KSK to tld.ds.
sign() {
    local name=$1 alg=$2 bits=$3 digests=$4 split=$5
    shift 5
    local size=()
    [ "$bits" = 0 ] || size=(-b "$bits")
    [ -e "$name.zone" ] || { child_body "$name"; printf '%s' "${extra:-}"; } > "$name.zone"
    local ksk keys
    ksk=$(ldns-keygen -a "$alg" "${size[@]}" -k "$name")
    keys=("$ksk")
    [ "$split" = 0 ] || keys+=("$(ldns-keygen -a "$alg" -b 1024 "$name")")
    ldns-signzone -i "$inception" -e "$expiration" "$@" -f "$name.signed" "$name.zone" "${keys[@]}"
    for d in $digests; do
        ldns-key2ds -n "-$d" "$ksk.key"
        echo
    done >> tld.ds
    echo "$ksk" > "$name.ksk"
    children+=("$name")
    served "$name" "$name.signed"
}

# One zone per algorithm RFC 8624 has a validator support (issue 61's
# list) and Ed448 (Unbound has it, ring does not), over NSEC and NSEC3 with
# and without salt, and with every DS digest.
sign alg5.example RSASHA1 1024 1 0
sign alg7.example RSASHA1-NSEC3-SHA1 2048 2 0 -n -t 1 -s ab
# zz.wild puts an NSEC between the wildcard's own and www: a name after it
# (zzz.wild) is proved by zz.wild's NSEC. Unbound's auth-zone writes the
# wildcard's own NSEC under the query's name (x.wild NSEC www, its RRSIG's
# labels 3) when that is the one that covers it; BIND, NSD and Knot send
# *.wild. cases.tsv has both.
extra=$'tounsigned IN CNAME www.unsigned.example.\nroundtrip IN CNAME back.unsigned.example.\nzz.wild IN A 192.0.2.4\n' \
    sign alg8.example RSASHA256 2048 "1 2" 1
sign alg10.example RSASHA512 2048 2 0
# A DNAME into another signed zone: the CNAME a server synthesizes from
# it is unsigned, the DNAME and the target's data are signed.
extra=$'moved IN DNAME alg8.example.\n' sign alg13.example ECDSAP256SHA256 0 2 0 -n -t 0 -s aabbccdd
sign alg14.example ECDSAP384SHA384 0 4 0
sign alg15.example ED25519 0 "1 2" 0 -n -t 0 -s ""
sign ed448.example ED448 0 2 0
# RFC 9276's limit is 150 iterations; ldns warns above it.
sign iter200.example ECDSAP256SHA256 0 2 0 -n -t 200 -s "" 2>/dev/null

# An unsigned zone (no DS: an insecure delegation) whose CNAME leads back
# into a signed one; alg8's tounsigned and roundtrip lead into it.
{ child_body unsigned.example; echo 'back IN CNAME www.alg13.example.'; } > unsigned.example.zone
children+=(unsigned.example)
served unsigned.example unsigned.example.zone

# Opt-out (RFC 5155 6), signed by BIND: its -A leaves the unsigned
# delegations ua and ub without NSEC3 records of their own, inside the span
# of an opt-out NSEC3. ua is served (unsigned) below.
{ child_body optout.example; printf '%s\n' 'ua IN NS ns.example.' 'ub IN NS ns.example.'; } > optout.example.zone
ksk=$(dnssec-keygen -q -a ECDSAP256SHA256 -f KSK optout.example)
dnssec-signzone -q -S -z -K . -3 - -A -H 0 -s "$inception" -e "$expiration" -o optout.example \
    -f optout.example.signed optout.example.zone >/dev/null
dnssec-dsfromkey -2 "$ksk.key" >> tld.ds
children+=(optout.example)
served optout.example optout.example.signed
child_body ua.optout.example > ua.optout.example.zone
served ua.optout.example ua.optout.example.zone

# The bogus ones, each well signed and then broken in one place.
sign badsig.example ECDSAP256SHA256 0 2 0
tool corrupt badsig.example.signed www.badsig.example A # its AAAA stays good

# The same keys sign a second time with other dates; www's A takes that RRSIG.
for when in expired:20200101000000:20210101000000 future:20400101000000:20410101000000; do
    IFS=: read -r name from to <<< "$when"
    sign "$name.example" ECDSAP256SHA256 0 2 0
    ldns-signzone -i "$from" -e "$to" -f "$name.dated" "$name.example.zone" "$(cat "$name.example.ksk")"
    tool take "$name.example.signed" "$name.dated" "www.$name.example" A
done

sign norrsig.example ECDSAP256SHA256 0 2 0
tool drop norrsig.example.signed www.norrsig.example RRSIG:A

sign nodnskey.example ECDSAP256SHA256 0 2 0
tool drop nodnskey.example.signed nodnskey.example DNSKEY
tool drop nodnskey.example.signed nodnskey.example RRSIG:DNSKEY

# The DS names a key of the right algorithm that the zone never publishes.
sign dsnokey.example ECDSAP256SHA256 0 2 0
grep -v 'dsnokey\.example\.' tld.ds > tld.ds.new && mv tld.ds.new tld.ds
ldns-key2ds -n -2 "$(ldns-keygen -a ECDSAP256SHA256 -k dsnokey.example).key" >> tld.ds
echo >> tld.ds

# Two keys published; the DS names one, the other signs everything
# (the DNSKEY set included).
child_body dsnosig.example > dsnosig.example.zone
named=$(ldns-keygen -a ECDSAP256SHA256 -k dsnosig.example)
cat "$named.key" >> dsnosig.example.zone
sign dsnosig.example ECDSAP256SHA256 0 2 0
grep -v 'dsnosig\.example\.' tld.ds > tld.ds.new && mv tld.ds.new tld.ds
ldns-key2ds -n -2 "$named.key" >> tld.ds
echo >> tld.ds

# A forged NXDOMAIN: www is gone, NSEC included, so the server denies it
# with the NSEC before it, whose next name is www itself: it covers nothing.
sign nxforge.example ECDSAP256SHA256 0 2 0
for t in A AAAA TXT NSEC RRSIG; do tool drop nxforge.example.signed www.nxforge.example "$t"; done

# Served through tests/dnssec/forger.py, which swaps its NSEC3 proofs for
# alg13.example's (validly signed, by the wrong zone).
sign n3wrong.example ECDSAP256SHA256 0 2 0 -n -t 0 -s aabbccdd

# The DS's only algorithm is 253 (PRIVATEDNS): unsupported, so insecure.
sign unsupalg.example ECDSAP256SHA256 0 2 0
sed -i -E 's/^(unsupalg\.example\.[[:space:]]+[0-9]+[[:space:]]+IN[[:space:]]+DS[[:space:]]+[0-9]+[[:space:]]+)13 /\1253 /' tld.ds
grep -q 'unsupalg\.example\..*DS[[:space:]]*[0-9]* 253 ' tld.ds

# KeyTrap's shape: 150 keys with the KSK's tag, 150 broken signatures by
# that tag over every RRset (RSA: any modulus is a key).
sign collide.example RSASHA256 1024 2 0
tool collide collide.example.signed 150 150

# A wildcard answer whose NSEC proof (that no closer name exists) is gone:
# no NSEC is left in the zone for the server to add.
sign wcnoproof.example RSASHA256 2048 2 0
tool drop wcnoproof.example.signed '*' NSEC
tool drop wcnoproof.example.signed '*' RRSIG:NSEC

# The TLD: NSEC3 (no opt-out), so the insecure delegation is proved by a
# matching NSEC3 without DS.
{
    cat <<ZONE
\$ORIGIN example.
\$TTL 3600
@ IN SOA ns.example. hostmaster.example. 1 7200 3600 1209600 3600
@ IN NS ns
; never queried: every zone is a stub of the recursive (run.sh); an
; address nothing listens on keeps a stray query on loopback.
ns IN A 127.83.0.53
ZONE
    for child in "${children[@]}"; do printf '%s. IN NS ns.example.\n' "$child"; done
    cat tld.ds
} > example.zone
ksk=$(ldns-keygen -a ECDSAP256SHA256 -k example)
ldns-signzone -n -t 0 -s "" -i "$inception" -e "$expiration" -f example.signed example.zone "$ksk"
served example example.signed

{
    cat <<ZONE
\$ORIGIN .
\$TTL 86400
. IN SOA ns.example. hostmaster.example. 1 7200 3600 1209600 3600
. IN NS ns.example.
example. IN NS ns.example.
ns.example. IN A 127.83.0.53
ZONE
    ldns-key2ds -n -2 "$ksk.key"
    echo
} > root.zone
ksk=$(ldns-keygen -a ECDSAP256SHA256 -k .)
ldns-signzone -i "$inception" -e "$expiration" -f root.signed root.zone "$ksk"
printf '.\troot.signed\n' >> zones.list
{
    echo "; The test root's trust anchor (made by tests/dnssec/zones.sh)."
    ldns-key2ds -n -2 "$ksk.key"
    echo
} > root.anchor
rm -f ./*.private
