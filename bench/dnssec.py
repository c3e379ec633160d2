#!/usr/bin/env python3
"""What DNSSEC validation costs HydraDNS, in instructions per query counted by
callgrind (issue 61's "Costs"): the same names through the same upstream
with `option dnssec '1'` and with '0'.

The upstream is tests/dnssec's signed world (`run.sh --serve-only`: signed
zones on an authoritative Unbound, a non-validating recursive Unbound in
front); HydraDNS forwards to the recursive with the test root as its trust
anchor. Counted as bench/instructions.py counts with --lockstep: HydraDNS
under callgrind, started, warmed, zeroed (callgrind_control --zero), then N
or 2N queries one at a time; (second - first) / N is what one more query
costs, start-up and warm-up cancel out. User space only, all threads.

Scenarios:
  hits         secure names (7 algorithms, A/AAAA/TXT/MX, NXDOMAIN, NODATA)
               asked by the warm-up, then again: cache hits; client without DO
  hits, DO     the same with DO set on every query (warm-up and measured)
  misses       x<i>.wild.alg13.example: each a new answer (ECDSA P-256,
               NSEC3 wildcard proof) whose zone keys the warm-up cached
  misses, RSA  zzz<i>.wild.alg8.example: the same for RSA-2048 and NSEC
  cold chain   one query into a zone not yet seen (www.alg14.example, ECDSA
               P-384) after a warm-up that cached the root's and example.'s
               keys: 1 query against 0 (noisier: a single query)

    bench/dnssec.py --hydradns BIN [--queries N] [--miss-queries M] [--rounds R] [--scenarios hits,misses]
    bench/dnssec.py --hydradns BIN --by-function [--scenarios hits] [--keep DIR]

The hits need the default N (2,000) and --rounds 3 for a per-cent answer:
with N = 100 one round moved them by 6 % either way.

--by-function prints, per scenario and setting, the functions one more
query costs most in (bench/instructions.py's table); give it a build with
symbols (bench/profile.sh). Needs valgrind, dnsperf and tests/dnssec's tools
(unbound, ldnsutils, bind9-utils, dnsutils). Loopback only; everything it
starts is stopped on exit.
"""

import argparse
import atexit
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import instructions
import redline

HERE = os.path.dirname(os.path.abspath(__file__))
RIG = os.path.join(HERE, "..", "tests", "dnssec", "run.sh")

ALGS = ["alg5", "alg7", "alg8", "alg10", "alg13", "alg14", "alg15"]
HIT_NAMES = ([f"www.{a}.example A" for a in ALGS] + [f"www.{a}.example AAAA" for a in ALGS]
             + [f"www.{a}.example TXT" for a in ALGS] + [f"mail.{a}.example A" for a in ALGS]
             + ["nx.alg8.example A", "nx.alg13.example A", "www.alg8.example MX", "www.alg13.example MX"])
# Cache the keys of the root, example. and the zone, so each measured miss
# validates one new answer and its proof only.
WARM_ALG13 = ["www.alg13.example A", "x.wild.alg13.example A"]
WARM_ALG8 = ["www.alg8.example A", "zzz.wild.alg8.example A"]

SCENARIOS = ["hits", "hits, DO", "misses", "misses, RSA", "cold chain"]


def start_rig(work):
    """tests/dnssec/run.sh --serve-only: returns (process, its settings)."""
    info = os.path.join(work, "rig.env")
    proc = subprocess.Popen([RIG, "--serve-only", info], stdout=open(os.path.join(work, "rig.log"), "w"),
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not os.path.exists(info):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.terminate()
            raise SystemExit("the signed rig did not start: " + open(os.path.join(work, "rig.log")).read())
        time.sleep(0.2)
    with open(info) as f:
        return proc, dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def stop_rig(proc, work):
    # Removing the file ends its wait; its EXIT trap stops the Unbounds.
    try:
        os.remove(os.path.join(work, "rig.env"))
    except FileNotFoundError:
        pass
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(15)


def make_server(work, rig, dnssec):
    s = redline.Server(f"dnssec {dnssec}", [], blocked_canary=False)
    s.port = redline.free_port()
    conf = os.path.join(work, f"dnssec{dnssec}.conf")
    # One worker and nothing periodic, as the redline's HydraDNS; the only
    # difference between the two configs is the dnssec option.
    with open(conf, "w") as f:
        f.write(f"""config hydradns 'main'
\tlist listen '127.0.0.1:{s.port}'
\tlist upstream '{rig["recursive"]}'
\toption dnssec '{dnssec}'
\toption trust_anchor_file '{rig["anchor"]}'
\toption time_check '0'
\toption upstream_timeout '4s'
\toption cache_size '10000'
\toption workers '1'
\toption stats_interval '0'
\toption control_socket '{work}/dnssec{dnssec}.sock'
config querylog 'querylog'
\toption enabled '0'
\toption path '{work}/log{dnssec}/live.db'
\toption flash_path '{work}/log{dnssec}/flash.db'
""")
    s.cmd = ["hydradns", "run", "--user", "root", "--log", "stderr", "-c", conf]
    s.conf = conf
    return s


def dnsperf(port, path, do):
    cmd = ["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", path, "-l", "900",
           "-c", "1", "-T", "1", "-q", "1", "-Q", "500", "-t", "5", "-n", "1"] + (["-D"] if do else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return redline.summary(out)


def write(work, name, lines):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def run_once(args, server, hydradns, warm, measured, do, tag):
    """HydraDNS under callgrind: warm, zero, ask `measured`; its instruction
    count (or, with --by-function, the kept callgrind file)."""
    out = os.path.join(args.work, f"callgrind-{tag}.out")
    if os.path.exists(out):
        os.remove(out)
    server.cmd[0] = hydradns
    base = list(server.cmd)
    server.cmd = ["valgrind", "--tool=callgrind", "--fair-sched=yes", "--callgrind-out-file=" + out] + base
    server.start(args.log)
    try:
        r = dnsperf(server.port, warm, do)
        if r["completed"] != sum(1 for _ in open(warm)):
            raise SystemExit(f"FAIL {server.name}: warm-up not all answered: {r}")
        subprocess.run(["callgrind_control", "--zero", str(server.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if measured:
            n = sum(1 for _ in open(measured))
            r = dnsperf(server.port, measured, do)
            if r["completed"] != n:
                raise SystemExit(f"FAIL {server.name}: {r['completed']} of {n} queries answered under callgrind: {r}")
    finally:
        server.stop()
        server.cmd = base
    if args.by_function:
        kept = out + ".kept"
        os.replace(out, kept)
        return kept
    return instructions.callgrind_total(out)


def check_answers(rig, server, hydradns, names):
    """Outside callgrind: with dnssec 1, the names must come back with AD
    (validated), or the table would measure something else."""
    server.cmd[0] = hydradns
    server.start(open(os.devnull, "w"))
    try:
        for line in names:
            name, qtype = line.split()
            out = subprocess.run(["dig", "@127.0.0.1", "-p", str(server.port), "+time=5", "+tries=1", "+dnssec",
                                  name, qtype], capture_output=True, text=True).stdout
            if not any(x.startswith(";; flags:") and " ad" in x.split(";")[2] for x in out.splitlines()):
                raise SystemExit(f"FAIL: {name} {qtype} is not validated (no AD) with dnssec 1:\n{out}")
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hydradns", required=True, help="the gateway binary")
    ap.add_argument("--queries", type=int, default=2000, help="N for the hits (default 2000)")
    ap.add_argument("--miss-queries", type=int, default=200, help="N for the misses (default 200)")
    ap.add_argument("--rounds", type=int, default=1, help="runs per scenario and setting, the lowest kept")
    ap.add_argument("--scenarios", help="comma-separated subset of: " + "; ".join(SCENARIOS))
    ap.add_argument("--by-function", action="store_true", help="where the instructions go, per function")
    ap.add_argument("--keep", metavar="DIR", help="with --by-function: keep the callgrind files in DIR")
    args = ap.parse_args()
    hydradns = os.path.abspath(args.hydradns)
    wanted = [s.strip() for s in args.scenarios.split(",")] if args.scenarios else SCENARIOS
    # "hits, DO" and "misses, RSA" hold the separator.
    merged = []
    for w in wanted:
        if w in ("DO", "RSA") and merged:
            merged[-1] += ", " + w
        else:
            merged.append(w)
    wanted = [s for s in SCENARIOS if s in merged]
    if set(merged) - set(SCENARIOS):
        ap.error(f"unknown scenario(s): {', '.join(set(merged) - set(SCENARIOS))}")
    args.work = tempfile.mkdtemp(prefix="hydradns-dnssec-bench-")
    # On every way out, a failed run's SystemExit included.
    atexit.register(shutil.rmtree, args.work, True)
    args.log = open(os.path.join(args.work, "servers.log"), "w")
    rng = random.Random(20261206)
    n, m = args.queries, args.miss_queries
    files = {
        "hits": (write(args.work, "warm-hits.txt", HIT_NAMES),
                 write(args.work, "hits.txt", (rng.choice(HIT_NAMES) for _ in range(2 * n))), n, False),
        "misses": (write(args.work, "warm-alg13.txt", WARM_ALG13),
                   write(args.work, "misses.txt", (f"x{i}.wild.alg13.example A" for i in range(2 * m))), m, False),
        "misses, RSA": (write(args.work, "warm-alg8.txt", WARM_ALG8),
                        write(args.work, "misses-rsa.txt", (f"zzz{i}.wild.alg8.example A" for i in range(2 * m))),
                        m, False),
        # One query against none: the warm-up caches the root's and example.'s keys (alg8's chain).
        "cold chain": (write(args.work, "warm-cold.txt", WARM_ALG8),
                       write(args.work, "cold.txt", ["www.alg14.example A"]), 1, False),
    }
    files["hits, DO"] = files["hits"][:3] + (True,)
    rows = {}
    rig_proc, rig = start_rig(args.work)
    try:
        servers = {d: make_server(args.work, rig, d) for d in (0, 1)}
        check_answers(rig, servers[1], hydradns,
                      HIT_NAMES[:4] + ["x.wild.alg13.example A", "zzz.wild.alg8.example A", "www.alg14.example A"])
        for scen in wanted:
            warm, measured, count, do = files[scen]
            half = write(args.work, f"{scen.replace(', ', '-')}-half.txt", open(measured).read().splitlines()[:count])
            half = half if scen != "cold chain" else None
            for d in (0, 1):
                s = servers[d]
                counts = []
                for r in range(1 if args.by_function else args.rounds):
                    tag = f"{scen.replace(', ', '-').replace(' ', '-')}-{d}"
                    one = run_once(args, s, hydradns, warm, half, do, tag + "-1")
                    two = run_once(args, s, hydradns, warm, measured, do, tag + "-2")
                    if args.by_function:
                        instructions.print_by_function(f"{scen}, dnssec {d}", one, two, count)
                        if args.keep:
                            os.makedirs(args.keep, exist_ok=True)
                            shutil.copy(one, os.path.join(args.keep, f"{tag}-N.out"))
                            shutil.copy(two, os.path.join(args.keep, f"{tag}-2N.out"))
                        break
                    counts.append((two - one) / count)
                if counts:
                    rows[(scen, d)] = min(counts)
                    spread = "" if len(counts) == 1 else " (rounds: " + " / ".join(f"{c:,.0f}" for c in counts) + ")"
                    print(f"  {scen:12} dnssec {d} {rows[(scen, d)]:>12,.0f} instructions/query{spread}",
                          file=sys.stderr, flush=True)
    finally:
        stop_rig(rig_proc, args.work)
        args.log.close()
    if args.by_function:
        return 0
    print("\n## DNSSEC: instructions per query (callgrind, user space)\n")
    print(f"Hits: N = {n:,}; misses: N = {m:,}; cold chain: 1 query against 0. One query in flight at a time, "
          f"lowest of {args.rounds} round(s). HydraDNS commit {redline.commit()}.\n")
    print("| scenario | dnssec 0 | dnssec 1 | change |")
    print("|---|---|---|---|")
    for scen in wanted:
        a, b = rows.get((scen, 0)), rows.get((scen, 1))
        if a is None or b is None:
            continue
        ratio = f"{b / a:,.0f}×" if b >= 2 * a else f"{100 * (b / a - 1):+.1f} %"
        print(f"| {scen} | {a:,.0f} | {b:,.0f} | {b - a:+,.0f} ({ratio}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
