#!/usr/bin/env python3
"""Writes the starting corpus of every fuzz target into fuzz/corpus/<target>/:
real DNS messages from the captures and the Knot seed in tests/data, real
list lines, the package's UCI files, and hand-made messages that reach the
branches a capture rarely does (blocked, cached, CNAME to a blocked name,
private addresses). Stdlib only; run by scripts/fuzz.sh."""
import binascii
import hashlib
import lzma
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DATA = os.path.join(REPO, "tests", "data")


def put(target, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def pcap_payloads(path):
    """UDP payloads and TCP DNS messages (length prefix removed) of port 53."""
    with open(path, "rb") as f:
        b = f.read()
    magic = b[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        return
    link = struct.unpack(e + "I", b[20:24])[0]
    pos = 24
    while pos + 16 <= len(b):
        incl = struct.unpack(e + "I", b[pos + 8:pos + 12])[0]
        frame = b[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        ip = {1: frame[14:], 101: frame, 113: frame[16:], 276: frame[20:], 0: frame[4:]}.get(link)
        if not ip:
            continue
        if ip[0] >> 4 == 4:
            proto, l4 = ip[9], ip[(ip[0] & 15) * 4:]
        elif ip[0] >> 4 == 6:
            proto, l4 = ip[6], ip[40:]
        else:
            continue
        if proto == 17 and len(l4) > 8:
            yield l4[8:]
        elif proto == 6 and len(l4) > 20:
            data = l4[(l4[12] >> 4) * 4:]
            while len(data) >= 2:
                n = struct.unpack(">H", data[:2])[0]
                if n == 0 or len(data) < 2 + n:
                    break
                yield data[2:2 + n]
                data = data[2 + n:]


def name(n):
    return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".")) + b"\0"


def query(n, qtype, qid=0x1234, edns=None):
    m = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 1 if edns else 0) + name(n) + struct.pack(">HH", qtype, 1)
    if edns:
        m += b"\0" + struct.pack(">HHIH", 41, edns, 0, 0)
    return m


def reply(n, qtype, answers, qid=0x1234):
    """answers: (rtype, rdata) owned by the question name, or ("CNAME", target)."""
    body = b""
    for rtype, rdata in answers:
        if rtype == "CNAME":
            body += b"\xc0\x0c" + struct.pack(">HHIH", 5, 1, 300, len(name(rdata))) + name(rdata)
        else:
            body += b"\xc0\x0c" + struct.pack(">HHIH", rtype, 1, 300, len(rdata)) + rdata
    return struct.pack(">HHHHHH", qid, 0x8180, 1, len(answers), 0, 0) + name(n) + struct.pack(">HH", qtype, 1) + body


# Record types the signed zones in tests/data/dnssec hold, by mnemonic.
TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "MX": 15, "TXT": 16, "AAAA": 28, "DS": 43, "RRSIG": 46,
         "NSEC": 47, "DNSKEY": 48, "NSEC3": 50, "NSEC3PARAM": 51}


def type_bitmap(names):
    """RFC 4034 4.1.2's windows of type bits."""
    windows = {}
    for t in (TYPES[n] if n in TYPES else int(n[4:]) for n in names):
        bits = windows.setdefault(t >> 8, bytearray(32))
        bits[(t & 0xFF) >> 3] |= 0x80 >> (t & 7)
    out = b""
    for w, bits in sorted(windows.items()):
        used = max(i for i, b in enumerate(bits) if b) + 1
        out += bytes([w, used]) + bytes(bits[:used])
    return out


def signed_rdata(rtype, f, compress):
    """RDATA of one record of ldns-signzone's text; compress(name, at) for
    the names RFC 3597 lets a server compress, `at` bytes into the RDATA."""
    import base64
    import calendar
    import socket
    import time
    when = lambda t: calendar.timegm(time.strptime(t, "%Y%m%d%H%M%S"))
    if rtype == "A":
        return socket.inet_aton(f[0])
    if rtype == "AAAA":
        return socket.inet_pton(socket.AF_INET6, f[0])
    if rtype in ("NS", "CNAME"):
        return compress(f[0])
    if rtype == "MX":
        return struct.pack(">H", int(f[0])) + compress(f[1], 2)
    if rtype == "SOA":
        mname = compress(f[0])
        return mname + compress(f[1], len(mname)) + struct.pack(">5I", *map(int, f[2:7]))
    if rtype == "TXT":
        import shlex
        return b"".join(bytes([len(t)]) + t.encode() for t in shlex.split(" ".join(f)))
    if rtype == "DNSKEY":
        return struct.pack(">HBB", int(f[0]), int(f[1]), int(f[2])) + base64.b64decode("".join(f[3:]))
    if rtype == "DS":
        return struct.pack(">HBB", int(f[0]), int(f[1]), int(f[2])) + bytes.fromhex("".join(f[3:]))
    if rtype == "RRSIG":
        covered = TYPES.get(f[0]) or int(f[0][4:])
        return (struct.pack(">HBBIIIH", covered, int(f[1]), int(f[2]), int(f[3]), when(f[4]), when(f[5]), int(f[6]))
                + name(f[7].rstrip(".")) + base64.b64decode("".join(f[8:])))
    if rtype == "NSEC":
        return name(f[0].rstrip(".")) + type_bitmap(f[1:])
    if rtype in ("NSEC3", "NSEC3PARAM"):
        salt = b"" if f[3] == "-" else bytes.fromhex(f[3])
        head = struct.pack(">BBHB", int(f[0]), int(f[1]), int(f[2]), len(salt)) + salt
        if rtype == "NSEC3PARAM":
            return head
        nxt = base64.b32decode(f[4].upper().translate(str.maketrans("0123456789ABCDEFGHIJKLMNOPQRSTUV",
                                                                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")))
        return head + bytes([len(nxt)]) + nxt + type_bitmap(f[5:])
    return None


def signed_replies(path):
    """Replies made of a signed zone's records, one per owner (all its
    records in the answer) and one of its denial records in the authority,
    names compressed as a server would."""
    groups = {}
    with open(path) as fh:
        for line in fh:
            f = line.split(";", 1)[0].split()
            if len(f) >= 5 and f[2] == "IN" and f[3] in TYPES:
                groups.setdefault(f[0].rstrip(".").lower(), []).append(f)
    denial = [f for g in groups.values() for f in g if f[3] in ("NSEC", "NSEC3") or f[3:5] in (["RRSIG", "NSEC"],
                                                                                            ["RRSIG", "NSEC3"])]
    for owner, records in list(groups.items())[:40] + [("", denial[:24])]:
        if not records:
            continue
        qname = owner or records[0][0].rstrip(".")
        msg = bytearray(struct.pack(">HHHHHH", 0x1234, 0x8180, 1, 0, 0, 0) + name(qname) + struct.pack(">HH", 1, 1))
        seen = {}

        def compress(n, at=0):
            """The name written at `at` past the message's end, its longest
            suffix already written replaced by a pointer."""
            labels = [l for l in n.rstrip(".").split(".") if l]
            out = b""
            for i in range(len(labels)):
                key = ".".join(labels[i:]).lower()
                if key in seen:
                    return out + struct.pack(">H", 0xC000 | seen[key])
                if len(msg) + at + len(out) < 0x3FFF:
                    seen[key] = len(msg) + at + len(out)
                out += bytes([len(labels[i])]) + labels[i].encode()
            return out + b"\0"

        count = 0
        for f in records:
            saved = dict(seen)
            owner_wire = compress(f[0])
            msg += owner_wire
            rdata_at = len(msg) + 10
            msg += b"\0" * 10  # type, class, TTL, length: filled below
            try:
                rdata = signed_rdata(f[3], f[4:], compress)
            except (ValueError, IndexError, binascii.Error):
                rdata = None  # BIND's records over several lines: not read here
            if rdata is None:
                del msg[rdata_at - 10 - len(owner_wire):]
                seen.clear()
                seen.update(saved)
                continue
            msg[rdata_at - 10:rdata_at] = struct.pack(">HHIH", TYPES[f[3]], 1, int(f[1]), len(rdata))
            msg += rdata
            count += 1
        struct.pack_into(">H", msg, 6 if owner else 8, count)
        yield bytes(msg)


def main():
    count = {}
    for root, _, files in os.walk(os.path.join(DATA, "pcaps")):
        for f in sorted(files):
            if f.endswith(".pcap"):
                for msg in pcap_payloads(os.path.join(root, f)):
                    # QR bit: replies seed the upstream target, queries the client one.
                    put("upstream_reply" if len(msg) > 2 and msg[2] & 0x80 else "query", msg)
    with open(os.path.join(DATA, "packets", "knot-sample-seed.pkt"), "rb") as f:
        put("query", f.read())
    for root, _, files in os.walk(os.path.join(DATA, "blocklists")):
        for f in sorted(files):
            if f.endswith((".txt.xz", ".conf.xz")):
                with lzma.open(os.path.join(root, f)) as fh:
                    lines = fh.read().splitlines()
                # The header and a slice from the middle of each list.
                put("list", b"\n".join(lines[:60] + lines[len(lines) // 2:len(lines) // 2 + 60]))
    for n, t in [("cached.example", 1), ("ads.example", 1), ("x.ads.example", 28), ("fine.ads.example", 1),
                 ("www.example", 255), ("www.example", 16)]:
        put("query", query(n, t))
        put("query", query(n, t, edns=4096))
    # As dnsmasq forwards them with add-subnet=32,128 and add-mac (or
    # add-mac=text): Client Subnet and MAC options in the OPT.
    ecs4 = struct.pack(">HHHBB", 8, 8, 1, 32, 0) + bytes([192, 168, 1, 50])
    ecs6 = struct.pack(">HHHBB", 8, 20, 2, 128, 0) + bytes([0xfd] + [0] * 14 + [0x50])
    mac = struct.pack(">HH", 65001, 6) + bytes([2, 0, 0x5e, 0x10, 0, 1])
    mac_text = struct.pack(">HH", 65073, 17) + b"02:00:5e:10:00:01"
    for options in (ecs4 + mac, ecs6, mac_text, ecs4[:-1]):
        m = bytearray(query("www.example", 1, edns=1232))
        m[-2:] = struct.pack(">H", len(options))
        put("query", bytes(m) + options)
    # dnsmasq's lease file (IPv4, a * hostname, a non-Ethernet address, the
    # DUID line, DHCPv6) and an ethers file.
    put("leases", b"1764720000 02:00:5e:10:00:01 192.168.1.50 kids-tablet 01:02:00:5e:10:00:01\n"
                  b"1764720100 02:00:5e:10:00:02 192.168.1.51 * *\n"
                  b"1764720200 06-02:00:5e:10:00:03 192.168.1.52 printer *\n"
                  b"duid 00:01:00:01:2c:5f:aa:bb:02:00:5e:10:00:ff\n"
                  b"1764720300 4166541 fd00::50 laptop 00:01:00:01:2c:5f:00:11:02:00:5e:10:00:04\n")
    put("leases", b"# static\n02:00:5e:10:00:09 media-box\n02:00:5e:10:00:0a 192.168.1.9\n")
    put("leases", b"IP address       HW type     Flags       HW address            Mask     Device\n"
                  b"192.168.1.60     0x1         0x2         02:00:5e:10:00:09     *        br-lan\n"
                  b"192.168.1.61     0x1         0x0         00:00:00:00:00:00     *        br-lan\n")
    v4 = lambda *a: (1, bytes(a))
    put("upstream_reply", reply("www.example", 1, [v4(192, 0, 2, 1)]))
    put("upstream_reply", reply("www.example", 1, [v4(192, 168, 1, 1)]))
    put("upstream_reply", reply("x.lan", 1, [v4(10, 0, 0, 1)]))
    put("upstream_reply", reply("www.example", 1, [("CNAME", "tracker.example"), v4(192, 0, 2, 7)]))
    put("upstream_reply", reply("app.example", 28, [(28, bytes(15) + b"\x01")]))
    for root, _, files in os.walk(os.path.join(REPO, "openwrt", "files")):
        for f in files:
            if f.endswith(".config"):
                with open(os.path.join(root, f), "rb") as fh:
                    put("uci", fh.read())
    for root, _, files in os.walk(os.path.join(REPO, "tests", "data", "uci")):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                put("uci", fh.read())
    put("list", b"0.0.0.0 a.example b.example\n127.0.0.1 localhost\n||c.example^\n@@||ok.c.example^\n*.w.example\n"
        b"||d.example^$badfilter\n||d.example^\n/regex/\nexample.com##.ad\nplain.example\n")
    # Time zones as OpenWrt's /etc/TZ holds them (its zoneinfo table), odd ones included.
    for tz in (b"CET-1CEST,M3.5.0,M10.5.0/3", b"EST5EDT,M3.2.0,M11.1.0", b"<+0545>-5:45", b"UTC0",
               b"AEST-10AEDT,M10.1.0,M4.1.0/3", b"GMT0BST,M3.5.0/1,M10.5.0", b"<-03>3<-02>,M3.5.0/-2,M10.5.0/-1",
               b"IST-2IDT,M3.4.4/26,M10.5.0", b"WART4WARST,J1/0,J365/25", b"XXX3YYY,0/0,365/25"):
        put("schedule", tz)
    # groups, clients and schedules, as the groups issue writes them
    put("uci", b"config client\n\toption name 'kids-tablet'\n\tlist match '192.168.1.50'\n\tlist match 'tablet-*'\n"
               b"\tlist match '02:00:5e:10:00:01'\n\tlist match '192.168.2.0/24'\n\tlist group 'kids'\n"
               b"config group 'kids'\n\toption schedule 'school-nights'\n\toption block_mode 'nxdomain'\n"
               b"config schedule 'school-nights'\n\tlist day 'sun'\n\tlist day 'thu'\n\toption start '21:00'\n"
               b"\toption end '07:00'\nconfig blocklist\n\toption name 'social'\n\tlist domain 'social.example'\n"
               b"\tlist group 'kids'\n")
    network_seeds()
    # The validator's reader: replies from the captures, and replies made of
    # the signed test zones' records (RRSIG, DNSKEY, DS, NSEC, NSEC3).
    for f in os.listdir(os.path.join(HERE, "corpus", "upstream_reply")):
        with open(os.path.join(HERE, "corpus", "upstream_reply", f), "rb") as fh:
            put("dnssec_records", fh.read())
    for f in sorted(os.listdir(os.path.join(DATA, "dnssec"))):
        if f.endswith(".signed"):
            for msg in signed_replies(os.path.join(DATA, "dnssec", f)):
                put("dnssec_records", msg)
    for t in ("query", "upstream_reply", "list", "uci", "leases", "schedule", "hpack", "http2", "http1",
              "edns_client", "control", "metrics_request", "dnssec_records"):
        d = os.path.join(HERE, "corpus", t)
        count[t] = len(os.listdir(d)) if os.path.isdir(d) else 0
    print("seeds: " + ", ".join(f"{t} {n}" for t, n in count.items()))


def frame(kind, flags, stream, payload):
    """An HTTP/2 frame (RFC 9113 §4.1)."""
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def network_seeds():
    """The parsers that read the network besides DNS: header blocks of RFC
    7541's examples, DoH responses as servers send them over HTTP/2 and
    HTTP/1.1 (RFC 8484 §4.2's example answer), dnsmasq's client options,
    control and metrics requests."""
    h = bytes.fromhex
    # RFC 7541 C.3 (requests, plain), C.4 (Huffman), C.6 (responses, Huffman, evictions):
    # the first byte splits the input into two blocks on one table.
    c3 = [h("828684410f7777772e6578616d706c652e636f6d"), h("828684be58086e6f2d6361636865"),
          h("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565")]
    c4 = [h("828684418cf1e3c2e5f23a6ba0ab90f4ff"), h("828684be5886a8eb10649cbf"),
          h("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf")]
    c6 = [h("488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3"),
          h("4883640effc1c0bf")]
    for blocks in (c3, c4, c6):
        put("hpack", bytes([len(blocks[0])]) + blocks[0] + blocks[1])
    answer = h("abcd81800001000100000000037777770765786" "16d706c6503636f6d0000010001c00c000100010000"
               "0e10000400000000")
    status = h("88")  # :status 200 (static index 8)
    ctype = b"\x5f\x17application/dns-message"  # content-type, literal with incremental indexing
    length = b"\x5c" + bytes([len(str(len(answer)))]) + str(len(answer)).encode()
    settings = frame(4, 0, 0, struct.pack(">HI", 3, 100) + struct.pack(">HI", 4, 65535))
    put("http2", settings + frame(4, 1, 0, b"") + frame(1, 4, 1, status + ctype + length) + frame(0, 1, 1, answer))
    put("http2", settings + frame(1, 5, 1, h("8d")))  # :status 404, no body
    put("http2", frame(7, 0, 0, struct.pack(">II", 1, 0)))  # GOAWAY
    put("http2", frame(3, 0, 1, struct.pack(">I", 7)))  # RST_STREAM REFUSED_STREAM
    put("http2", frame(6, 0, 0, b"12345678") + frame(8, 0, 0, struct.pack(">I", 1 << 20)))  # PING, WINDOW_UPDATE
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/dns-message\r\n"
    put("http1", head + b"Content-Length: %d\r\n\r\n" % len(answer) + answer)
    put("http1", head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(answer) + answer +
        b"\r\n0\r\nX-Trailer: 1\r\n\r\n")
    put("http1", b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    put("http1", head + b"Connection: close\r\n\r\n" + answer)
    # Client Subnet /32 and /128 (RFC 7871 §6), MAC raw and as text (dnsmasq's add-mac).
    ecs4 = struct.pack(">HHHBB", 8, 8, 1, 32, 0) + bytes([192, 168, 1, 50])
    ecs6 = struct.pack(">HHHBB", 8, 20, 2, 128, 0) + h("20010db8000000000000000000000050")
    mac = struct.pack(">HH", 65001, 6) + h("02005e100001")
    mac_text = struct.pack(">HH", 65073, 17) + b"02:00:5e:10:00:01"
    for opts in (ecs4, ecs4 + mac, ecs6 + mac_text, ecs4 + ecs4, mac + mac_text):
        put("edns_client", b"\x00" + opts)
    for line in (b"stats", b"metrics", b"commit", b"update", b"pause 300", b"pause 0", b"pause 3600 kids",
                 b"pause 18446744073709551615", b"pause -1", b"pause 5m", b"hello",
                 b"allow 3600 group kids service youtube", b"block 60 client 192.0.2.7 name games.example",
                 b"block 0 client 02:00:5e:10:00:01 name Example.COM.", b"allow 31622400 client kids-tablet name x",
                 b"allow 18446744073709551615 group kids name a.example", b"exceptions"):
        put("control", line + b"\n")
    for req in (b"GET /metrics HTTP/1.1\r\nHost: router\r\nAccept: text/plain\r\n\r\n",
                b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n", b"POST /metrics HTTP/1.1\r\n\r\n", b"GET / HTTP/1.1\r\n\r\n"):
        put("metrics_request", req)


main()
