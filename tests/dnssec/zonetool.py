#!/usr/bin/env python3
"""Edits a signed zone file (ldns-signzone's output: one record a line,
owner TTL class type rdata) to plant the defects a signer will not make:
a broken signature, a record or signature left out, keys that share one key
tag. Used by tests/dnssec/zones.sh; python3's standard library only.

  zonetool.py corrupt FILE OWNER COVERED      flip a bit of that RRSIG's signature
  zonetool.py drop FILE OWNER TYPE           remove OWNER's TYPE records ('*': every
                                             owner; TYPE 'RRSIG:X': the RRSIGs over X;
                                             '*': every type)
  zonetool.py take FILE DONOR OWNER COVERED  that RRSIG from DONOR instead of FILE's
  zonetool.py collide FILE KEYS SIGS         KEYS-1 more DNSKEYs with the KSK's key
                                             tag, and every RRSIG made by that key
                                             replaced by SIGS broken copies
  zonetool.py keytag FILE                    every DNSKEY's key tag (a check)
"""

import base64
import sys


def fields(line):
    """The record's fields, or None for a comment or blank line. ldns writes
    no parentheses, and no ';' inside the quoted text of the zones edited
    here, so a ';' starts a comment (ldns's ;{id = ...} after a DNSKEY)."""
    text = line.split(";", 1)[0]
    return text.split() or None


def load(path):
    with open(path, encoding="ascii") as f:
        return f.read().splitlines()


def save(path, lines):
    with open(path, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")


def same_name(a, b):
    return a.lower().rstrip(".") == b.lower().rstrip(".")


def is_rrsig_over(f, owner, covered):
    return f and f[3] == "RRSIG" and f[4] == covered and (owner == "*" or same_name(f[0], owner))


def flip(sig_b64, at=None):
    """The signature with one bit changed: still well formed, never valid."""
    raw = bytearray(base64.b64decode(sig_b64))
    i = len(raw) // 2 if at is None else at % len(raw)
    raw[i] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def corrupt(path, owner, covered):
    lines, hit = load(path), 0
    for n, line in enumerate(lines):
        f = fields(line)
        if is_rrsig_over(f, owner, covered):
            lines[n] = "\t".join(f[:12] + [flip("".join(f[12:]))])
            hit += 1
    if not hit:
        sys.exit(f"zonetool: no RRSIG over {owner} {covered} in {path}")
    save(path, lines)


def drop(path, owner, rtype):
    lines, kept = load(path), []
    covered = rtype.split(":", 1)[1] if rtype.startswith("RRSIG:") else None
    for line in lines:
        f = fields(line)
        if f and (owner == "*" or same_name(f[0], owner)):
            if covered is not None and is_rrsig_over(f, owner, covered):
                continue
            if covered is None and rtype in (f[3], "*"):
                continue
        kept.append(line)
    if len(kept) == len(lines):
        sys.exit(f"zonetool: no {rtype} at {owner} in {path}")
    save(path, kept)


def take(path, donor, owner, covered):
    new = [line for line in load(donor) if is_rrsig_over(fields(line), owner, covered)]
    if not new:
        sys.exit(f"zonetool: no RRSIG over {owner} {covered} in {donor}")
    out = [line for line in load(path) if not is_rrsig_over(fields(line), owner, covered)]
    save(path, out + new)


def keytag(rdata):
    """RFC 4034 appendix B."""
    acc = 0
    for i, b in enumerate(rdata):
        acc += b if i & 1 else b << 8
    return (acc + (acc >> 16)) & 0xFFFF


def dnskey_rdata(f):
    flags, proto, alg = int(f[4]), int(f[5]), int(f[6])
    key = base64.b64decode("".join(f[7:]))
    return bytes([flags >> 8, flags & 0xFF, proto, alg]) + key


def collide(path, keys, sigs):
    """KeyTrap's shape (CVE-2023-50387): many keys one tag names, many
    signatures by that tag, none of them good, so a validator that tries
    every pair does keys x sigs checks before it gives up."""
    lines = load(path)
    ksk = next(f for f in map(fields, lines) if f and f[3] == "DNSKEY" and f[4] == "257")
    rdata = bytearray(dnskey_rdata(ksk))
    tag = keytag(rdata)
    if rdata[3] not in (5, 7, 8, 10):
        sys.exit("zonetool: collide wants an RSA key (any modulus parses)")
    exp_len = rdata[4]
    start = 5 + exp_len + 8  # well inside the modulus
    start += start & 1  # an even offset: the high byte of a 16-bit word
    words = (len(rdata) - start - 3) // 2
    extra, k = [], 0
    while len(extra) < keys - 1 and k < 100 * keys:
        # +d on one word's high byte and -d on the next one's keeps the
        # sum, so the tag, and the modulus stays the same length.
        variant = bytearray(rdata)
        i, d = start + 2 * (k % words), 1 + k // words
        k += 1
        if variant[i] + d > 0xFF or variant[i + 2] < d:
            continue
        variant[i] += d
        variant[i + 2] -= d
        assert keytag(variant) == tag
        key = base64.b64encode(bytes(variant[4:])).decode()
        extra.append("\t".join(ksk[:4] + [str(variant[0] << 8 | variant[1]), str(variant[2]), str(variant[3]), key]))
    out = []
    for line in lines:
        f = fields(line)
        if f and f[3] == "RRSIG" and f[10] == str(tag):
            sig = "".join(f[12:])
            out.extend("\t".join(f[:12] + [flip(sig, s)]) for s in range(sigs))
            continue
        out.append(line)
        if f is ksk or (f and f == ksk):
            out.extend(extra)
    save(path, out)


def main(argv):
    cmd, args = argv[1] if len(argv) > 1 else "", argv[2:]
    if cmd == "corrupt" and len(args) == 3:
        corrupt(*args)
    elif cmd == "drop" and len(args) == 3:
        drop(*args)
    elif cmd == "take" and len(args) == 4:
        take(*args)
    elif cmd == "collide" and len(args) == 3:
        collide(args[0], int(args[1]), int(args[2]))
    elif cmd == "keytag" and len(args) == 1:
        for f in map(fields, load(args[0])):
            if f and f[3] == "DNSKEY":
                print(f[0], f[4], f[6], keytag(dnskey_rdata(f)))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
