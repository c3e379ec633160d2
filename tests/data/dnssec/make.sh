#!/usr/bin/env bash
# Regenerates the signed test zones under tests/data/dnssec/ that the unit
# tests of src/dnssec/ validate. Made with ldns (Debian's ldnsutils:
# ldns-keygen, ldns-signzone, ldns-key2ds), the opt-out zone with BIND
# (bind9-utils: dnssec-keygen, dnssec-signzone, dnssec-dsfromkey), and all
# checked with ldns-verify-zone and Knot's kzonecheck (knot-dnssecutils):
#   apt-get install -y ldnsutils bind9-utils knot-dnssecutils
#   tests/data/dnssec/make.sh
# Keys are new on every run (the private keys are not kept), so every file
# changes; the tests read names, types and verdicts, never key tags.
#
# The tree: `test.` (the parent, ECDSA P-256, NSEC) delegates to one child
# per algorithm and to the special cases; its DS records are what the
# children are validated against, and anchors.conf (DS) and
# anchors-dnskey.conf (DNSKEY) anchor `test.` itself, in the form a
# trust_anchor_file takes. Signatures run from 2025-01-01 to 2037-01-01
# except in expired.test. (2020-2021) and future.test. (2040-2041).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

inception=20250101000000
expiration=20370101000000

# The records of every child zone: a name with data of several types, a
# CNAME, a wildcard, empty non-terminals (b.ent, ent), an unsigned
# delegation without DS, and names in RDATA written in capitals (canonical
# form lowercases them in MX and NS, RFC 4034 section 6.2).
child_body() {
    cat <<ZONE
\$ORIGIN $1.
\$TTL 3600
@ IN SOA ns.test. hostmaster.test. 1 7200 3600 1209600 3600
@ IN NS ns.test.
@ IN MX 10 MAIL.$1.
mail IN A 192.0.2.25
www IN A 192.0.2.1
www IN AAAA 2001:db8::1
www IN TXT "hello world"
cname IN CNAME www
*.wild IN A 192.0.2.2
*.wild IN TXT "from the wildcard"
a.b.ent IN A 192.0.2.3
deleg IN NS NS.Elsewhere.example.
ZONE
}

# zone NAME ALGORITHM BITS(0: the algorithm's own) DS-DIGESTS SPLIT(ksk+zsk: 1)
#      [ldns-signzone options…]
# Signs NAME's records from child_body (and $extra, if set) and appends
# the DS records the parent publishes for it to parent.ds.
zone() {
    local name=$1 alg=$2 bits=$3 digests=$4 split=$5
    shift 5
    local size=()
    [ "$bits" = 0 ] || size=(-b "$bits")
    { child_body "$name"; printf '%s' "${extra:-}"; } > "$name.zone"
    local ksk zsk
    ksk=$(ldns-keygen -a "$alg" "${size[@]}" -k "$name")
    local keys=("$ksk")
    if [ "$split" = 1 ]; then
        zsk=$(ldns-keygen -a "$alg" -b 1024 "$name")
        keys+=("$zsk")
    fi
    ldns-signzone -i "$inception" -e "$expiration" "$@" -f "$here/$name.signed" "$name.zone" "${keys[@]}"
    for d in $digests; do
        ldns-key2ds -n "-$d" "$ksk.key"
        echo
    done >> parent.ds
}

: > parent.ds
zone alg5.test RSASHA1 1024 1 0
zone alg7.test RSASHA1-NSEC3-SHA1 2048 2 0 -n -t 1 -s ab
zone alg8.test RSASHA256 2048 "1 2" 1
zone alg10.test RSASHA512 2048 2 0
zone alg13.test ECDSAP256SHA256 0 2 0 -n -t 5 -s aabbccdd
zone alg14.test ECDSAP384SHA384 0 4 0
zone alg15.test ED25519 0 "1 2" 0 -n -t 0 -s ""
# Opt-out (RFC 5155 6), signed by BIND (bind9-utils): unlike ldns, its
# -A leaves the unsigned delegations ua and ub without NSEC3 records of
# their own, so a span of an opt-out NSEC3 covers them. sd is a signed
# delegation (its DS is made up: nothing below it is served).
{
    child_body optout.test
    printf '%s\n' 'ua IN NS ns.elsewhere.example.' 'ub IN NS ns.elsewhere.example.' \
        'sd IN NS ns.elsewhere.example.' \
        'sd IN DS 4242 13 2 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'
} > optout.test.zone
ksk=$(dnssec-keygen -q -a ECDSAP256SHA256 -f KSK optout.test)
dnssec-signzone -q -S -z -K . -3 - -A -H 0 -s "$inception" -e "$expiration" -o optout.test \
    -f "$here/optout.test.signed" optout.test.zone >/dev/null
{ dnssec-dsfromkey -2 "$ksk.key"; } >> parent.ds
# Above RFC 9276's 150 iterations (ldns warns).
zone iter200.test ECDSAP256SHA256 0 2 0 -n -t 200 -s "" 2>/dev/null
zone small.test RSASHA256 512 2 0
zone ed448.test ED448 0 2 0
inception=20200101000000 expiration=20210101000000 zone expired.test ECDSAP256SHA256 0 2 0
inception=20400101000000 expiration=20410101000000 zone future.test ECDSAP256SHA256 0 2 0

# A DS whose only digest type (5, GOST R 34.11-2012) is unsupported, for a
# zone that needs no records of its own.
printf 'digest.test.\t3600\tIN\tDS\t4242 13 5 %s\n' "$(printf '42%.0s' $(seq 32))" >> parent.ds

{
    cat <<ZONE
\$ORIGIN test.
\$TTL 3600
@ IN SOA ns.test. hostmaster.test. 1 7200 3600 1209600 3600
@ IN NS ns
ns IN A 192.0.2.53
insecure IN NS ns.elsewhere.example.
ZONE
    for child in alg5 alg7 alg8 alg10 alg13 alg14 alg15 optout iter200 small ed448 expired future digest; do
        printf '%s IN NS ns.test.\n' "$child"
    done
    cat parent.ds
} > test.zone
ksk=$(ldns-keygen -a ECDSAP256SHA256 -k test)
ldns-signzone -i "$inception" -e "$expiration" -f "$here/test.signed" test.zone "$ksk"
{
    echo "; The trust anchor of the test tree, as a trust_anchor_file."
    ldns-key2ds -n -2 "$ksk.key"
    echo
} > "$here/anchors.conf"
{
    echo "; The same anchor as a DNSKEY, split over lines in parentheses."
    # owner IN DNSKEY flags protocol algorithm key ;{comment}
    awk '{ printf "%s %s %s ( %s %s %s ; flags, protocol, algorithm\n  %s )\n", $1, $2, $3, $4, $5, $6, $7 }' "$ksk.key"
} > "$here/anchors-dnskey.conf"

# Every zone's signatures and NSEC/NSEC3 chain, checked by two other
# validators, each at a time inside the zone's signature window. kzonecheck
# is left out for the parent: it rejects digest.test.'s DS, whose unknown
# digest type is the point of it.
cd "$here"
for f in *.signed; do
    name=${f%.signed}
    case $name in
        expired.test) at=20200601000000 ;;
        future.test) at=20400601000000 ;;
        *) at=20260601000000 ;;
    esac
    ldns-verify-zone -t "$at" "$f" >/dev/null
    [ "$name" = test ] || kzonecheck -o "$name" -d on -t "$at" "$f" >/dev/null
done
echo "signed zones in $here"
