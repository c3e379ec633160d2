#!/usr/bin/env python3
"""Soak: a realistic mix at a fixed rate for a set time, query log on, a list
refresh half-way, RSS sampled every second. Fails unless the server's own
counters account for everything sent, no query failed, every log entry is
written or counted, and RSS stays bounded. Run through bench/soak.sh.

--wan-outage MIN: the upstream answers with TTL 30 s and is stopped
(SIGSTOP, as a dead WAN: queries go out, nothing comes back) for MIN minutes
after the warm-up. Then it fails unless every name cached before the outage
keeps resolving through it (a checker asks 100 of them every second), names
never seen get SERVFAIL within the upstream timeout, and, once the upstream
is back, the count of stale answers stops growing (the last 15 s of at
least a minute's recovery add none). Queries failed or turned away during
the outage are then expected: they are the names nobody could know."""
import argparse
import http.server
import os
import platform
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the repository
sys.path.insert(0, os.path.dirname(__file__))
from redline import (  # noqa: E402
    CANARY, commit_log, cpu_model, first_answer, free_port, popular_names, proc_cpu, proc_rss, stats)


def machine():
    cpu = cpu_model("?")
    return f"{os.cpu_count()}-core {cpu}, Linux {platform.release()}"


WARM_UP = 60  # seconds


def kernel_udp_drops():
    """Datagrams the kernel dropped for full receive buffers (all sockets)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    head, vals = rows[0], rows[1]
    return int(vals[head.index("RcvbufErrors")])


def malformed(rng):
    """Junk a LAN device might send: short, random, a bad opcode, a response,
    or a name that runs off the end."""
    kind = rng.randrange(5)
    qid = rng.randrange(65536)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
    if kind == 1:
        return struct.pack(">H", qid) + bytes(rng.randrange(256) for _ in range(rng.randrange(12, 80)))
    if kind == 2:  # opcode 2 (STATUS)
        return struct.pack(">HHHHHH", qid, 0x1000, 1, 0, 0, 0) + b"\x01a\x00\x00\x01\x00\x01"
    if kind == 3:  # a response, not a query
        return struct.pack(">HHHHHH", qid, 0x8180, 1, 0, 0, 0) + b"\x01a\x00\x00\x01\x00\x01"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + b"\x3fabc"


def junk_sender(port, rate, stop, sent):
    rng = random.Random(7)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    interval = 1.0 / rate
    nxt = time.monotonic()
    while not stop.is_set():
        s.sendto(malformed(rng), ("127.0.0.1", port))
        sent[0] += 1
        try:
            while True:
                s.recv(4096)
        except OSError:
            pass
        nxt += interval
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def dnsperf(port, datafile, secs, qps, tcp=False):
    cmd = ["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", datafile, "-l", str(secs),
           "-Q", str(qps), "-c", "1", "-T", "1", "-q", "500", "-t", "2"]
    if tcp:
        cmd += ["-m", "tcp"]
    # Output to a file, not a pipe: dnsperf prints a line per timed-out
    # query, and on a slow VM that filled an unread pipe and blocked it for
    # good (the soak hung past its two minutes).
    out = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
    proc.out = out
    return proc


def dnsperf_result(proc):
    proc.wait()
    proc.out.seek(0)
    out = proc.out.read()
    proc.out.close()
    r = {}
    for line in out.splitlines():
        w = line.split()
        for key, label in (("sent", "Queries sent:"), ("completed", "Queries completed:"), ("lost", "Queries lost:")):
            if line.strip().startswith(label):
                r[key] = int(w[2])
    if "sent" not in r:
        raise SystemExit(f"dnsperf failed:\n{out}")
    return r


def rcode_of(port, name, qid, wait):
    """RCODE of the answer to `name` (A), -1 if none came within `wait` s; and how long it took."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(wait)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00\x00\x01\x00\x01"
    t = time.monotonic()
    try:
        s.sendto(q, ("127.0.0.1", port))
        while True:
            r = s.recv(4096)
            if r[:2] == q[:2]:
                return r[3] & 0x0F, time.monotonic() - t
    except OSError:
        return -1, time.monotonic() - t
    finally:
        s.close()


def outage_checker(port, cached, stop, out):
    """During the outage: 100 names cached before it, each once a second, must
    answer NOERROR; one never-seen name a second must fail within 2.5 s."""
    qid = 0
    while not stop.is_set():
        t0 = time.monotonic()
        for name in cached:
            qid = (qid + 1) % 65536
            rc, _ = rcode_of(port, name, qid, 3.0)
            out["cached_asked"] += 1
            if rc != 0:
                out["cached_failed"].append((name, rc))
        qid = (qid + 1) % 65536
        rc, took = rcode_of(port, f"never{qid}.outage.example", qid, 5.0)
        out["new_asked"] += 1
        if stop.is_set():
            break  # the upstream may be back: this one says nothing about the outage
        out["new_slowest"] = max(out["new_slowest"], took)
        if rc == 0:
            out["new_answered"] += 1
        stop.wait(max(0.0, 1.0 - (time.monotonic() - t0)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with the examples")
    ap.add_argument("--hydradns", required=True)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--qps", type=int, default=5000, help="UDP queries per second")
    ap.add_argument("--tcp-qps", type=int, default=200)
    ap.add_argument("--junk-qps", type=int, default=100)
    ap.add_argument("--wan-outage", type=float, default=0, metavar="MIN",
                    help="stop the upstream for MIN minutes after the warm-up")
    ap.add_argument("--out")
    args = ap.parse_args()
    outage = int(args.wan_outage * 60)
    # An outage needs a warm-up before it and a minute of recovery after.
    secs = max(2 * WARM_UP, int(args.minutes * 60), WARM_UP + outage + 60 if outage else 0)
    work = tempfile.mkdtemp(prefix="hydradns-soak-")
    logdir = tempfile.mkdtemp(prefix="hydradns-soak-log-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    rng = random.Random(20261130)

    # The blocklist is downloaded from a local web server, as from a list host.
    www = os.path.join(work, "www")
    os.makedirs(www)
    list_path = os.path.join(www, "list.txt")
    subprocess.run([os.path.join(args.bin, "examples", "synth-list"), "100000", list_path], check=True)
    with open(list_path, "a") as f:
        f.write(CANARY + "\n")
    names = [line.strip() for line in open(list_path) if line.strip() and not line.startswith("#")]

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=www, **kw)

        def log_message(self, *a):
            pass

    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=web.serve_forever, daemon=True).start()

    upstream_port = free_port()
    # With an outage, answers live 30 s, so cached names expire during it.
    upstream = subprocess.Popen(["taskset", "-c", "1", os.path.join(args.bin, "examples", "bench-upstream"),
                                 f"127.0.0.1:{upstream_port}"] + (["30"] if outage else []))
    port = free_port()
    conf = os.path.join(work, "soak.conf")
    # The mix asks 5,000 popular names as A and AAAA: more than the default
    # 4,096 entries hold, so a name could be evicted by the next miss the
    # moment after it was cached. For the outage's "cached before" to mean
    # cached, the cache holds the working set.
    cache = "\toption cache_size '16384'\n" if outage else ""
    with open(conf, "w") as f:
        f.write(f"""config hydradns 'main'
\tlist listen '127.0.0.1:{port}'
\tlist upstream '127.0.0.1:{upstream_port}'
\toption control_socket '{work}/control.sock'
\toption list_dir '{work}/lists'
\toption refresh_interval '0'
\toption stats_interval '60'
{cache}config blocklist
\toption name 'soak'
\toption url 'http://127.0.0.1:{web.server_port}/list.txt'
config querylog 'querylog'
\toption path '{logdir}/live/queries.db'
\toption flash_path '{work}/flash/queries.db'
\toption flush_interval '60s'
\toption max_size '8M'
""")
    # The mix of the redline benchmark: 25 % blocked (names and subdomains),
    # 65 % popular names (cache hits once warm), 10 % names never seen before.
    popular = popular_names()
    blocked_set = set(names)
    hits = [n for n in popular[:20000] if n not in blocked_set][:5000]
    sample = rng.sample(names, 20000)
    mixfile = os.path.join(work, "mix.txt")
    lines = args.qps * secs + 1000
    with open(mixfile, "w") as f:
        for i in range(lines):
            r = rng.random()
            if r < 0.25:
                n = rng.choice(sample)
                f.write((n if i % 2 else f"ads.{n}") + " A\n")
            elif r < 0.90:
                f.write(f"{rng.choice(hits)} {'A' if r < 0.8 else 'AAAA'}\n")
            else:
                f.write(f"u{i}.miss.example A\n")
    tcpfile = os.path.join(work, "tcp.txt")
    with open(tcpfile, "w") as f:
        for i in range(args.tcp_qps * secs + 100):
            f.write(f"{rng.choice(hits if i % 3 else sample)} A\n")

    log = open(os.path.join(work, "gateway.log"), "w")
    gw = subprocess.Popen(["taskset", "-c", "0", args.hydradns, "run", "--user", "root", "--log", "stderr", "-c", conf],
                          stdout=log, stderr=log)
    samples = []
    try:
        first_answer(port, True, time.monotonic() + 60)
        # The start-up probes' log entries are committed first (`log` asks
        # for it; a batch may wait 10 s), so they are not counted in the run.
        time.sleep(0.5)
        commit_log(args.hydradns, conf)
        drops0 = kernel_udp_drops()
        # Counted from here: the start-up probes are not part of the load.
        st0 = stats(args.hydradns, conf)
        stop = threading.Event()
        junk = [0]
        junk_thread = threading.Thread(target=junk_sender, args=(port, args.junk_qps, stop, junk), daemon=True)
        udp_load = dnsperf(port, mixfile, secs, args.qps)
        tcp_load = dnsperf(port, tcpfile, secs, args.tcp_qps, tcp=True)
        junk_thread.start()
        t0 = time.monotonic()
        cpu0 = proc_cpu(gw.pid)
        refreshed = None
        phase = "before"
        check = {"pre_asked": 0, "cached_asked": 0, "cached_failed": [], "new_asked": 0, "new_answered": 0,
                 "new_slowest": 0.0}
        check_stop = threading.Event()
        stale_trace = []  # (seconds since the upstream came back, stale answers so far)
        while udp_load.poll() is None or tcp_load.poll() is None:
            now = time.monotonic() - t0
            if outage and phase == "before" and now >= WARM_UP:
                # Names asked just now, while the upstream answers: cached.
                cached = hits[:100]
                for i, name in enumerate(cached):
                    rcode_of(port, name, 60000 + i, 3.0)
                check["pre_asked"] = len(cached)
                st_in = stats(args.hydradns, conf)
                os.kill(upstream.pid, signal.SIGSTOP)
                threading.Thread(target=outage_checker, args=(port, cached, check_stop, check), daemon=True).start()
                phase, outage_at = "out", now
            elif phase == "out" and now >= outage_at + outage:
                check_stop.set()
                os.kill(upstream.pid, signal.SIGCONT)
                phase, back_at = "back", now
                st_out = stats(args.hydradns, conf)
            if phase == "back":
                stale_trace.append((now - back_at, stats(args.hydradns, conf)["counters"]["stale_served"]))
            if now > secs + 60:
                udp_load.kill()
                tcp_load.kill()
                raise SystemExit(f"FAIL: dnsperf still running {now:.0f} s into a {secs} s load")
            samples.append((now, proc_rss(gw.pid)))
            if refreshed is None and now >= secs / 2:
                # A new version of the list, fetched and swapped under load.
                with open(list_path, "a") as f:
                    f.writelines(f"added{i}.soak.example\n" for i in range(5000))
                r = subprocess.run([args.hydradns, "update", "-c", conf, "--json"], capture_output=True, text=True)
                refreshed = (now, r.stdout.strip() or r.stderr.strip())
            time.sleep(1)
        stop.set()
        junk_thread.join()
        run_secs = time.monotonic() - t0
        cpu = proc_cpu(gw.pid) - cpu0
        udp_r, tcp_r = dnsperf_result(udp_load), dnsperf_result(tcp_load)
        # The log's last batch waits up to 10 s: `hydradns log` has the
        # writer commit it first (and fails the run if it cannot read).
        commit_log(args.hydradns, conf)
        drops = kernel_udp_drops() - drops0
        st = stats(args.hydradns, conf)
        if gw.poll() is not None:
            raise SystemExit("FAIL: the gateway died")
    finally:
        gw.terminate()
        gw.wait(10)
        if outage:
            os.kill(upstream.pid, signal.SIGCONT)
        upstream.terminate()
        web.shutdown()
        log.close()

    c = {k: v - st0["counters"].get(k, 0) for k, v in st["counters"].items() if isinstance(v, int)}
    ql = {k: st["querylog"][k] - st0["querylog"][k] for k in ("written", "dropped", "lost")}
    sent = udp_r["sent"] + tcp_r["sent"] + junk[0] + (check["pre_asked"] + check["cached_asked"] + check["new_asked"] if outage else 0)
    seen = st["queries"] - st0["queries"]
    problems = []
    unseen = sent - seen
    if unseen > drops or unseen < 0:
        problems.append(f"sent {sent}, the server saw {seen} and the kernel dropped {drops}")
    if (c["failed"] or c["overloaded"]) and not outage:
        problems.append(f"engine errors: failed {c['failed']}, overloaded {c['overloaded']}")
    if outage:
        if phase != "back":
            problems.append("the outage did not run to its end")
        else:
            if check["cached_failed"]:
                problems.append(f"{len(check['cached_failed'])} of {check['cached_asked']} answers for names cached "
                                f"before the outage were not NOERROR: {check['cached_failed'][:5]}")
            if check["new_answered"] or check["new_slowest"] > 2.5:
                problems.append(f"never-seen names during the outage: {check['new_answered']} answered, slowest "
                                f"failure {check['new_slowest']:.2f} s (expected SERVFAIL within the 2 s timeout)")
            late = [v for t, v in stale_trace if t >= stale_trace[-1][0] - 15]
            if stale_trace[-1][0] < 45 or late[-1] != late[0]:
                problems.append(f"stale answers still growing after the upstream came back: {stale_trace[-16:]}")
            if st_out["counters"]["stale_served"] - st0["counters"].get("stale_served", 0) == 0:
                problems.append("no stale answer was served during the outage")
    answered = seen - c["dropped"]
    logged = ql["written"] + ql["dropped"] + ql["lost"]
    if logged != answered:
        problems.append(f"log: {answered} answered, but written + dropped + lost = {logged}")
    if not refreshed or '"updated"' not in refreshed[1]:
        problems.append(f"the list refresh did not go through: {refreshed}")
    # The first minute warms up (cache, log pages, thread heaps); after it,
    # the last third of the run may not exceed the first by 10 % + 2 MiB.
    steady = [r for t, r in samples if t >= WARM_UP] or [r for _, r in samples]
    third = max(1, len(steady) // 3)
    first_max, last_max = max(steady[:third]), max(steady[-third:])
    if last_max > first_max * 1.1 + 2 * 1048576:
        problems.append(f"RSS grew after warm-up: max {first_max / 1048576:.1f} MiB in the first third, "
                        f"{last_max / 1048576:.1f} MiB in the last")
    third = len(samples) // 3

    mb = lambda b: f"{b / 1048576:.1f}"  # noqa: E731
    rows = [
        ("run", f"{run_secs:.0f} s at {args.qps:,} UDP + {args.tcp_qps} TCP + {args.junk_qps} malformed queries/s; "
                f"query log on; list refresh at {refreshed[0]:.0f} s" if refreshed else ""),
        ("sent (UDP / TCP / malformed)", f"{udp_r['sent']:,} / {tcp_r['sent']:,} / {junk[0]:,}"),
        ("seen by the server (UDP / TCP)", f"{c['udp_queries']:,} / {c['tcp_queries']:,} "
                                           f"(kernel receive-buffer drops: {drops})"),
        ("answered by kind", f"blocked {c['blocked']:,}, cached {c['cached']:,}, forwarded {c['forwarded']:,}, "
                             f"FORMERR {c['formerr']:,}, NOTIMP {c['notimp']:,}, dropped unanswered {c['dropped']:,}"),
        ("engine errors (failed / overloaded)", f"{c['failed']} / {c['overloaded']}"
                                                + (" (misses while the upstream was down)" if outage else "")),
        ("lost by dnsperf (UDP / TCP)", f"{udp_r['lost']} / {tcp_r['lost']}"),
        ("query log written / dropped / lost", f"{ql['written']:,} / {ql['dropped']:,} / {ql['lost']:,}"),
        ("CPU", f"{cpu / run_secs * 100:.1f} % of one core ({cpu / max(seen, 1) * 1e6:.1f} µs per query)"),
        ("RSS first / min / max / last", " / ".join(mb(v) for v in (samples[0][1], min(r for _, r in samples),
                                                                    max(r for _, r in samples), samples[-1][1]))
         + " MiB"),
        ("RSS max per third of the run", " / ".join(mb(max(r for _, r in part)) for part in
                                                    (samples[:third], samples[third:-third], samples[-third:]))
         + " MiB"),
    ]
    if outage and phase == "back":
        stale_during = st_out["counters"]["stale_served"] - st0["counters"].get("stale_served", 0)
        rows += [
            ("WAN outage", f"upstream stopped {outage_at:.0f}–{back_at:.0f} s; answers TTL 30 s"),
            ("query log dropped before / during / after it",
             " / ".join(f"{b - a:,}" for a, b in zip(
                 [st0["querylog"]["dropped"], st_in["querylog"]["dropped"], st_out["querylog"]["dropped"]],
                 [st_in["querylog"]["dropped"], st_out["querylog"]["dropped"], st["querylog"]["dropped"]]))),
            ("names cached before it, asked during it", f"{check['cached_asked']:,}, all NOERROR"
             if not check["cached_failed"] else f"{check['cached_asked']:,}, {len(check['cached_failed'])} failed"),
            ("never-seen names during it", f"{check['new_asked']} asked, {check['new_answered']} answered, slowest "
                                           f"SERVFAIL {check['new_slowest']:.2f} s"),
            ("stale answers during it / in the recovery", f"{stale_during:,} / "
             f"{stale_trace[-1][1] - st_out['counters']['stale_served']:,}, none in its last 15 s"
             if stale_trace and stale_trace[-1][0] >= 45 else ""),
        ]
    per_min = {}
    for t, r in samples:
        per_min.setdefault(int(t // 60), []).append(r)
    flags = f" --wan-outage {args.wan_outage:g}" if outage else ""
    text = [f"Soak, {time.strftime('%Y-%m-%d')}, {machine()}, `bench/soak.sh --minutes {args.minutes:g}{flags}`", "",
            "| figure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    text += ["", "RSS per minute (MiB, min–max): " + ", ".join(
        f"{m}: {mb(min(v))}–{mb(max(v))}" for m, v in sorted(per_min.items()))]
    text += ["", "verdict: " + ("PASS" if not problems else "FAIL: " + "; ".join(problems))]
    print("\n".join(text))
    if args.out:
        with open(args.out, "w") as f:
            f.write("# Soak test\n\n" + "\n".join(text) + "\n")
    subprocess.run(["rm", "-rf", work, logdir])
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
