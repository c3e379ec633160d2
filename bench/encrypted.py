#!/usr/bin/env python3
"""Misses over DNS over TLS and over HTTPS beside the same misses in plain.

One Unbound answers every name under bench.example from local data (no
recursion, no network), on a plain port, a DoT port and a DoH port
(HTTP/2). HydraDNS sends every query upstream (each name is new) to that
Unbound, in plain, over TLS or over HTTPS, and dnsperf asks at a fixed
100 QPS. Rounds alternate the transports. Per transport, the median over
rounds of:

- latency: dnsperf's average per query, the gateway's and Unbound's work and
  the transport's included; the difference is what encryption adds to a miss;
- CPU µs per miss: the gateway's (from /proc/PID/task/*/schedstat), and
  Unbound's beside it: what the server spends on each transport, which no
  forwarder can remove;
- wake-ups per miss: the context switches of all the gateway's threads
  (a count, steadier than the times on a VM);
- handshakes per 10,000 misses, from the gateway's own stats, which must
  also count every query dnsperf sent as an upstream answer;
- RSS after the round, and (last) with four encrypted upstreams in use
  (two DoT, two DoH).

    bench/encrypted.py --hydradns BIN [--rounds 3] [--secs 30]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TLS = os.path.join(HERE, "..", "tests", "data", "tls")
PLAIN_PORT, DOT_PORT, LISTEN, DOH_PORT = 5391, 5392, 5393, 5394
UPSTREAM = {
    "plain": f"127.0.0.1:{PLAIN_PORT}",
    "tls": f"tls://localhost:{DOT_PORT}#127.0.0.1",
    "https": f"https://localhost:{DOH_PORT}/dns-query#127.0.0.1",
}
NAME = {"plain": "plain UDP", "tls": "DNS over TLS", "https": "DNS over HTTPS (HTTP/2)"}


def unbound(work):
    conf = os.path.join(work, "unbound.conf")
    with open(conf, "w") as f:
        f.write(f"""server:
\tinterface: 127.0.0.1@{PLAIN_PORT}
\tinterface: 127.0.0.1@{DOT_PORT}
\tinterface: 127.0.0.2@{DOT_PORT}
\tinterface: 127.0.0.3@{DOT_PORT}
\tinterface: 127.0.0.4@{DOT_PORT}
\tinterface: 127.0.0.1@{DOH_PORT}
\tinterface: 127.0.0.2@{DOH_PORT}
\ttls-port: {DOT_PORT}
\thttps-port: {DOH_PORT}
\ttls-service-key: "{TLS}/server.key"
\ttls-service-pem: "{TLS}/server.pem"
\tdo-daemonize: no
\tusername: ""
\tchroot: ""
\tdirectory: "{work}"
\tpidfile: ""
\tuse-syslog: no
\tlogfile: ""
\tverbosity: 0
\tnum-threads: 1
\tdo-ip6: no
\taccess-control: 127.0.0.0/8 allow
\tmodule-config: "iterator"
\tincoming-num-tcp: 100
\ttcp-idle-timeout: 120000
\tlocal-zone: "bench.example." redirect
\tlocal-data: "bench.example. 300 IN A 192.0.2.1"
""")
    p = subprocess.Popen(["taskset", "-c", "1", "unbound", "-d", "-c", conf])
    time.sleep(1)
    return p


def gateway(binary, work, upstreams, strategy="failover"):
    conf = os.path.join(work, "hydradns.conf")
    ups = "".join(f"\tlist upstream '{u}'\n" for u in upstreams)
    with open(conf, "w") as f:
        f.write(f"""config hydradns 'main'
\tlist listen '127.0.0.1:{LISTEN}'
{ups}\toption ca_file '{TLS}/ca.pem'
\toption upstream_strategy '{strategy}'
\toption control_socket '{work}/ctl.sock'
\toption serve_stale '0'
\toption prefetch '0'
\toption stats_interval '0'
config querylog 'querylog'
\toption enabled '0'
""")
    p = subprocess.Popen([binary, "run", "--user", "root", "--log", "stderr", "-c", conf], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return p, conf


def stats(binary, conf):
    out = subprocess.run([binary, "stats", "-c", conf, "--json"], capture_output=True, check=True, text=True)
    return json.loads(out.stdout)


def cpu_ms(pid):
    """CPU of every thread so far, from schedstat (ns; /proc/PID/stat counts in 10 ms ticks)."""
    return sum(thread_ns(pid).values()) / 1e6


def thread_ns(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[f"{name}/{tid}"] = int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def switches(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def names(path, start, n):
    with open(path, "w") as f:
        for i in range(start, start + n):
            f.write(f"q{i}.bench.example A\n")


def dnsperf(datafile, secs, qps):
    cmd = ["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(LISTEN), "-d", datafile, "-l",
           str(secs), "-c", "1", "-T", "1", "-t", "2", "-Q", str(qps)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    r = {}
    for line in out.splitlines():
        w = line.split()
        if line.strip().startswith("Queries sent:"):
            r["sent"] = int(w[2])
        elif line.strip().startswith("Queries completed:"):
            r["completed"] = int(w[2])
        elif line.strip().startswith("Average Latency"):
            r["avg_us"] = float(w[3]) * 1e6
    return r


def round_of(binary, work, transport, secs, qps, start, server_pid):
    p, conf = gateway(binary, work, [UPSTREAM[transport]])
    try:
        data = os.path.join(work, "names.txt")
        names(data, start, 200)
        dnsperf(data, 2, qps)  # warm: the connection is made here
        names(data, start + 200, secs * qps + 100)
        before, t0, s0, w0 = stats(binary, conf), thread_ns(p.pid), cpu_ms(server_pid), switches(p.pid)
        r = dnsperf(data, secs, qps)
        t1, after, s1, w1 = thread_ns(p.pid), stats(binary, conf), cpu_ms(server_pid), switches(p.pid)
        cpu0, cpu1 = sum(t0.values()) / 1e6, sum(t1.values()) / 1e6
        u0, u1 = before["upstreams"][0], after["upstreams"][0]
        answers = u1["answers"] - u0["answers"]
        if answers != r["sent"] or r["completed"] != r["sent"]:
            sys.exit(f"{transport}: sent {r['sent']}, completed {r['completed']}, upstream answers {answers}")
        if os.environ.get("BENCH_THREADS"):
            per = {k: (t1[k] - t0.get(k, 0)) / 1000 / answers for k in t1}
            print(transport, {k: round(v, 1) for k, v in per.items() if v > 0.05}, file=sys.stderr)
        return {
            "latency_us": r["avg_us"],
            "cpu_us": (cpu1 - cpu0) * 1000 / answers,
            "server_cpu_us": (s1 - s0) * 1000 / answers,
            "wakeups": (w1 - w0) / answers,
            "handshakes_per_10k": (u1.get("handshakes", 0) - u0.get("handshakes", 0)) * 10000 / answers,
            "rss_kib": rss_kib(p.pid),
            "misses": answers,
        }
    finally:
        p.terminate()
        p.wait()


def direct(transport, n=1500, qps=100):
    """Unbound alone, asked by this script over UDP or DoT (one connection),
    paced at `qps`: the median reply time. The difference between the two
    is the server's and the kernel's part of what TLS adds, which no
    forwarder can remove."""
    import socket
    import ssl
    import struct
    times = []
    if transport == "tls":
        ctx = ssl.create_default_context(cafile=os.path.join(TLS, "ca.pem"))
        raw = socket.create_connection(("127.0.0.1", DOT_PORT))
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s = ctx.wrap_socket(raw, server_hostname="localhost")
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("127.0.0.1", PLAIN_PORT))
    s.settimeout(2)
    for i in range(n):
        name = b"".join(bytes([len(p)]) + p for p in f"d{i}-{transport}.bench.example".encode().split(b".")) + b"\0"
        q = struct.pack(">HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + name + b"\0\1\0\1"
        t0 = time.perf_counter()
        if transport == "tls":
            s.sendall(struct.pack(">H", len(q)) + q)
            got = b""
            while len(got) < 2 or len(got) < 2 + struct.unpack(">H", got[:2])[0]:
                got += s.recv(4096)
        else:
            s.send(q)
            s.recv(4096)
        times.append(time.perf_counter() - t0)
        time.sleep(max(0, 1 / qps - times[-1]))
    s.close()
    return statistics.median(times) * 1e6


def four_upstreams(binary, work):
    ups = [f"tls://localhost:{DOT_PORT}#127.0.0.{i}" for i in range(1, 3)]
    ups += [f"https://localhost:{DOH_PORT}/dns-query#127.0.0.{i}" for i in range(1, 3)]
    p, conf = gateway(binary, work, ups, strategy="random")
    try:
        data = os.path.join(work, "names4.txt")
        names(data, 10_000_000, 2000)
        dnsperf(data, 10, 100)
        s = stats(binary, conf)
        connected = sum(1 for u in s["upstreams"] if u.get("handshakes", 0) >= 1)
        return rss_kib(p.pid), connected
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hydradns", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=30)
    ap.add_argument("--qps", type=int, default=100)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="hydradns-encrypted-")
    ub = unbound(work)
    try:
        results = {t: [] for t in UPSTREAM}
        start = 0
        for _ in range(args.rounds):
            for t in UPSTREAM:
                results[t].append(round_of(args.hydradns, work, t, args.secs, args.qps, start, ub.pid))
                start += 1_000_000
        rss4, connected = four_upstreams(args.hydradns, work)
        alone = {t: direct(t) for t in ("plain", "tls")}
    finally:
        ub.terminate()
        ub.wait()
    med = {t: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for t, rs in results.items()}
    print(f"Misses at {args.qps} QPS, {args.rounds} rounds of {args.secs} s, medians "
          f"(every name new; Unbound answers from local data on the same machine)\n")
    print("| upstream | latency per miss | added | gateway CPU per miss | Unbound CPU per miss | "
          "gateway wake-ups per miss | handshakes per 10,000 misses | RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for t in UPSTREAM:
        m = med[t]
        added = f"{m['latency_us'] - med['plain']['latency_us']:+.0f} µs" if t != "plain" else ""
        print(f"| {NAME[t]} | {m['latency_us']:.0f} µs | {added} | {m['cpu_us']:.1f} µs | {m['server_cpu_us']:.1f} µs | {m['wakeups']:.2f} | "
              f"{m['handshakes_per_10k']:.2f} | {m['rss_kib'] / 1024:.1f} MiB |")
    print(f"\nUnbound alone, asked directly (median of 1,500 at 100 QPS): {alone['plain']:.0f} µs over UDP, "
          f"{alone['tls']:.0f} µs over DoT: {alone['tls'] - alone['plain']:+.0f} µs is the server's and the kernel's part.")
    print(f"\nFour encrypted upstreams (strategy random, {connected} connected): RSS {rss4 / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
