#!/usr/bin/env python3
"""A router's real load: idle, 100 and 1,000 QPS.

Saturation (bench/redline.py) is what a server can do; a home router spends
its life at 0–1,000 QPS, where what counts is how often the server wakes a
core and how much CPU each query costs. This runs HydraDNS with the OpenWrt
package's settings (query log off and on), dnsmasq, Unbound (one thread) and
the forwarding echo (the floor: it echoes every query and relays the misses)
on the synthetic 100k list, all at once, none pinned (the load and the
benchmark's upstream are on CPU 1: the scheduler wakes a server beside its
load, as a router's kernel does), and measures:

- idle: nothing asks for IDLE_SECS; wake-ups/s is the sum of every thread's
  context switches (voluntary and not), CPU from the threads' schedstat;
- at a fixed 100 and 1,000 QPS of the redline's mix (25 % blocked, 65 % cache
  hits, 10 % new names sent upstream), from dnsperf: CPU µs per answered
  query and context switches per query, the median of rounds that go round
  the servers. HydraDNS's own query counter is checked against dnsperf's.

    bench/lowrate.py --bin DIR [--hydradns BIN] [--out docs/benchmarks.md] [--quick]
        [--servers hydradns+log,dnsmasq,echo+fwd] [--ab LABEL=BIN ...] [--threads]
        [--queries mix|hits|blocked|misses] [--rates 100,1000] [--cpus 0]

--queries and --rates take one kind of query, or other rates, apart (not
with --out: the docs' table is the mix at 100 and 1,000 QPS).

With --out, the table replaces the low-rate section of that file (or is
appended), so bench/run.sh writes it beside the redline tables.
"""

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time

import redline
import section
from redline import CANARY, Scenarios, dnsperf, make_servers, read_names

# echo+fwd is the floor: a forwarder that does nothing but echo and relay
# the misses (examples/forward-echo.rs), so the table shows how much of a
# server's cost at these rates is only the packets' own.
ORDER = ["hydradns", "hydradns+log", "dnsmasq", "unbound", "echo+fwd"]
RATES = [100, 1000]
# What the rounds send (--queries): the mix by default; one kind alone
# shows where a server's cost per query comes from.
QUERIES = {"mix": "the redline's mix (25 % blocked, 65 % cache hits, 10 % new names sent upstream)",
           "hits": "cache hits only", "blocked": "blocked names only",
           "misses": "new names only, all sent upstream"}


def threads(s):
    """Per thread of the server and its companions (HydraDNS's watchdog):
    (name, context switches, of them preempted, CPU ns) so far. A thread
    that ends takes its counts with it; the servers here keep theirs for
    life."""
    out = {}
    for pid in s.pids():
        out.update(threads_of(pid))
    return out


def threads_of(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                lines = f.readlines()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = lines[0].split(None, 1)[1].strip()
        ctx = sum(int(line.split()[1]) for line in lines if "ctxt_switches:" in line)
        # Switched out while it could still run: another task's wake-up (here
        # mostly dnsperf's, woken by the answer on the same core) took the CPU.
        preempted = sum(int(line.split()[1]) for line in lines if line.startswith("nonvoluntary_ctxt_switches:"))
        out[tid] = (name, ctx, preempted, ns)
    return out


def delta(before, after):
    """Context switches and CPU seconds between two `threads` readings, in
    all, and per thread name (switches, preempted, CPU ns); a thread born in
    between counts from zero."""
    per = {}
    for t, (name, c, p, n) in after.items():
        _, c0, p0, n0 = before.get(t, (name, 0, 0, 0))
        pc, pp, pn = per.get(name, (0, 0, 0))
        per[name] = (pc + c - c0, pp + p - p0, pn + n - n0)
    return sum(c for c, _, _ in per.values()), sum(n for _, _, n in per.values()) / 1e9, per


def queries(s):
    return s.counters(s.bin)["queries"] if s.stats_conf else None


def committed(s):
    """`threads` now, but with the log writer's figures taken after it has
    committed what is queued: a batch waits up to 10 s, longer than a round,
    and would otherwise be paid for in the next one. The request's own work
    on the other threads (the control socket) is left out: a router's
    gateway does it only when someone reads the log."""
    now = threads(s)
    if not s.name.endswith("+log"):
        return now
    redline.commit_log(s.bin, s.stats_conf)
    after = threads(s)
    return {t: (after.get(t, v) if v[0] == "hydradns-log" else v) for t, v in now.items()}


def measure(args, servers, sc, log):
    running = []
    try:
        for s in servers:
            s.cpus = args.cpus or None
            s.start(log)
            running.append(s)
        for s in servers:
            if not s.name.startswith("echo"):
                dnsperf(s.port, sc.files["warm"], 30, qps=5000, outstanding=100, runs=1)
            if s.name.endswith("+log"):
                redline.commit_log(s.bin, s.stats_conf)
        # Let the warm-up's log batch, list work and socket sweeps finish.
        time.sleep(args.settle)
        # The server's own threads and its companions' apart: the watchdog's
        # tick is by design, the server's own idle should be nothing.
        before = {s.name: [threads_of(p) for p in s.pids()] for s in servers}
        time.sleep(args.idle_secs)
        idle = {}
        for s in servers:
            after = [threads_of(p) for p in s.pids()]
            parts = [delta(b, a) for b, a in zip(before[s.name], after)]
            if args.threads:
                for ctx, cpu, per in parts:
                    print(f"  idle {s.name}: " + ", ".join(f"{n} {c / args.idle_secs:.2f}/s {ns / 1e6:.1f} ms"
                                                         for n, (c, _, ns) in sorted(per.items()) if c), flush=True)
            (ctx, cpu, _), rest = parts[0], parts[1:]
            idle[s.name] = {"wakeups": ctx / args.idle_secs, "cpu_ms_min": cpu * 1e3 * 60 / args.idle_secs,
                            "companion": [(c / args.idle_secs, n * 1e3 * 60 / args.idle_secs) for c, n, _ in rest]}
        rates = {(s.name, q): {"cpu": [], "ctx": [], "lost": 0, "stolen": 0.0} for s in servers for q in args.rates}
        for k in range(args.rounds):
            for i, qps in enumerate(args.rates):
                # A file per round and rate: a miss must be a name no server has seen.
                datafile = sc.files[f"{args.queries}{k * len(args.rates) + i}"]
                for s in servers:
                    q0, t0, st0 = queries(s), threads(s), redline.steal_secs()
                    r = dnsperf(s.port, datafile, args.rate_secs, qps=qps, outstanding=100)
                    ctx, cpu, per = delta(t0, committed(s))
                    rates[(s.name, qps)]["stolen"] += redline.steal_secs() - st0
                    q1 = queries(s)
                    answered = r["completed"]
                    if q0 is not None and q1 - q0 < answered:
                        raise SystemExit(f"FAIL {s.name} at {qps} QPS: dnsperf got {answered} answers, "
                                         f"the server counted only {q1 - q0} queries")
                    row = rates[(s.name, qps)]
                    row["cpu"].append(cpu / max(1, answered) * 1e6)
                    row["ctx"].append(ctx / max(1, answered))
                    row["lost"] += r["lost"]
                    print(f"  round {k + 1} {s.name:13} {qps:>5} QPS: {row['cpu'][-1]:6.1f} µs/query, "
                          f"{row['ctx'][-1]:.2f} switches/query, lost {r['lost']}", flush=True)
                    if args.threads:
                        n = max(1, answered)
                        print("    " + ", ".join(f"{t} {c / n:.2f} sw ({p / n:.2f} preempted) {ns / 1e3 / n:.1f} µs"
                                                 for t, (c, p, ns) in sorted(per.items()) if c or ns), flush=True)
        return idle, rates
    finally:
        for s in running:
            s.stop()


def table(args, idle, rates, elapsed):
    cpu = redline.cpu_model()
    at = [f"{q:,}" for q in args.rates]
    L = ["## At a router's load: idle, 100 and 1,000 QPS", "",
         f"Run: {datetime.date.today()}, `bench/lowrate.py{' --quick' if args.quick else ''}` "
         f"({elapsed / 60:.0f} min, commit {redline.commit()}). Machine: {cpu}, {os.cpu_count()} cores, "
         f"Linux {os.uname().release}.", "",
         f"Every server up at once, {'pinned to CPU ' + args.cpus if args.cpus else 'not pinned'} (dnsperf and the "
         "benchmark's upstream on CPU 1); synthetic 100k list; "
         "HydraDNS with the OpenWrt package's settings (workers per core, stats line hourly, flash copy hourly, "
         "list refresh every 6 h, query log on tmpfs) and its watchdog beside it, counted apart in the idle columns and with it at a rate "
         "(`hydradns watchdog`: fail_open, a look at the socket table every 5 s). "
         f"Idle: {args.idle_secs:g} s with no queries after a warm-up; wake-ups are the sum of all the server's "
         "threads' context switches, CPU their run time (schedstat). At a fixed rate: "
         f"{QUERIES[args.queries]} from dnsperf, "
         f"{args.rounds} × {args.rate_secs:g} s per rate and server, rounds going round the servers; "
         "CPU per answered query (median of rounds; with the query log on, the round ends with `hydradns log`, "
         "which has the writer commit the round's entries, so each round pays for its own), "
         "context switches per query, queries lost over all rounds, "
         "CPU time the hypervisor stole from the VM during that server's rounds (both cores). "
         "The last two columns are a server's CPU per query over dnsmasq's, the median of the rounds' ratios "
         "and, in brackets, the lowest and highest round's: where the scheduler put each server in a round "
         "moves them (target for HydraDNS ≤ 0.6). `echo+fwd` is the floor: `examples/forward-echo.rs` answers every query "
         "with itself and relays the misses upstream, one blocking receive and one send per packet, nothing else.",
         "",
         "| server | idle wake-ups/s | idle CPU ms/min | " + " | ".join(f"CPU µs/query at {q} QPS" for q in at)
         + f" | switches/query at {' / '.join(at)} | lost | stolen | "
         + " | ".join(f"÷ dnsmasq at {q}" for q in at) + " |",
         "|---" * (6 + 2 * len(at)) + "|"]
    med = {k: statistics.median(v["cpu"]) for k, v in rates.items()}

    def ratio(name, q):
        """Median of the rounds' ratios, and their range: each round's two
        runs are seconds apart, so a slow spell of the VM weighs on both
        sides of one ratio."""
        h, d = rates[(name, q)]["cpu"], rates[("dnsmasq", q)]["cpu"]
        r = [a / b for a, b in zip(h, d)]
        return f"{statistics.median(r):.2f} ({min(r):.2f}–{max(r):.2f})"

    for name in ORDER + [n for n in idle if n not in ORDER]:
        if name not in idle:
            continue
        i = idle[name]
        ratios = [""] * len(args.rates)
        if (name.startswith("hydradns") or name == "echo+fwd") and ("dnsmasq", args.rates[0]) in med:
            ratios = [ratio(name, q) for q in args.rates]
        sw = " / ".join(f"{statistics.median(rates[(name, q)]['ctx']):.2f}" for q in args.rates)
        lost = sum(rates[(name, q)]["lost"] for q in args.rates)
        stolen = sum(rates[(name, q)]["stolen"] for q in args.rates) * 1e3
        wake, cpu_min = f"{i['wakeups']:.1f}", f"{i['cpu_ms_min']:.1f}"
        for w, c in i.get("companion", []):
            wake, cpu_min = f"{wake} + {w:.1f} watchdog", f"{cpu_min} + {c:.1f} watchdog"
        L.append(f"| {name} | {wake} | {cpu_min} | "
                 + " | ".join(f"{med[(name, q)]:.1f}" for q in args.rates)
                 + f" | {sw} | {lost} | {stolen:.0f} ms | " + " | ".join(ratios) + " |")
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with hydradns and the examples")
    ap.add_argument("--hydradns", help="the gateway binary (default BIN/hydradns)")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--servers", default=",".join(ORDER))
    # Unpinned by default: a server pinned to the core the load is not on
    # paid an interrupt to another core per wake-up, doubling its CPU per query.
    ap.add_argument("--cpus", default="", help="taskset CPU list for the servers (default: not pinned)")
    # A change to the answer path moves CPU per query by less than the VM
    # moves it between runs: builds compared in one run, round by round, each
    # against dnsmasq's round beside it, see through that.
    ap.add_argument("--ab", action="append", default=[], metavar="LABEL=BIN",
                    help="also run this build, as hydradns:LABEL (a LABEL ending in +log: query log on); repeatable")
    ap.add_argument("--queries", choices=sorted(QUERIES), default="mix", help="what the rounds send")
    ap.add_argument("--rates", default=",".join(map(str, RATES)), help="comma-separated QPS")
    ap.add_argument("--threads", action="store_true", help="also print each thread's share (where the cost goes)")
    ap.add_argument("--rate-secs", type=float, dest="rate_secs_opt", help="seconds per rate and round")
    ap.add_argument("--idle-secs", type=float, dest="idle_secs_opt", help="seconds of idle")
    args = ap.parse_args()
    args.hydradns = args.hydradns or os.path.join(args.bin, "hydradns")
    args.ab = [tuple(x.split("=", 1)) for x in args.ab]
    args.rates = [int(q) for q in args.rates.split(",")]
    if args.out and (args.queries != "mix" or args.rates != RATES):
        raise SystemExit("--out writes the mix at 100 and 1,000 QPS only")
    if any(len(x) != 2 for x in args.ab):
        raise SystemExit("--ab takes LABEL=BIN")
    if args.quick:
        args.idle_secs, args.rate_secs, args.rounds, args.settle = 3, 2, 1, 1.0
    else:
        # Many short rounds: the VM's noise comes in spells of seconds, and
        # a median over more rounds lets fewer of them through.
        args.idle_secs, args.rate_secs, args.rounds, args.settle = 60, 5, 8, 3.0
    args.idle_secs = args.idle_secs_opt or args.idle_secs
    args.rate_secs = args.rate_secs_opt or args.rate_secs
    args.echo = os.path.join(args.bin, "examples", "echo-responder")
    args.forward_echo = os.path.join(args.bin, "examples", "forward-echo")
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="hydradns-lowrate-")
    args.logdir = tempfile.mkdtemp(prefix="hydradns-lowrate-log-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    log = open(os.path.join(work, "servers.log"), "w")
    upstream_port = redline.free_port()
    args.upstream_proc = subprocess.Popen(
        ["taskset", "-c", "1", os.path.join(args.bin, "examples", "bench-upstream"), f"127.0.0.1:{upstream_port}"])
    try:
        path = os.path.join(work, "100k.list")
        subprocess.run([os.path.join(args.bin, "examples", "synth-list"), "100000", path], check=True)
        with open(path, "a") as f:
            f.write(CANARY + "\n")
        popular = redline.popular_names()
        lines = int(max(args.rates) * args.rate_secs * 1.2)
        names = read_names(path)
        files = args.rounds * len(args.rates)
        sc = Scenarios(work, "100k", names, popular, files if args.queries == "mix" else 0, lines)
        for k in range(files):
            if args.queries == "misses":
                # A file per round and rate, as the mix has: a miss must be new.
                kind_file = os.path.join(work, f"misses-{k}.txt")
                with open(kind_file, "w") as f:
                    f.writelines(f"r{k}m{i}.miss.example A\n" for i in range(lines))
                sc.files[f"misses{k}"] = kind_file
            elif args.queries != "mix":
                # Hits and blocked names: the scenario's own file serves every round.
                sc.files[f"{args.queries}{k}"] = sc.files[args.queries]
        defs = make_servers(args, work, upstream_port, None, shipped=True)(path, names)
        servers = [defs[n] for n in ORDER if n in defs] + [s for n, s in defs.items() if n.startswith("hydradns:")]
        idle, rates = measure(args, servers, sc, log)
    finally:
        args.upstream_proc.terminate()
        log.close()
    text = table(args, idle, rates, time.monotonic() - t_start)
    print("\n" + text)
    if args.out:
        section.replace(args.out, "low-rate", "bench/lowrate.py", text)
    subprocess.run(["rm", "-rf", work, args.logdir])


if __name__ == "__main__":
    sys.exit(main())
