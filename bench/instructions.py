#!/usr/bin/env python3
"""Instructions per query, counted by callgrind: a figure a noisy machine
cannot move, printed beside the wall-clock table of bench/redline.py.

Each server runs under `valgrind --tool=callgrind` twice per scenario, with
the same start-up and warm-up and then N or 2N queries from the same file at
a fixed rate; (instructions of the second run - the first) / N is what one
more query costs. Start-up, list loading and warm-up cancel out. Only user
space is counted: the kernel's UDP work, most of a fast server's CPU, is in
the wall-clock table's CPU/query column instead. All threads are counted, so
`hydradns+log` includes the query-log writer.

    bench/instructions.py --bin target/release [--hydradns BIN] [--quick]
    bench/instructions.py --bin target/release --hydradns BIN --by-function [--scenarios blocked,hits] [--keep DIR]

--by-function runs HydraDNS alone and prints, per scenario, the functions
that one more query costs most in (self instructions, the same difference of
two runs); give it a build with symbols (bench/profile.sh builds one).

The speed ratchet (docs/benchmarks.md, "The speed ratchet"):

    bench/instructions.py --bin target/release --hydradns BIN --quick --baseline bench/baseline.json
    bench/instructions.py --bin target/release --hydradns BIN --quick --write-baseline bench/baseline.json

--baseline fails (exit 1) when HydraDNS's instructions per query in any of
the baseline's scenarios are more than its tolerance (3 %) above it;
bench/run.sh --quick, and so CI, runs it. --write-baseline writes the
figures of this run as the new baseline. Both send the measured queries one
at a time (--lockstep), count from the end of the warm-up on, and take the
lowest of --rounds runs (default 3) per scenario, with up to two more for a
scenario still over the baseline.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import redline

SCENARIOS = [("blocked", "blocked"), ("hits", "hits"), ("misses", "misses"), ("mix", "mix0"),
             ("mix, log on", "mix0")]
# How far above the baseline a scenario may go before --baseline fails.
TOLERANCE_PERCENT = 3
# The query log's writer batches entries by time, not by count, so its
# scenario's lowest of three rounds still moved from 10,226 to 16,472 over
# five passes (2026-12-05): 3 % would fail one pass in a few.
WIDER = {"mix, log on": 10}


def hydradns_row(scen):
    """The server whose row a scenario's baseline figure is: the query log's for "mix, log on"."""
    return "hydradns+log" if scen == "mix, log on" else "hydradns"


def write_baseline(path, rows, args, n):
    figures = {scen: round(rows[(scen, hydradns_row(scen))]) for scen, _ in SCENARIOS
               if (scen, hydradns_row(scen)) in rows}
    doc = {
        "about": "HydraDNS's instructions per query (callgrind, user space, the lowest of the rounds): the speed "
                 "ratchet. bench/instructions.py --baseline fails above these by more than tolerance_percent. "
                 "Lowering them is a normal commit; raising them is a commit that says why (the feature and its "
                 "measured cost). See docs/benchmarks.md, \"The speed ratchet\".",
        "command": f"bench/instructions.py{' --quick' if args.quick else ''} --rounds {args.rounds} "
                   f"--write-baseline {path}",
        "queries": n,
        "rounds": args.rounds,
        "commit": redline.commit(),
        "machine": redline.cpu_model(),
        "date": datetime.date.today().isoformat(),
        "tolerance_percent": TOLERANCE_PERCENT,
        "tolerance_percent_by_scenario": WIDER,
        "instructions_per_query": figures,
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"\nwrote {path}: " + ", ".join(f"{k} {v:,}" for k, v in figures.items()))


def check_baseline(path, rows, n):
    """Compares this run with the baseline in path; returns the exit code."""
    with open(path) as f:
        base = json.load(f)
    if base["queries"] != n:
        print(f"FAIL: {path} was measured with {base['queries']} queries, this run {n}: "
              f"compare like with like (--quick or not)")
        return 1
    tolerance = base.get("tolerance_percent", TOLERANCE_PERCENT)
    wider = base.get("tolerance_percent_by_scenario", {})
    print(f"\n## Against {path} (commit {base['commit']}, tolerance +{tolerance} %"
          + "".join(f", {k} +{v} %" for k, v in wider.items()) + ")\n")
    print("| scenario | baseline | now | change |")
    print("|---|---|---|---|")
    above, below = [], []
    for scen, want in base["instructions_per_query"].items():
        now = rows.get((scen, hydradns_row(scen)))
        if now is None:
            continue
        change = 100 * (now / want - 1)
        print(f"| {scen} | {want:,} | {now:,.0f} | {change:+.1f} % |")
        if change > wider.get(scen, tolerance):
            above.append(f"{scen} {want:,} -> {now:,.0f} ({change:+.1f} %)")
        elif change < -wider.get(scen, tolerance):
            below.append(scen)
    if below:
        print(f"\nBelow the baseline by more than {tolerance} %: {', '.join(below)}. Lower it in a commit of its own: "
              f"bench/instructions.py --bin target/release --hydradns BIN --quick --write-baseline {path}")
    if above:
        print(f"\nFAIL: more instructions per query than {path} allows (+{tolerance} %): {'; '.join(above)}. "
              "Find the cost with --by-function; if it is the price of a feature, raise the baseline with "
              "--write-baseline in a commit that names the feature and its measured cost "
              "(docs/benchmarks.md, \"The speed ratchet\").")
        return 1
    print("\nWithin the baseline.")
    return 0


def callgrind_total(path):
    """Instructions of a finished callgrind run (all threads)."""
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def run_once(args, server, base_cmd, warm, queries, n, log):
    """Starts the server under callgrind, warms it, sends n queries; returns its instruction count."""
    out = os.path.join(args.work, f"callgrind-{server.name}.out")
    if os.path.exists(out):
        os.remove(out)
    # Each run starts with an empty query log, as the first did.
    shutil.rmtree(args.logdir, ignore_errors=True)
    os.makedirs(args.logdir)
    # --fair-sched: threads take turns in order, so a thread waiting for
    # another is not let spin for a whole time slice one run and not the next.
    fair = ["--fair-sched=yes"] if args.outstanding == 1 else []
    server.cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + fair + base_cmd
    server.start(log)
    try:
        if warm:
            redline.dnsperf(server.port, warm, 120, qps=args.qps, outstanding=100, runs=1)
        if args.outstanding == 1:
            # The warm-up's cost moves with how its queries bunched up: count
            # from here on (callgrind_control talks to valgrind through vgdb).
            subprocess.run(["callgrind_control", "--zero", str(server.proc.pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        head = os.path.join(args.work, f"head-{n}.txt")
        with open(queries) as src, open(head, "w") as dst:
            for _, line in zip(range(n), src):
                dst.write(line)
        r = redline.dnsperf(server.port, head, 120, qps=args.measure_qps, outstanding=args.outstanding, runs=1)
        if r["completed"] != n:
            raise SystemExit(f"FAIL {server.name}: {r['completed']} of {n} queries answered under callgrind")
    finally:
        server.stop()
    if args.by_function:
        kept = out + f".{n}"
        os.replace(out, kept)
        return kept
    return callgrind_total(out)


def by_function(path):
    """Self instructions per function of a finished callgrind run (all threads)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--auto=no", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(\S.*?)(?: \[.*\])?$", line)
        if m and ":" in m.group(2):
            # Strip the call count callgrind_annotate appends: it differs between the runs.
            fn = re.sub(r" \([\d,]+x\)$", "", m.group(2).split(":", 1)[1])
            costs[fn] = costs.get(fn, 0) + int(m.group(1).replace(",", ""))
    return costs


def print_by_function(scen, one, two, n, top=60):
    a, b = by_function(one), by_function(two)
    diff = sorted(((b.get(f, 0) - a.get(f, 0)) / n, f) for f in set(a) | set(b))
    total = sum(d for d, _ in diff)
    print(f"\n### {scen}: {total:,.0f} instructions per query\n")
    print("| instructions/query | share | function |")
    print("|---|---|---|")
    for d, f in reversed(diff[-top:]):
        print(f"| {d:,.0f} | {100 * d / total:.1f} % | `{f[:110]}` |")


def same_answers(hydradns, conf, names):
    """The names `conf` neither blocks nor rewrites for 127.0.0.1, as
    `hydradns check` says: comparing a config with services and safe search
    against one without them is fair only on names both answer alike (the
    popular names hold Google's country domains and the services' own)."""
    kept = []
    for name in names:
        out = subprocess.run([hydradns, "check", "-c", conf, "--client", "127.0.0.1", name],
                             capture_output=True, text=True, check=True).stdout
        if f"{name}: not blocked" in out:
            kept.append(name)
    print(f"--same-answers: {len(kept)} of {len(names)} popular names answered alike", file=sys.stderr)
    return kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with the examples (and hydradns)")
    ap.add_argument("--hydradns", help="the gateway binary (default BIN/hydradns)")
    ap.add_argument("--quick", action="store_true", help="fewer queries, HydraDNS and echo only")
    ap.add_argument("--servers", help="comma-separated subset of " + ",".join(redline.ORDER))
    ap.add_argument("--by-function", action="store_true", help="HydraDNS only: where its instructions go")
    ap.add_argument("--keep", metavar="DIR",
                    help="with --by-function: keep the callgrind files in DIR, for callgrind_annotate FILE src/….rs")
    ap.add_argument("--scenarios", help="comma-separated subset of " + ",".join(s for s, _ in SCENARIOS))
    ap.add_argument("--extra-conf", metavar="FILE", action="append",
                    help="append FILE to HydraDNS's config (e.g. bench/parental.conf); again for more files, "
                         "in order; @UPSTREAM@ in them is the benchmark's upstream")
    ap.add_argument("--same-answers", metavar="FILE",
                    help="ask only popular names that FILE (e.g. bench/parental.conf) answers as the default config "
                         "does for 127.0.0.1 (not blocked, no safe search): two configs compared on the same answers")
    ap.add_argument("--baseline", metavar="FILE",
                    help="fail if HydraDNS is more than the tolerance above FILE (bench/baseline.json)")
    ap.add_argument("--write-baseline", metavar="FILE", help="write HydraDNS's figures of this run to FILE")
    ap.add_argument("--lockstep", action="store_true",
                    help="one query in flight at 500 QPS, as --baseline measures (default with it)")
    ap.add_argument("--rounds", type=int,
                    help="runs per scenario, the lowest count kept (default 1; 3 with --baseline or --write-baseline)")
    args = ap.parse_args()
    args.rounds = args.rounds or (3 if args.baseline or args.write_baseline else 1)
    if (args.baseline or args.write_baseline) and (args.by_function or args.extra_conf):
        ap.error("--baseline and --write-baseline measure the default config, without --by-function")
    args.hydradns = args.hydradns or os.path.join(args.bin, "hydradns")
    args.echo = os.path.join(args.bin, "examples", "echo-responder")
    args.forward_echo = os.path.join(args.bin, "examples", "forward-echo")
    # callgrind runs a server about 50 times slower: a low rate keeps every query answered.
    args.qps, n = 2000, (1000 if args.quick else 4000)
    # The ratchet's counts must repeat: one query in flight at a time, at a
    # rate the server keeps up with under callgrind, so no wake-up reads two
    # (how many did moved a count by up to 70 % on a busy machine) and the
    # run lasts as long each time (timers, the log writer's batches).
    ratchet = args.baseline or args.write_baseline or args.lockstep
    args.measure_qps, args.outstanding = (500, 1) if ratchet else (args.qps, 100)
    if args.by_function:
        args.servers = "hydradns,hydradns+log"
    args.servers = args.servers or ("hydradns,hydradns+log,echo" if args.quick else
                                    ",".join(s for s in redline.ORDER if not s.startswith("echo+fwd")))
    args.work = tempfile.mkdtemp(prefix="hydradns-instr-")
    args.logdir = os.path.join(args.work, "log")
    log = open(os.path.join(args.work, "servers.log"), "w")
    upstream_port = redline.free_port()
    args.upstream_proc = subprocess.Popen(
        ["taskset", "-c", "1", os.path.join(args.bin, "examples", "bench-upstream"), f"127.0.0.1:{upstream_port}"])
    rows = {}
    limits = {}
    if args.baseline:
        with open(args.baseline) as f:
            base = json.load(f)
        tolerance = base.get("tolerance_percent", TOLERANCE_PERCENT)
        wider = base.get("tolerance_percent_by_scenario", {})
        limits = {k: v * (1 + wider.get(k, tolerance) / 100) for k, v in base["instructions_per_query"].items()}
    try:
        path = os.path.join(args.work, "100k.list")
        subprocess.run([os.path.join(args.bin, "examples", "synth-list"), "100000", path], check=True)
        with open(path, "a") as f:
            f.write(redline.CANARY + "\n")
        names = redline.read_names(path)
        popular = redline.popular_names()
        if args.same_answers:
            popular = same_answers(args.hydradns, args.same_answers, popular[:8000])
        sc = redline.Scenarios(args.work, "100k", names, popular, 1, 2 * n)
        servers = redline.make_servers(args, args.work, upstream_port, "500ms")(path, names)
        servers.pop("_upstream")
        # "mix, log on" holds the separator: a piece that starts with a space
        # goes on the name before it.
        wanted = []
        for piece in (args.scenarios or "").split(","):
            if piece.startswith(" ") and wanted:
                wanted[-1] += "," + piece
            elif piece:
                wanted.append(piece)
        for scen, file in SCENARIOS:
            if wanted and scen not in wanted:
                continue
            for name, server in servers.items():
                if (name == "hydradns+log") != (scen == "mix, log on"):
                    continue
                base_cmd = list(server.cmd)
                warm = sc.files["warm"] if not name.startswith("echo") else None
                counts = []
                # The echo servers are only context: one round.
                rounds = args.rounds if name.startswith("hydradns") and not args.by_function else 1
                limit = limits.get(scen) if name.startswith("hydradns") else None
                # Over the baseline after the rounds: up to two more, so that
                # one slow round does not fail CI; a real cost stays over.
                while len(counts) < rounds or (limit and min(counts) > limit and len(counts) < rounds + 2):
                    one = run_once(args, server, base_cmd, warm, sc.files[file], n, log)
                    two = run_once(args, server, base_cmd, warm, sc.files[file], 2 * n, log)
                    if args.by_function:
                        break
                    counts.append((two - one) / n)
                server.cmd = base_cmd
                if args.by_function:
                    print_by_function(scen, one, two, n)
                    if args.keep:
                        os.makedirs(args.keep, exist_ok=True)
                        for f in (one, two):
                            shutil.copy(f, os.path.join(args.keep, f"{scen.replace(' ', '').replace(',', '-')}"
                                                                   f"-{os.path.basename(f).rsplit('.', 1)[1]}.out"))
                    continue
                rows[(scen, name)] = min(counts)
                spread = "" if len(counts) == 1 else " (rounds: " + " / ".join(f"{c:,.0f}" for c in counts) + ")"
                print(f"  {scen:12} {name:13} {rows[(scen, name)]:>9,.0f} instructions/query{spread}",
                      file=sys.stderr, flush=True)
    finally:
        args.upstream_proc.terminate()
        log.close()
    if args.by_function:
        shutil.rmtree(args.work, ignore_errors=True)
        return
    names = [s for s in redline.ORDER if s in args.servers.split(",") and s != "hydradns+log"]
    print("\n## Instructions per query (callgrind, user space)\n")
    print(f"Synthetic 100k list, {n:,} queries at {args.qps:,} QPS after the warm-up, command "
          f"`bench/instructions.py{' --quick' if args.quick else ''}`, HydraDNS commit {redline.commit()}. `mix, log on` is HydraDNS with its query "
          "log, writer thread included. Kernel time is not counted (see CPU/query above).\n")
    print("| scenario | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for scen, _ in SCENARIOS:
        cells = [rows.get((scen, "hydradns+log" if scen == "mix, log on" and s == "hydradns" else s)) for s in names]
        if all(c is None for c in cells):
            continue
        print(f"| {scen} | " + " | ".join("" if c is None else f"{c:,.0f}" for c in cells) + " |")
    if ("mix", "hydradns") in rows and ("mix, log on", "hydradns+log") in rows:
        print(f"\nThe query log costs {rows[('mix, log on', 'hydradns+log')] - rows[('mix', 'hydradns')]:,.0f} "
              "instructions per logged query.")
    shutil.rmtree(args.work, ignore_errors=True)
    if args.write_baseline:
        write_baseline(args.write_baseline, rows, args, n)
    if args.baseline:
        return check_baseline(args.baseline, rows, n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
