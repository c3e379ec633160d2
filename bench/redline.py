#!/usr/bin/env python3
"""Redline benchmark: HydraDNS beside dnsmasq, Unbound and an echo responder
(and, in the mix, a forwarding echo that relays the misses to the upstream).

bench/run.sh installs the tools, builds the binaries and calls this. Every
server runs pinned to CPU 0 (one worker/thread each); the load and the
benchmark's upstream run on CPU 1: examples/bench-load for saturation (one
dnsperf thread saturated its own core first), dnsperf for the fixed rate. All servers are up at once and each
measurement goes round them in turn, so a noisy moment hurts them alike.

Per list (synthetic 100k and 1M names, the real lists combined) and server:
time from start to the first blocked answer, RSS after load, and for each
scenario (all blocked, all cache hits, a mix of 25 % blocked / 65 % hits /
10 % unique misses, and the mix with HydraDNS's query log on): saturation QPS
(median of rounds), lost queries, the server's CPU share and CPU time per
answered query (/proc), latency p50/p99/p99.9 at a fixed 10k QPS, peak RSS
under load. HydraDNS's own counters are checked against what dnsperf sent.

    bench/redline.py --bin DIR --out docs/benchmarks.md [--quick]

A/B of HydraDNS builds (bench/ab.sh): `--ab old=BIN,new=BIN` runs those
binaries beside the echo responder, rounds interleaved, saturation only, and
prints each round, the median, the share of echo's rate and of queries the
server forwarded (from its own counters, checked against what was answered).
"""

import argparse
import datetime
import json
import lzma
import os
import platform
import random
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

import section

CANARY = "hydradns-canary.example"
# The third-party data the benchmarks read: the test data (tests/data/SOURCES.md).
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")


def data_file(rel, work):
    """A file of tests/data as a plain path: one kept as REL.xz is decompressed into work."""
    plain = os.path.join(DATA, rel)
    if os.path.exists(plain):
        return plain
    out = os.path.join(work, os.path.basename(rel))
    with lzma.open(plain + ".xz") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def popular_names():
    """The popularity list's names in rank order (Tranco-like top 50k)."""
    with lzma.open(os.path.join(DATA, "popularity", "tranco-like-top50k-2025-02.csv.xz"), "rt") as f:
        return [line.strip().split(",", 1)[1] for line in f if "," in line]
# Queries bench-load keeps in flight: enough that no server waits on the load,
# few enough that none overflows a default socket buffer (on the dev VM the
# echo responder lost queries at 200 and more, none at 50 or 100).
LOAD_WINDOW = 100
HZ = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


_given_ports = set()


def free_port():
    """A port free on both UDP and TCP (the servers bind both), never one
    handed out before in this run: the kernel may offer a port again once its
    probe socket is closed, and two HydraDNS instances would then both bind
    it (SO_REUSEPORT) and split the load between them."""
    while True:
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", 0))
        port = u.getsockname()[1]
        if port in _given_ports:
            continue
        t = socket.socket()
        try:
            t.bind(("127.0.0.1", port))
            _given_ports.add(port)
            return port
        except OSError:
            continue
        finally:
            u.close()
            t.close()


def query(name, qid=0x4242):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00\x00\x01\x00\x01"


def is_blocked_answer(reply):
    """NXDOMAIN, REFUSED, or an A record of 0.0.0.0: the canary was blocked."""
    if len(reply) < 12 or not reply[2] & 0x80:
        return False
    rcode = reply[3] & 0x0F
    return rcode in (3, 5) or reply.endswith(b"\x00\x04\x00\x00\x00\x00")


def first_answer(port, blocked, deadline):
    """Polls until the server answers the canary (blocked, unless `blocked`
    is False: the echo responder just answers). Returns monotonic time."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.005)
    q = query(CANARY)
    while time.monotonic() < deadline:
        try:
            s.sendto(q, ("127.0.0.1", port))
            reply = s.recv(2048)
            if not blocked or is_blocked_answer(reply):
                return time.monotonic()
        except OSError:
            pass
    raise RuntimeError(f"no blocked answer on port {port}")


def proc_cpu(pid):
    """utime + stime of the whole process (all threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def proc_stat(line):
    """One line of /proc/stat (`cpu` for all CPUs, `cpu1` for one), in ticks."""
    with open("/proc/stat") as f:
        for text in f:
            w = text.split()
            if w[0] == line:
                return [int(x) for x in w[1:]]
    return []


def core_busy(cpu):
    """Busy seconds of one CPU so far (everything but idle and iowait)."""
    t = proc_stat(f"cpu{cpu}")
    return (sum(t) - t[3] - t[4]) / HZ if t else 0.0


def steal_secs():
    """CPU time the hypervisor took from this VM so far, all CPUs (the steal
    column): a latency tail that comes with stolen time is the VM's."""
    t = proc_stat("cpu")
    return t[7] / HZ if len(t) > 7 else 0.0


def proc_rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def mib(b):
    return f"{b / 1048576:.1f} MiB"


class Server:
    def __init__(self, name, cmd, blocked_canary=True, stats_conf=None):
        self.name, self.cmd, self.blocked_canary, self.stats_conf = name, cmd, blocked_canary, stats_conf
        self.port = None
        self.proc = None
        self.peak = 0
        self.cpus = "0"  # None: wherever the scheduler puts it
        # Processes that run beside it as they do on a router (HydraDNS's
        # watchdog), started once it answers; lowrate.py counts them with it.
        self.companion_cmds = []
        self.companions = []

    def start(self, log):
        t0 = time.monotonic()
        pin = ["taskset", "-c", self.cpus] if self.cpus else []
        self.proc = subprocess.Popen(pin + self.cmd, stdout=log, stderr=log)
        try:
            t1 = first_answer(self.port, self.blocked_canary, t0 + 120)
        except RuntimeError:
            self.stop()
            raise
        self.start_secs = t1 - t0
        self.companions = [subprocess.Popen(pin + c, stdout=log, stderr=log) for c in self.companion_cmds]
        time.sleep(0.5)  # settle: background threads, freed build memory
        self.rss_loaded = proc_rss(self.proc.pid)
        self.peak = self.rss_loaded

    def sample(self):
        if self.proc and self.proc.poll() is None:
            self.peak = max(self.peak, proc_rss(self.proc.pid))

    def pids(self):
        return [self.proc.pid] + [c.pid for c in self.companions]

    def stop(self):
        for c in self.companions:
            c.terminate()
            c.wait()
        self.companions = []
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def counters(self, hydradns):
        """HydraDNS's own figures: queries received, log entries written and
        dropped, queries sent upstream, answers the kernel would not send,
        upstream tries that timed out (each holds its client's answer for
        `upstream_timeout`, 2 s by default: as long as dnsperf waits)."""
        out = subprocess.run([hydradns, "stats", "-c", self.stats_conf, "--json"], capture_output=True, check=True)
        r = json.loads(out.stdout)
        c = r["counters"]
        return {"queries": r["queries"], "written": r["querylog"]["written"], "dropped": r["querylog"]["dropped"],
                "forwarded": c["forwarded"] + c["coalesced"], "udp_send_failed": c["udp_send_failed"],
                "upstream_timeouts": sum(u["timeouts"] for u in r["upstreams"])}


def dnsperf(port, datafile, secs, qps=None, verbose=False, outstanding=500, runs=None):
    cmd = ["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", datafile, "-l", str(secs),
           "-c", "1", "-T", "1", "-q", str(outstanding), "-t", "2"]
    if runs:
        cmd += ["-n", str(runs)]
    if qps:
        cmd += ["-Q", str(qps)]
    if verbose:
        cmd += ["-v"]
    return summary(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout, verbose)


def blast(args, port, datafile, secs):
    """Saturation: examples/bench-load on CPU 1 (one dnsperf thread ran out of
    core before the echo responder did, so it measured itself)."""
    cmd = ["taskset", "-c", "1", args.load, f"127.0.0.1:{port}", datafile, str(secs), str(LOAD_WINDOW)]
    return summary(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def summary(out, verbose=False):
    """dnsperf's statistics lines (bench-load prints the same ones)."""
    r = {"latencies": []}
    for line in out.splitlines():
        w = line.split()
        if verbose and line.startswith("> ") and len(w) >= 5:
            try:
                r["latencies"].append(float(w[-1]))
            except ValueError:
                pass
        elif line.strip().startswith("Queries sent:"):
            r["sent"] = int(w[2])
        elif line.strip().startswith("Queries completed:"):
            r["completed"] = int(w[2])
        elif line.strip().startswith("Queries lost:"):
            r["lost"] = int(w[2])
        elif line.strip().startswith("Queries per second:"):
            r["qps"] = float(w[3])
        elif line.strip().startswith("Run time (s):"):
            r["runtime"] = float(w[3])
    return r


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))]


def read_names(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def covered(name, blocked):
    parts = name.split(".")
    return any(".".join(parts[i:]) in blocked for i in range(len(parts)))


class Scenarios:
    """Query files for one list, made deterministically (seeded)."""

    def __init__(self, work, tag, list_names, popular, rounds, lines, lat_rounds=0, lat_lines=0):
        rng = random.Random(20261130)
        blocked = set(list_names)
        sample = rng.sample(list_names, min(50000, len(list_names)))
        subs = ["ads", "cdn", "t", "metrics", "img", "www"]
        self.blocked_names = [n if i % 2 == 0 else f"{rng.choice(subs)}.{n}" for i, n in enumerate(sample)]
        self.hit_names = [n for n in popular if not covered(n, blocked)][:5000]
        self.files = {}

        def write(name, lines_iter):
            path = os.path.join(work, f"{tag}-{name}.txt")
            with open(path, "w") as f:
                f.writelines(f"{n} A\n" for n in lines_iter)
            self.files[name] = path

        write("blocked", (rng.choice(self.blocked_names) for _ in range(200000)))
        write("warm", self.hit_names)
        write("hits", (rng.choice(self.hit_names) for _ in range(200000)))
        # Every name new, all sent upstream: what a miss costs on its own.
        write("misses", (f"m{i}.miss.example" for i in range(200000)))
        serial = iter(range(10**9))

        def mix(lines):
            for _ in range(lines):
                r = rng.random()
                if r < 0.25:
                    yield rng.choice(self.blocked_names)
                elif r < 0.90:
                    yield rng.choice(self.hit_names)
                else:
                    yield f"u{next(serial)}.miss.example"

        # A fresh file per run: a miss must be a name no server has seen.
        for k in range(rounds):
            write(f"mix{k}", mix(lines))
        for k in range(lat_rounds):
            write(f"mixlat{k}", mix(lat_lines))


def measure_list(args, key, label, list_path, popular, servers_for, work, log, results):
    names = read_names(list_path)
    print(f"\n## {label}: {len(names):,} names", flush=True)
    lines = int(args.sat_secs * 250000 * 1.1)
    lat_lines = int(args.lat_secs / args.lat_rounds * args.lat_qps * 1.2)
    sc = Scenarios(work, key, names, popular, args.rounds, lines, args.lat_rounds, lat_lines)
    servers = servers_for(list_path, names)
    upstream = servers.pop("_upstream")
    running = []
    stop_sampling = threading.Event()

    def sampler():
        while not stop_sampling.wait(0.1):
            for s in running:
                s.sample()

    threading.Thread(target=sampler, daemon=True).start()
    try:
        for s in servers.values():
            s.start(log)
            running.append(s)
            print(f"  {s.name}: first answer after {s.start_secs:.2f} s, RSS {mib(s.rss_loaded)}", flush=True)
        for s in servers.values():
            if not s.name.startswith("echo"):
                dnsperf(s.port, sc.files["warm"], 30, qps=20000, outstanding=100, runs=1)
        wanted = args.scenarios.split(",")

        def runs_in(s, scen):
            """Who takes part in a scenario. The log on and off run in the same
            mix rounds, so its cost is a ratio from one noisy moment, not two;
            echo+fwd is the mix's like-for-like yardstick and nothing else's
            (echo+fwd:mmsg, outside the mix a batching echo, runs in all)."""
            if scen == "mix" and "mix" not in wanted:
                return s.name == "hydradns+log"
            if s.name == "hydradns+log":
                return scen == "mix" and "mix-log" in wanted
            return s.name != "echo+fwd" or scen == "mix"

        def row_key(scen, s):
            return ("mix, log on" if s.name == "hydradns+log" else scen, s.name)

        scenarios = [scen for scen in ["blocked", "hits", "mix"]
                     if scen in wanted or (scen == "mix" and "mix-log" in wanted)]
        table = {}
        for scen in scenarios:
            who = [s for s in servers.values() if runs_in(s, scen)]
            qps = {s.name: [] for s in who}
            cpu = {s.name: [] for s in who}
            lost = {s.name: 0 for s in who}
            util = {s.name: [] for s in who}
            load_util = {s.name: [] for s in who}
            up_util = []
            sat_before = {s.name: s.counters(s.bin) for s in who if s.stats_conf}
            completed = {s.name: 0 for s in who}
            for k in range(args.rounds):
                for s in who:
                    datafile = sc.files[f"mix{k}"] if scen == "mix" else sc.files[scen]
                    c0, u0, l0 = proc_cpu(s.proc.pid), proc_cpu(upstream.pid), core_busy(1)
                    r = blast(args, s.port, datafile, args.sat_secs)
                    c1, u1, l1 = proc_cpu(s.proc.pid), proc_cpu(upstream.pid), core_busy(1)
                    # Shares of the time dnsperf was sending (not of its start-up).
                    w0, w1 = 0.0, r["runtime"]
                    qps[s.name].append(r["qps"])
                    cpu[s.name].append((c1 - c0) / max(1, r["completed"]) * 1e6)
                    util[s.name].append(100 * (c1 - c0) / (w1 - w0))
                    load_util[s.name].append(min(100.0, 100 * (l1 - l0) / (w1 - w0)))
                    lost[s.name] += r["lost"]
                    completed[s.name] += r["completed"]
                    if scen == "mix":
                        up_util.append(100 * (u1 - u0) / (w1 - w0))
            forwarded = {}
            for s in who:
                if s.stats_conf:
                    c0, c1 = sat_before[s.name], s.counters(s.bin)
                    answered = c1["queries"] - c0["queries"]
                    if answered < completed[s.name]:
                        raise SystemExit(f"FAIL {s.name} {scen}: bench-load got {completed[s.name]} answers, "
                                         f"the server counted only {answered} queries")
                    forwarded[s.name] = 100 * (c1["forwarded"] - c0["forwarded"]) / max(1, answered)
            if args.ab:
                for s in who:
                    row = {"qps": statistics.median(qps[s.name]), "rounds": qps[s.name],
                           "cpu_us": statistics.median(cpu[s.name]), "util": statistics.median(util[s.name]),
                           "lost": lost[s.name], "forwarded": forwarded.get(s.name)}
                    table[row_key(scen, s)] = row
                    print(f"  {row_key(scen, s)[0]:12} {s.name:16} {row['qps']:>9,.0f} QPS "
                          f"(rounds: {', '.join(f'{q:,.0f}' for q in qps[s.name])})  cpu {row['cpu_us']:.2f} µs/q "
                          f"({row['util']:.0f} %)  lost {row['lost']}"
                          + (f"  forwarded {row['forwarded']:.1f} %" if row["forwarded"] is not None else ""),
                          flush=True)
                continue
            # The fixed rate, in rounds that go round the servers like the
            # saturation rounds: a stall of the VM then hurts one round of each
            # server, not the whole run of whichever server it fell on.
            lat = {s.name: [] for s in who}
            lat_sent = {s.name: 0 for s in who}
            lat_lost = {s.name: 0 for s in who}
            stolen = {s.name: 0.0 for s in who}
            lat_before = {s.name: s.counters(s.bin) for s in who if s.stats_conf}
            for j in range(args.lat_rounds):
                for s in who:
                    st0 = steal_secs()
                    r = dnsperf(s.port, sc.files[f"mixlat{j}"] if scen == "mix" else sc.files[scen],
                                args.lat_secs / args.lat_rounds, qps=args.lat_qps, verbose=True)
                    stolen[s.name] += steal_secs() - st0
                    lat[s.name].append(sorted(r["latencies"]))
                    lat_sent[s.name] += r["sent"]
                    lat_lost[s.name] += r["lost"]
            if lat_before:
                time.sleep(args.batch_wait)  # one batch interval for the log writer
            for s in who:
                rounds_p = {p: [percentile(v, p) * 1e3 for v in lat[s.name]] for p in (50, 99, 99.9)}
                row = {
                    "qps": statistics.median(qps[s.name]),
                    "rounds": qps[s.name],
                    "cpu_us": statistics.median(cpu[s.name]),
                    "util": statistics.median(util[s.name]),
                    "load_util": statistics.median(load_util[s.name]),
                    "lost": lost[s.name],
                    "p50": statistics.median(rounds_p[50]),
                    "p99": statistics.median(rounds_p[99]),
                    "p999": statistics.median(rounds_p[99.9]),
                    "p99_rounds": rounds_p[99],
                    "stolen_ms": stolen[s.name] * 1e3,
                    "lat_sent": lat_sent[s.name],
                    "lat_lost": lat_lost[s.name],
                    "unseen": None,
                    "upstream_util": max(up_util) if up_util else None,
                }
                if s.name in lat_before:
                    before, after = lat_before[s.name], s.counters(s.bin)
                    row["counted"] = after["queries"] - before["queries"]
                    row["logged"] = after["written"] - before["written"]
                    row["dropped"] = after["dropped"] - before["dropped"]
                    row["send_failed"] = after["udp_send_failed"] - before["udp_send_failed"]
                    row["timeouts"] = after["upstream_timeouts"] - before["upstream_timeouts"]
                    # Every answer dnsperf got must be in the server's counters;
                    # what it sent but the server never counted died in the kernel.
                    row["unseen"] = row["lat_sent"] - row["counted"]
                    if row["counted"] < row["lat_sent"] - row["lat_lost"]:
                        raise SystemExit(f"FAIL {s.name} {scen}: dnsperf got {row['lat_sent'] - row['lat_lost']} "
                                         f"answers, the server counted only {row['counted']} queries")
                key = row_key(scen, s)
                table[key] = row
                print(f"  {key[0]:12} {s.name:13} {row['qps']:>9,.0f} QPS "
                      f"(rounds: {', '.join(f'{q:,.0f}' for q in qps[s.name])})  cpu {row['cpu_us']:.2f} µs/q "
                      f"({row['util']:.0f} %, load core {row['load_util']:.0f} %)  lost {row['lost']}  p50/p99/p99.9 "
                      f"{row['p50']:.3f}/{row['p99']:.3f}/{row['p999']:.3f} ms (p99 rounds: "
                      f"{', '.join(f'{p:.3f}' for p in row['p99_rounds'])}; {row['stolen_ms']:.0f} ms stolen)  "
                      f"lost at fixed rate {row['lat_lost']}"
                      + (f" (never reached the server: {row['unseen']}, send failed: {row['send_failed']}, "
                         f"upstream timeouts: {row['timeouts']})"
                         if row["unseen"] is not None else "")
                      + (f"  forwarded {forwarded[s.name]:.1f} %" if s.name in forwarded else ""),
                      flush=True)
        for s in servers.values():
            s.sample()
        results.append((label, len(names), {n: s for n, s in servers.items()}, table))
    finally:
        stop_sampling.set()
        for s in servers.values():
            s.stop()


def make_servers(args, work, upstream_port, log_batch, shipped=False):
    """Server definitions per list. `shipped`: HydraDNS with the OpenWrt
    package's settings (worker count, stats line, flash copy, batch interval)
    instead of the redline's one worker and nothing periodic."""
    def servers_for(list_path, names):
        tag = os.path.basename(list_path).split(".")[0]
        out = {}

        def hydradns(name, log_on, binary, groups=False, parental=False):
            s = Server(name, [])
            s.bin = binary
            s.port = free_port()
            conf = os.path.join(work, f"{tag}-{name}.conf")
            # The redline: one worker, nothing periodic. Shipped: the
            # package's defaults for both, with a refresh interval on the list.
            main = ("\toption refresh_interval '6h'\n" if shipped else
                    "\toption workers '1'\n\toption stats_interval '0'\n")
            querylog = ("\toption flush_interval '1h'\n\toption retention '7d'\n\toption stats_interval '1h'\n"
                        if shipped else f"\toption flush_interval '0'\n\toption batch_interval '{log_batch}'\n")
            with open(conf, "w") as f:
                f.write(f"""config hydradns 'main'
\tlist listen '127.0.0.1:{s.port}'
\tlist upstream '127.0.0.1:{upstream_port}'
\toption cache_size '10000'
\toption block_mode 'nxdomain'
\toption control_socket '{work}/{tag}-{name}.sock'
\toption list_dir '{work}/lists'
{main}config blocklist
\toption path '{list_path}'
config querylog 'querylog'
\toption enabled '{1 if log_on else 0}'
\toption path '{args.logdir}/{tag}-{name}/live.db'
\toption flash_path '{args.logdir}/{tag}-{name}/flash.db'
\toption max_size '256M'
{querylog}""")
                if groups:
                    f.write(open(os.path.join(os.path.dirname(__file__), "groups.conf")).read())
                # Three groups with ten services and safe search each
                # (bench/parental.conf), or ("off") the same groups without them.
                extras = [os.path.join(os.path.dirname(__file__), "parental.conf")] if parental else \
                    (getattr(args, "extra_conf", None) or [])
                for extra in extras:
                    # @UPSTREAM@: the benchmark's upstream (bench/sets.conf's groups' own).
                    text = open(extra).read().replace("@UPSTREAM@", f"127.0.0.1:{upstream_port}")
                    lines = text.splitlines(keepends=True)
                    if parental == "off":
                        lines = [x for x in lines if not re.search("service|safe_search|youtube_restrict", x)]
                    f.write("".join(lines))
            s.cmd = [binary, "run", "--user", "root", "--log", "stderr", "-c", conf]
            if shipped:
                # The package runs the watchdog beside it (fail_open); its
                # hook does nothing here, it should never be called.
                s.companion_cmds = [[binary, "watchdog", "-c", conf, "--hook", "/bin/false",
                                     "--state", os.path.join(work, f"{tag}-{name}.unfiltered"), "--log", "stderr"]]
            s.stats_conf = conf
            out[name] = s

        hydradns("hydradns", False, args.hydradns)
        hydradns("hydradns+log", True, args.hydradns)

        s = Server("dnsmasq", [])
        s.port = free_port()
        blocklist = os.path.join(work, f"{tag}-dnsmasq-list.conf")
        with open(blocklist, "w") as f:
            f.writelines(f"address=/{n}/\n" for n in names)
        conf = os.path.join(work, f"{tag}-dnsmasq.conf")
        with open(conf, "w") as f:
            f.write(f"""port={s.port}
listen-address=127.0.0.1
bind-interfaces
no-resolv
no-hosts
server=127.0.0.1#{upstream_port}
cache-size=10000
dns-forward-max=1000
pid-file=
user=root
log-facility=-
conf-file={blocklist}
""")
        s.cmd = ["dnsmasq", "-k", f"--conf-file={conf}"]
        out["dnsmasq"] = s

        s = Server("unbound", [])
        s.port = free_port()
        zones = os.path.join(work, f"{tag}-unbound-zones.conf")
        with open(zones, "w") as f:
            f.writelines(f'local-zone: "{n}." always_nxdomain\n' for n in names)
        conf = os.path.join(work, f"{tag}-unbound.conf")
        with open(conf, "w") as f:
            f.write(f"""server:
  interface: 127.0.0.1
  port: {s.port}
  num-threads: 1
  do-daemonize: no
  chroot: ""
  username: ""
  directory: "{work}"
  pidfile: ""
  use-syslog: no
  logfile: ""
  verbosity: 0
  do-ip6: no
  module-config: "iterator"
  do-not-query-localhost: no
  msg-cache-size: 32m
  rrset-cache-size: 64m
  include: "{zones}"
forward-zone:
  name: "."
  forward-addr: 127.0.0.1@{upstream_port}
""")
        s.cmd = ["unbound", "-d", "-c", conf]
        out["unbound"] = s

        s = Server("echo", [args.echo], blocked_canary=False)
        s.port = free_port()
        s.cmd.append(f"127.0.0.1:{s.port}")
        out["echo"] = s

        s = Server("echo+fwd", [args.forward_echo], blocked_canary=False)
        s.port = free_port()
        s.cmd += [f"127.0.0.1:{s.port}", f"127.0.0.1:{upstream_port}"]
        out["echo+fwd"] = s

        s = Server("echo+fwd:mmsg", [args.forward_echo], blocked_canary=False)
        s.port = free_port()
        s.cmd += [f"127.0.0.1:{s.port}", f"127.0.0.1:{upstream_port}", "--batch"]
        out["echo+fwd:mmsg"] = s
        out = {n: s for n, s in out.items() if n in args.servers.split(",")}
        for label, binary in getattr(args, "ab", []):
            # A label ending in +log runs that build with the query log on;
            # one holding +groups, with bench/groups.conf (3 groups, 50 client rules);
            # one holding +parental, with bench/parental.conf (+parental-off: its
            # groups and lists without the services and safe search).
            parental = "off" if "+parental-off" in label else "+parental" in label
            hydradns(f"hydradns:{label}", label.endswith("+log"), binary, "+groups" in label, parental)
        out["_upstream"] = args.upstream_proc
        return out

    return servers_for


ORDER = ["hydradns", "hydradns+log", "dnsmasq", "unbound", "echo", "echo+fwd", "echo+fwd:mmsg"]


def commit():
    """The checkout the binary was built from, marked when it had local changes."""
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run(["git", "describe", "--always"], capture_output=True, text=True, cwd=here)
    # The table this run writes is not a change to what was built.
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "..",
                              ":(exclude)../docs/benchmarks.md"], capture_output=True, text=True, cwd=here)
    return (r.stdout.strip() or "unknown") + ("-dirty" if changed.stdout.strip() else "")


def stats(hydradns, conf):
    """`hydradns stats --json` of the instance running with `conf`."""
    out = subprocess.run([hydradns, "stats", "-c", conf, "--json"], capture_output=True, check=True, text=True)
    return json.loads(out.stdout)


def commit_log(hydradns, conf):
    """Has the query log's writer of the instance running with `conf` commit
    what is queued (`hydradns log` asks for that before it reads); fails if
    the log cannot be read."""
    subprocess.run([hydradns, "log", "-c", conf, "--limit", "1"], capture_output=True, check=True)


def cpu_model(default="unknown"):
    """The CPU's model name, for the machine line of a report."""
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), default)


def share_range(pairs):
    """Lowest and highest of the rounds' shares, one figure when they round alike (or one round)."""
    if not pairs:
        return ""
    lo, hi = f"{min(pairs):.0f}", f"{max(pairs):.0f}"
    return f"{lo} %" if lo == hi else f"{lo}–{hi} %"


def report(args, results, elapsed):
    cpu = cpu_model()
    vers = {
        "dnsmasq": subprocess.run(["dnsmasq", "--version"], capture_output=True, text=True).stdout.split("\n")[0],
        "unbound": subprocess.run(["unbound", "-V"], capture_output=True, text=True).stdout.split("\n")[0],
        "dnsperf": next((line.split()[-1] for line in subprocess.run(["dnsperf", "-h"], capture_output=True,
                        text=True, stdin=subprocess.DEVNULL).stdout.splitlines()
                         + subprocess.run(["dnsperf", "-h"], capture_output=True, text=True).stderr.splitlines()
                         if line.startswith("Version")), "?"),
    }
    L = []
    L.append("# Benchmarks\n")
    L.append(f"Last full run: {datetime.date.today()}, `bench/run.sh{' --quick' if args.quick else ''}` "
             f"({elapsed / 60:.0f} min).\n")
    L.append(f"Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}, "
             f"{platform.machine()}. Compared: {vers['dnsmasq'].split('  ')[0]}; Unbound {vers['unbound'].split()[-1]}; "
             f"load from `examples/bench-load.rs` (saturation) and dnsperf {vers['dnsperf']} (fixed rate). HydraDNS: `{os.path.basename(args.hydradns)}` "
             f"(commit {commit()}).\n")
    L.append("Setup: each server pinned to CPU 0 with one worker thread; the load and the benchmark's upstream "
             "(`examples/bench-upstream.rs`) on CPU 1. Saturating load: `bench-load`, one socket, "
             f"{LOAD_WINDOW} queries in flight, sent in `sendmmsg` bursts; it counts an answer only if it carries "
             "the ID and question of a query in flight (one dnsperf thread, used before, ran out of core before "
             "the echo responder did). Fixed-rate load: dnsperf, one thread. "
             f"Saturation: median of {args.rounds} × {args.sat_secs} s per scenario, servers interleaved. "
             f"Latency: {args.lat_rounds} × {args.lat_secs / args.lat_rounds:g} s at a fixed {args.lat_qps:,} QPS, "
             "servers interleaved; each percentile is the median of the rounds' (the p99 cell lists them all). "
             "Every server gets the same names: "
             "dnsmasq as `address=/name/` lines, Unbound as `local-zone: \"name.\" always_nxdomain`, "
             "HydraDNS as a plain list with `block_mode nxdomain`; caches 10,000 entries; HydraDNS's query log on "
             "tmpfs, as on a router. "
             "`echo` answers each packet with itself: the ceiling of one packet in, one out on this box. "
             "`echo+fwd` (`examples/forward-echo.rs`, mix only) does the same but relays the mix's misses to the "
             "upstream and back: a bare forwarder, the least any forwarder does for the mix, upstream traffic included. "
             "Both make one system call per packet; `echo+fwd:mmsg` (the same program with `--batch`) takes up to "
             "16 packets per `recvmmsg` and sends each batch's answers and relayed queries with one `sendmmsg` each, "
             "as HydraDNS does: the floor for a server that batches (outside the mix it is a batching echo).\n")
    L.append("Columns: QPS at saturation as a share of `echo+fwd:mmsg`'s (the saturation target: ≥ 90 %, "
             "see below), the QPS itself and its share of echo's; queries lost at saturation (over all "
             "rounds: unanswered 2 s after they were sent); "
             "server CPU per answered query and the server's share of its core; how busy the load core was "
             "(CPU 1: bench-load, and the upstream in the mix; near 100 % with the server's core well below, the load, "
             "not the server, set the rate); "
             "latency at the fixed rate; CPU time the hypervisor stole from the VM during that server's fixed-rate "
             "rounds (/proc/stat, both cores: a tail that comes with stolen time is the VM's, not the server's). "
             "`hydradns+log` is the mix with the query log on, in the same rounds as `hydradns` with it off; its "
             "last column is entries logged / dropped at the fixed rate, from the server's own counters.\n")
    for label, n, servers, table in results:
        L.append(f"\n## {label} ({n:,} names)\n")
        L.append("| server | start to first answer | RSS after load | peak RSS under load |")
        L.append("|---|---|---|---|")
        for name in ORDER:
            s = servers.get(name)
            if s is not None and hasattr(s, "start_secs"):
                L.append(f"| {name} | {s.start_secs:.2f} s | {mib(s.rss_loaded)} | {mib(s.peak)} |")
        L.append("")
        L.append("| scenario | server | % of echo+fwd:mmsg | QPS | % of echo | lost | CPU/query | CPU share | load core "
                 "| p50 | p99 (rounds) | p99.9 | stolen | lost at fixed rate | log |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for scen in ["blocked", "hits", "mix", "mix, log on"]:
            echo = table.get(("mix" if scen.startswith("mix") else scen, "echo"))
            mmsg = table.get(("mix" if scen.startswith("mix") else scen, "echo+fwd:mmsg"))
            for name in ORDER:
                r = table.get((scen, name))
                if not r:
                    continue
                share = f"{100 * r['qps'] / echo['qps']:.0f} %" if echo else ""
                floor = f"{100 * r['qps'] / mmsg['qps']:.0f} %" if mmsg else ""
                logcol = f"{r['logged']:,} / {r['dropped']:,}" if name == "hydradns+log" else ""
                rounds = ", ".join(f"{p:.2f}" for p in r["p99_rounds"])
                where = ""
                if r["lat_lost"] and r["unseen"] is not None:
                    where = (f" ({r['unseen']:,} never reached it, {r['send_failed']:,} not sent, "
                             f"{r.get('timeouts', 0):,} upstream timeouts)")
                L.append(f"| {scen} | {name} | {floor} | {r['qps']:,.0f} | {share} | {r['lost']:,} | {r['cpu_us']:.2f} µs | "
                         f"{r['util']:.0f} % | {r.get('load_util', 0):.0f} % | {r['p50']:.3f} ms | "
                         f"{r['p99']:.3f} ms ({rounds}) | {r['p999']:.3f} ms | {r['stolen_ms']:.0f} ms | "
                         f"{r['lat_lost']:,} of {r['lat_sent']:,}{where} | {logcol} |")
        ups = [r["upstream_util"] for (scen, _), r in table.items() if r.get("upstream_util") is not None]
        if ups:
            L.append(f"\nThe upstream's CPU share in the mix runs peaked at {max(ups):.0f} % of its core.")
    L.append("\n## Against the bare forwarders and the batching echo\n")
    L.append("`echo+fwd` and `echo+fwd:mmsg` pay for the "
             "same upstream round trips as HydraDNS in the mix (one more packet pair per miss, and the upstream's "
             "share of the load core); `echo+fwd:mmsg` also batches its system calls as HydraDNS does, so the gap "
             "to it is the gateway's own work: parsing, the lists, the cache, building answers. Each round runs "
             "every server once, in turn, so a HydraDNS round and the same round of `echo+fwd:mmsg` are under a "
             "minute apart on nearly the same host; `round by round` is the range of those pairs' shares: how far this "
             "machine moves the share between one round and the next.\n")
    L.append("| list | scenario | HydraDNS QPS | share of echo+fwd | share of echo+fwd:mmsg | round by round | "
             "HydraDNS CPU/query | echo+fwd:mmsg CPU/query | difference |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for label, n, servers, table in results:
        for scen in ["blocked", "hits", "mix"]:
            h, f, m = (table.get((scen, x)) for x in ["hydradns", "echo+fwd", "echo+fwd:mmsg"])
            if h and m:
                plain = f"{100 * h['qps'] / f['qps']:.0f} %" if f else ""
                pairs = [100 * a / b for a, b in zip(h.get("rounds", []), m.get("rounds", [])) if b]
                L.append(f"| {label} | {scen} | {h['qps']:,.0f} | {plain} | {100 * h['qps'] / m['qps']:.0f} % | "
                         f"{share_range(pairs)} | {h['cpu_us']:.2f} µs | {m['cpu_us']:.2f} µs | {h['cpu_us'] - m['cpu_us']:+.2f} µs |")

    def verdict(ok):
        return "pass" if ok else "**miss**"

    L.append("\n## Targets, HydraDNS against the others in the same run\n")
    L.append("Saturation is held to `echo+fwd:mmsg`, the least a server that batches its system calls does for "
             "each scenario (issue 28; issue 6 held it to `echo`, which no forwarder reaches in the mix, where "
             "misses cost upstream packets the echo never sends).\n")
    L.append("| list | check | result |")
    L.append("|---|---|---|")
    for label, n, servers, table in results:
        for scen in ["blocked", "hits", "mix"]:
            h, e, d, u, m = (table.get((scen, x)) for x in ["hydradns", "echo", "dnsmasq", "unbound", "echo+fwd:mmsg"])
            if not (h and e and d and u and m):
                continue
            L.append(f"| {label} | {scen}: QPS ≥ 90 % of echo+fwd:mmsg ({h['qps']:,.0f} vs {m['qps']:,.0f}) | "
                     f"{verdict(h['qps'] >= 0.9 * m['qps'])} |")
            L.append(f"| {label} | {scen}: QPS ≥ Unbound ({u['qps']:,.0f}) and ≥ 1.5× dnsmasq ({d['qps']:,.0f}) | "
                     f"{verdict(h['qps'] >= u['qps'] and h['qps'] >= 1.5 * d['qps'])} |")
            L.append(f"| {label} | {scen}: CPU/query ≤ 1.3× echo ({h['cpu_us']:.2f} vs {e['cpu_us']:.2f} µs) | "
                     f"{verdict(h['cpu_us'] <= 1.3 * e['cpu_us'])} |")
            L.append(f"| {label} | {scen}: nothing lost at {args.lat_qps:,} QPS ({h['lat_lost']:,} of {h['lat_sent']:,}) | "
                     f"{verdict(h['lat_lost'] == 0)} |")
            L.append(f"| {label} | {scen}: p99 at {args.lat_qps:,} QPS within 0.3 ms of echo ({h['p99']:.3f} vs "
                     f"{e['p99']:.3f} ms) | {verdict(h['p99'] <= e['p99'] + 0.3)} |")
        s = servers.get("hydradns")
        if s is not None and hasattr(s, "start_secs"):
            limit = 40 if n >= 500000 else 8 if n <= 150000 else None
            if limit:
                L.append(f"| {label} | RSS ≤ {limit} MiB after load and under load ({mib(s.rss_loaded)}, "
                         f"{mib(s.peak)}) | {verdict(max(s.rss_loaded, s.peak) <= limit * 1048576)} |")
            if n >= 500000:
                L.append(f"| {label} | start to first answer ≤ 0.5 s ({s.start_secs:.2f} s) | "
                         f"{verdict(s.start_secs <= 0.5)} |")
        off, on = table.get(("mix", "hydradns")), table.get(("mix, log on", "hydradns+log"))
        if off and on:
            cost = 100 * (off["qps"] - on["qps"]) / off["qps"]
            L.append(f"| {label} | query log costs ≤ 10 % QPS at saturation ({cost:.1f} %) | {verdict(cost <= 10)} |")
            L.append(f"| {label} | log on: no log entry dropped at {args.lat_qps:,} QPS ({on['logged']:,} logged, "
                     f"{on['dropped']:,} dropped) | {verdict(on['dropped'] == 0)} |")
            L.append(f"| {label} | log on: no query lost at {args.lat_qps:,} QPS ({on['lat_lost']:,} lost, "
                     f"{on['unseen']:,} never reached the server) | {verdict(on['lat_lost'] == 0)} |")
    text = "\n".join(L) + "\n"
    print("\n" + text)
    if args.out:
        # Only its own section: the file also holds hand-written history.
        section.replace(args.out, "redline", "bench/redline.py", text)


def ab_report(args, results):
    """The A/B table: medians only, no targets (a comparison of builds, not a run of the benchmark)."""
    L = [f"\n{args.rounds} rounds × {args.sat_secs:g} s, interleaved; "
         + ", ".join(f"{label} = {binary}" for label, binary in args.ab), "",
         "| list | scenario | server | QPS (median) | rounds | % of echo | CPU/query | lost | forwarded |",
         "|---|---|---|---|---|---|---|---|---|"]
    for label, n, _, table in results:
        for (scen, name), r in table.items():
            echo = table.get((scen, "echo"))
            share = f"{100 * r['qps'] / echo['qps']:.0f} %" if echo else ""
            fwd = f"{r['forwarded']:.1f} %" if r.get("forwarded") is not None else ""
            L.append(f"| {label} | {scen} | {name} | {r['qps']:,.0f} | {' / '.join(f'{q / 1000:.0f}k' for q in r['rounds'])} "
                     f"| {share} | {r['cpu_us']:.2f} µs | {r['lost']:,} | {fwd} |")
    print("\n".join(L))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with hydradns and the examples")
    ap.add_argument("--hydradns", help="the gateway binary (default BIN/hydradns)")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--lists", default="100k,1m,real")
    # Narrowing a run is for profiling one path; the full table needs all of them.
    ap.add_argument("--servers", default=",".join(ORDER), help="comma-separated subset of " + ",".join(ORDER))
    ap.add_argument("--scenarios", default="blocked,hits,mix,mix-log")
    ap.add_argument("--ab", default="", help="LABEL=BIN,…: HydraDNS builds to compare, saturation only")
    ap.add_argument("--rounds", type=int, dest="rounds_opt", help="saturation rounds per server and scenario")
    ap.add_argument("--secs", type=float, dest="secs_opt", help="seconds per saturation round")
    args = ap.parse_args()
    args.ab = [tuple(x.split("=", 1)) for x in args.ab.split(",") if x]
    if any(len(x) != 2 for x in args.ab):
        ap.error("--ab takes LABEL=BIN pairs")
    args.hydradns = args.hydradns or os.path.join(args.bin, "hydradns")
    args.echo = os.path.join(args.bin, "examples", "echo-responder")
    args.forward_echo = os.path.join(args.bin, "examples", "forward-echo")
    args.load = os.path.join(args.bin, "examples", "bench-load")
    if args.quick:
        args.rounds, args.sat_secs, args.lat_secs, args.lat_qps, args.lists = 1, 1, 1, 2000, "100k"
        args.lat_rounds, args.batch_wait = 1, 1.0
    else:
        args.rounds, args.sat_secs, args.lat_secs, args.lat_qps = 3, 5, 12, 10000
        args.lat_rounds, args.batch_wait = 3, 1.0
    args.rounds = args.rounds_opt or args.rounds
    args.sat_secs = args.secs_opt or args.sat_secs
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="hydradns-bench-")
    # The query log lives on tmpfs, as on the router (/tmp there is RAM).
    args.logdir = tempfile.mkdtemp(prefix="hydradns-bench-log-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    log = open(os.path.join(work, "servers.log"), "w")
    upstream_port = free_port()
    args.upstream_proc = subprocess.Popen(
        ["taskset", "-c", "1", os.path.join(args.bin, "examples", "bench-upstream"), f"127.0.0.1:{upstream_port}"])
    popular = popular_names()
    results = []
    try:
        servers_for = make_servers(args, work, upstream_port, "500ms")
        lists = {
            "100k": ("synthetic 100k", 100000),
            "1m": ("synthetic 1M", 1000000),
            "real": ("real lists combined", None),
        }
        for key in args.lists.split(","):
            label, n = lists[key]
            path = os.path.join(work, f"{key}.list")
            if n:
                subprocess.run([os.path.join(args.bin, "examples", "synth-list"), str(n), path], check=True)
            else:
                subprocess.run([os.path.join(args.bin, "examples", "list-export"), path] +
                               [data_file(f"blocklists/{rel}", work) for rel in
                                ("stevenblack-unified-2026-06-26/unified.domains.txt",
                                 "hagezi-2026-08-15/domains__light.txt",
                                 "adguard-dns-filter-noprivacy-2026-08-21/filter.txt")], check=True)
                label += " (StevenBlack unified, HaGeZi light, AdGuard DNS filter)"
            with open(path, "a") as f:
                f.write(CANARY + "\n")
            measure_list(args, key, label, path, popular, servers_for, work, log, results)
    finally:
        args.upstream_proc.terminate()
        log.close()
    if args.ab:
        ab_report(args, results)
    else:
        report(args, results, time.monotonic() - t_start)
    subprocess.run(["rm", "-rf", work, args.logdir])


if __name__ == "__main__":
    sys.exit(main())
