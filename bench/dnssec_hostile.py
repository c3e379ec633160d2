#!/usr/bin/env python3
"""A hostile zone against a validating HydraDNS (issue 61's work limits):
what a second, ordinary client sees while one client floods names in it.

The world: tests/dnssec's signed rig (`run.sh --serve-only`) for the
ordinary names, and a zone of the attacker's, `trap.hostile.`, served by an
authoritative Unbound of its own behind a non-validating recursive Unbound
(a stub for the trap, everything else forwarded to the rig's recursive).
HydraDNS asks that recursive, with the rig's root and the trap's DS as
trust anchors (the trap stands for a zone under a signed TLD whose keys
are cached: its own keys are what it costs).

The trap is signed with one RSA key of `--bits` bits whose public exponent
is `--exponent` (ring takes up to 2^33 - 1, the costliest exponent it
takes), every RRSIG preceded by 7 broken copies by the same key (KeyTrap's
shape within the 8 tries an RRset gets), its DNSKEY RRset's TTL 0 (so the
key cache never keeps it), and every name a wildcard CNAME into a chain of
`--links` CNAMEs: a name the flood has not asked before is a validated
answer of (links + 2) RRsets, each after 8 signature checks.

Phases, HydraDNS pinned to CPU 0 with one worker (a router's core),
clients on CPU 1: the victim alone (cached names and new names under
wild.alg13.example at --victim-qps), the attacker alone (new names in the
trap at --attack-qps, DO set, --outstanding in flight), then both at once.
Prints each phase's answer rate, the victim's latency percentiles, the
answers validated (the victim's misses included: one in five of its
queries), the gateway's CPU per validation and its RSS.

    bench/dnssec_hostile.py --hydradns BIN [--secs 15] [--bits 8192] [--exponent 8589934591]

Needs what bench/dnssec.py needs, and openssl. Loopback only; everything it
starts is stopped on exit.
"""

import argparse
import atexit
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import dnssec
import redline

B64 = base64.b64encode


def b64int(n):
    return B64(n.to_bytes((n.bit_length() + 7) // 8, "big")).decode()


def make_key(work, zone, bits, exponent):
    """An RSA/SHA-256 KSK for `zone` in BIND's files (ldns-signzone reads them)."""
    pem = os.path.join(work, "trap.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", f"rsa_keygen_bits:{bits}",
                    "-pkeyopt", f"rsa_keygen_pubexp:{exponent}", "-out", pem], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from cryptography.hazmat.primitives import serialization
    k = serialization.load_pem_private_key(open(pem, "rb").read(), None)
    p = k.private_numbers()
    e, n = p.public_numbers.e, p.public_numbers.n
    eb = e.to_bytes((e.bit_length() + 7) // 8, "big")
    pub = (bytes([len(eb)]) if len(eb) < 256 else b"\0" + len(eb).to_bytes(2, "big")) + eb + \
        n.to_bytes((n.bit_length() + 7) // 8, "big")
    rdata = bytes([1, 1, 3, 8]) + pub
    ac = 0
    for i, b in enumerate(rdata):
        ac += b if i & 1 else b << 8
    tag = (ac + (ac >> 16)) & 0xFFFF
    base = os.path.join(work, f"K{zone}+008+{tag:05d}")
    with open(base + ".key", "w") as f:
        f.write(f"{zone} 0 IN DNSKEY 257 3 8 {B64(pub).decode()}\n")
    with open(base + ".private", "w") as f:
        f.write("Private-key-format: v1.3\nAlgorithm: 8 (RSASHA256)\n"
                f"Modulus: {b64int(n)}\nPublicExponent: {b64int(e)}\nPrivateExponent: {b64int(p.d)}\n"
                f"Prime1: {b64int(p.p)}\nPrime2: {b64int(p.q)}\nExponent1: {b64int(p.dmp1)}\n"
                f"Exponent2: {b64int(p.dmq1)}\nCoefficient: {b64int(p.iqmp)}\n")
    return base


def make_trap(work, bits, exponent, links, copies=7):
    zone = "trap.hostile."
    key = make_key(work, zone, bits, exponent)
    body = [f"$ORIGIN {zone}", "$TTL 3600",
            "@ IN SOA ns.example. hostmaster.example. 1 7200 3600 1209600 3600", "@ IN NS ns.example.",
            f"@ 0 IN DNSKEY {open(key + '.key').read().split('DNSKEY ', 1)[1].strip()}",
            "* IN CNAME l1"]
    body += [f"l{i} IN CNAME l{i + 1}" for i in range(1, links)] + [f"l{links} IN A 192.0.2.66"]
    src = os.path.join(work, "trap.zone")
    with open(src, "w") as f:
        f.write("\n".join(body) + "\n")
    signed = os.path.join(work, "trap.signed")
    subprocess.run(["ldns-signzone", "-i", time.strftime("%Y%m%d%H%M%S", time.gmtime(time.time() - 86400)),
                    "-e", time.strftime("%Y%m%d%H%M%S", time.gmtime(time.time() + 30 * 86400)),
                    "-f", signed, src, key], check=True)
    out = []
    for line in open(signed).read().splitlines():
        f = line.split(";", 1)[0].split()
        if f and len(f) > 4 and f[3] == "RRSIG":
            sig = bytearray(base64.b64decode("".join(f[12:])))
            for c in range(copies):
                bad = bytearray(sig)
                bad[len(bad) // 2] ^= c + 1
                out.append(" ".join(f[:12] + [B64(bytes(bad)).decode()]))
        out.append(line)
    with open(signed, "w") as f:
        f.write("\n".join(out) + "\n")
    ds = subprocess.run(["ldns-key2ds", "-n", "-2", key + ".key"], capture_output=True, text=True,
                        check=True).stdout
    return zone, signed, ds


def unbound(work, name, port, modules, extra):
    conf = os.path.join(work, f"{name}.conf")
    with open(conf, "w") as f:
        f.write(f"""server:
    interface: 127.0.0.1
    port: {port}
    so-reuseport: no
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "{work}"
    pidfile: ""
    use-syslog: no
    logfile: "{work}/{name}.log"
    num-threads: 1
    do-ip6: no
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    qname-minimisation: no
    rrset-roundrobin: no
    module-config: "{modules}"
{extra}""")
    proc = subprocess.Popen(["taskset", "-c", "1", "unbound", "-d", "-c", conf],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    atexit.register(lambda: (proc.terminate(), proc.wait()))
    return proc


def dig(port, name, qtype="A", extra=()):
    return subprocess.run(["dig", "@127.0.0.1", "-p", str(port), "+time=10", "+tries=1", *extra, name, qtype],
                          capture_output=True, text=True).stdout


def perf(port, path, secs, qps, outstanding, do, verbose):
    cmd = ["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", path, "-l", str(secs),
           "-c", "1", "-T", "1", "-q", str(outstanding), "-Q", str(qps), "-t", "5"]
    cmd += (["-D"] if do else []) + (["-v"] if verbose else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hydradns", required=True)
    ap.add_argument("--secs", type=int, default=15)
    ap.add_argument("--bits", type=int, default=8192)
    ap.add_argument("--exponent", type=int, default=2**33 - 1)
    ap.add_argument("--links", type=int, default=4, help="CNAMEs after the wildcard's (each 8 checks)")
    ap.add_argument("--victim-qps", type=int, default=100)
    ap.add_argument("--attack-qps", type=int, default=200)
    ap.add_argument("--outstanding", type=int, default=100)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    hydradns = os.path.abspath(args.hydradns)
    work = tempfile.mkdtemp(prefix="hydradns-hostile-")
    atexit.register(shutil.rmtree, work, True)
    rig_proc, rig = dnssec.start_rig(work)
    atexit.register(dnssec.stop_rig, rig_proc, work)
    zone, signed, ds = make_trap(work, args.bits, args.exponent, args.links)
    p_auth, p_rec = redline.free_port(), redline.free_port()
    unbound(work, "auth", p_auth, "iterator",
            f'auth-zone:\n    name: "{zone}"\n    zonefile: "{signed}"\n    for-downstream: yes\n'
            '    for-upstream: no\n    fallback-enabled: no\n')
    rport = rig["recursive"].split(":")[1]
    unbound(work, "front", p_rec, "iterator",
            f'stub-zone:\n    name: "{zone}"\n    stub-addr: 127.0.0.1@{p_auth}\n'
            f'forward-zone:\n    name: "."\n    forward-addr: 127.0.0.1@{rport}\n')
    anchor = os.path.join(work, "anchors")
    with open(anchor, "w") as f:
        f.write(open(rig["anchor"]).read() + "\n" + ds + "\n")
    for _ in range(100):
        if "status: NOERROR" in dig(p_rec, "x.trap.hostile", extra=["+dnssec", "+cd"]):
            break
        time.sleep(0.2)
    else:
        raise SystemExit("the front recursive does not answer x.trap.hostile")
    sigs = dig(p_rec, "x.trap.hostile", extra=["+dnssec", "+cd", "+tcp"]).count("\tRRSIG\t")
    print(f"trap: RSA-{args.bits}, e={args.exponent}, x.trap.hostile A: {sigs} RRSIGs in the answer",
          file=sys.stderr)

    s = redline.Server("hostile", [], blocked_canary=False)
    s.port = redline.free_port()
    conf = os.path.join(work, "h.conf")
    with open(conf, "w") as f:
        f.write(f"""config hydradns 'main'
\tlist listen '127.0.0.1:{s.port}'
\tlist upstream '127.0.0.1:{p_rec}'
\toption dnssec '1'
\toption trust_anchor_file '{anchor}'
\toption time_check '0'
\toption cache_size '10000'
\toption workers '{args.workers}'
\toption stats_interval '0'
\toption control_socket '{work}/h.sock'
config querylog 'querylog'
\toption enabled '0'
\toption path '{work}/log/live.db'
\toption flash_path '{work}/log/flash.db'
""")
    s.cmd = [hydradns, "run", "--user", "root", "--log", "stderr", "-c", conf]
    s.cpus = "0"
    log = open(os.path.join(work, "hydradns.log"), "w")
    s.start(log)
    atexit.register(s.stop)
    out = dig(s.port, "x.trap.hostile", extra=["+dnssec"])
    print("gateway on x.trap.hostile: " + next((x for x in out.splitlines() if "status:" in x), out[-300:]),
          file=sys.stderr)

    hits = [f"www.{a}.example {t}" for a in dnssec.ALGS for t in ("A", "AAAA", "TXT")]
    warm = dnssec.write(work, "warm.txt", hits + ["www.alg13.example A", "x.wild.alg13.example A"])
    r = redline.dnsperf(s.port, warm, 30, qps=50, outstanding=1, runs=1)
    print(f"warm-up: {r.get('completed')} of {len(hits) + 2}", file=sys.stderr)
    n = args.victim_qps * args.secs * 4
    # Four in five cached, one in five a new name (a validated miss, keys cached).
    victim_lines = [hits[i % len(hits)] if i % 5 else f"v{i}.wild.alg13.example A" for i in range(n)]
    attack_lines = [f"a{i}.trap.hostile A" for i in range(args.attack_qps * args.secs * 4)]

    def counters():
        out = subprocess.run([hydradns, "stats", "-c", conf, "--json"], capture_output=True, text=True)
        return json.loads(out.stdout).get("counters", {}) if out.returncode == 0 else {}

    def validated(c):
        return sum(c.get(f"dnssec_{k}", 0) for k in ("secure", "insecure", "bogus", "indeterminate"))

    def phase(label, victim, attack, offset):
        files = []
        if victim:
            files.append(("victim", dnssec.write(work, f"v-{label}.txt", victim_lines[offset:] + victim_lines[:offset])))
        if attack:
            files.append(("attack", dnssec.write(work, f"a-{label}.txt",
                                                 attack_lines[offset:] + attack_lines[:offset])))
        c0 = counters()
        cpu0, rss = redline.proc_cpu(s.proc.pid), redline.proc_rss(s.proc.pid)
        procs = {}
        for who, path in files:
            if who == "victim":
                procs[who] = perf(s.port, path, args.secs, args.victim_qps, 20, False, True)
            else:
                procs[who] = perf(s.port, path, args.secs, args.attack_qps, args.outstanding, True, False)
        peak = rss
        while any(p.poll() is None for p in procs.values()):
            peak = max(peak, redline.proc_rss(s.proc.pid))
            time.sleep(0.2)
        cpu = redline.proc_cpu(s.proc.pid) - cpu0
        c1 = counters()
        row = {"phase": label, "cpu": cpu, "rss0": rss, "peak": peak, "validated": validated(c1) - validated(c0),
               "overloaded": c1.get("overloaded", 0) - c0.get("overloaded", 0)}
        for who, p in procs.items():
            row[who] = redline.summary(p.stdout.read(), verbose=(who == "victim"))
        return row

    rows = [phase("victim alone", True, False, 0)]
    rows.append(phase("attack alone", False, True, 0))
    rows.append(phase("victim + attack", True, True, args.victim_qps * args.secs * 2))
    print(f"\nHydraDNS {redline.commit()}, {redline.cpu_model()}, workers {args.workers} on CPU 0; "
          f"trap RSA-{args.bits} e={args.exponent}, {sigs} RRSIGs an answer; {args.secs} s a phase")
    print("| phase | victim answered/sent | victim p50 / p99 / max ms | attack answered/sent (q/s) "
          "| validated (SERVFAIL overloaded) | gateway CPU s | CPU ms a validation | RSS start → peak |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        v, a = r.get("victim"), r.get("attack")
        vs = f"{v['completed']}/{v['sent']}" if v else "-"
        lat = sorted(x * 1000 for x in v["latencies"]) if v else []
        vl = (f"{redline.percentile(lat, 50):.1f} / {redline.percentile(lat, 99):.1f} / {lat[-1]:.1f}"
              if lat else "-")
        att = f"{a['completed']}/{a['sent']} ({a['qps']:.0f})" if a else "-"
        per = f"{1000 * r['cpu'] / r['validated']:.1f}" if r["validated"] else "-"
        print(f"| {r['phase']} | {vs} | {vl} | {att} | {r['validated']} ({r['overloaded']}) | {r['cpu']:.2f} | {per} | "
              f"{redline.mib(r['rss0'])} → {redline.mib(r['peak'])} |")
    c = counters()
    if c:
        print("\ncounters: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if "dnssec" in k or k in
                                        ("forwarded", "coalesced", "servfail", "overloaded")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
