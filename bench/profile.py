#!/usr/bin/env python3
"""Where HydraDNS's time goes, by function, under the redline benchmark's load.

Starts the gateway (a build with symbols) pinned to CPU 0 on one list, warms
its cache, records it with `perf record` while bench-load saturates it from
CPU 1 with one scenario's queries, and prints perf's top functions (kernel
included). With --startup it records the start instead: from exec to the
first blocked answer, the list load. With --syscalls it counts the system
calls the gateway makes under the load instead (perf's syscall
tracepoints), per answered query. With --qps the load is dnsperf at that
fixed rate instead (a router's load, as bench/lowrate.py sends it), and
--unpinned lets the scheduler place the server as lowrate.py does.
bench/profile.sh builds what it needs.

    bench/profile.py --bin DIR --hydradns BIN [--list 1m] [--scenario mix] [--secs 10] [--startup | --syscalls] [--echo | --fwd]
        [--qps 100 [--unpinned]]
    bench/profile.py ... --graph SYMBOL     (the call chains into SYMBOL: who pays for a kernel function)
    bench/profile.py ... --annotate SYMBOL  (SYMBOL's hottest instructions: which load stalls)
    bench/profile.py ... --children         (inclusive shares: what each system call and stage costs with all it calls)
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redline  # noqa: E402  (the benchmark's data and load, shared)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with the examples")
    ap.add_argument("--hydradns", required=True, help="a gateway build with symbols")
    ap.add_argument("--list", default="1m", choices=["100k", "1m"])
    ap.add_argument("--scenario", default="mix", choices=["blocked", "hits", "misses", "mix"])
    ap.add_argument("--secs", type=float, default=10)
    ap.add_argument("--startup", action="store_true")
    ap.add_argument("--syscalls", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="sym", choices=["sym", "dso"],
                    help="dso: the split between the gateway's own code, libc/vdso and the kernel")
    ap.add_argument("--annotate", metavar="SYMBOL",
                    help="print the instructions of SYMBOL that took at least 0.8 %% of its samples")
    ap.add_argument("--graph", metavar="SYMBOL",
                    help="record call chains and print the paths into SYMBOL (e.g. _raw_spin_unlock_irqrestore)")
    ap.add_argument("--children", action="store_true",
                    help="inclusive shares (a function with all it calls): which system call or stage costs what")
    ap.add_argument("--echo", action="store_true",
                    help="profile the echo responder instead, to compare the kernel's share")
    ap.add_argument("--fwd", action="store_true",
                    help="profile the batching forwarding echo (forward-echo --batch) instead: the floor the "
                         "mix is set against, which relays misses to the same upstream")
    ap.add_argument("--qps", type=int, help="a fixed rate from dnsperf instead of saturation")
    ap.add_argument("--unpinned", action="store_true", help="the server on any core (the load stays on CPU 1)")
    args = ap.parse_args()
    args.load = os.path.join(args.bin, "examples", "bench-load")
    work = tempfile.mkdtemp(prefix="hydradns-profile-")
    path = os.path.join(work, f"{args.list}.list")
    n = {"100k": 100000, "1m": 1000000}[args.list]
    subprocess.run([os.path.join(args.bin, "examples", "synth-list"), str(n), path], check=True)
    with open(path, "a") as f:
        f.write(redline.CANARY + "\n")
    upstream_port = redline.free_port()
    upstream = subprocess.Popen(["taskset", "-c", "1", os.path.join(args.bin, "examples", "bench-upstream"),
                                 f"127.0.0.1:{upstream_port}"])
    port = redline.free_port()
    conf = os.path.join(work, "hydradns.conf")
    with open(conf, "w") as f:
        f.write(f"""config hydradns 'main'
\tlist listen '127.0.0.1:{port}'
\tlist upstream '127.0.0.1:{upstream_port}'
\toption workers '1'
\toption cache_size '10000'
\toption block_mode 'nxdomain'
\toption control_socket '{work}/ctl.sock'
\toption list_dir '{work}/lists'
\toption stats_interval '0'
config blocklist
\toption path '{path}'
config querylog 'querylog'
\toption enabled '0'
""")
    data = os.path.join(work, "perf.data")
    cpus = "0,1" if args.unpinned else "0"
    cmd = ["taskset", "-c", cpus, args.hydradns, "run", "--user", "root", "--log", "stderr", "-c", conf]
    if args.echo:
        cmd = ["taskset", "-c", cpus, os.path.join(args.bin, "examples", "echo-responder"), f"127.0.0.1:{port}"]
    if args.fwd:
        cmd = ["taskset", "-c", cpus, os.path.join(args.bin, "examples", "forward-echo"), f"127.0.0.1:{port}",
               f"127.0.0.1:{upstream_port}", "--batch"]
    yardstick = args.echo or args.fwd
    log = open(os.path.join(work, "server.log"), "w")
    try:
        if args.startup:
            proc = subprocess.Popen(["perf", "record", "-q", "-F", "20000", "-o", data, "--"] + cmd,
                                    stdout=log, stderr=log)
            redline.first_answer(port, True, time.monotonic() + 60)
            proc.terminate()
            proc.wait(30)
        else:
            proc = subprocess.Popen(cmd, stdout=log, stderr=log)
            redline.first_answer(port, not yardstick, time.monotonic() + 60)
            names = redline.read_names(path)
            popular = redline.popular_names()
            sc = redline.Scenarios(work, args.list, names, popular, 1, int(args.secs * 250000 * 1.1))
            if not yardstick:
                redline.dnsperf(port, sc.files["warm"], 30, qps=20000, outstanding=100, runs=1)
            counts = os.path.join(work, "syscalls.txt")
            if args.syscalls:
                rec = subprocess.Popen(["perf", "stat", "-x,", "-o", counts, "-e", "syscalls:sys_enter_*",
                                        "-p", str(proc.pid)], stdout=log, stderr=log)
            else:
                graph = ["-g"] if args.graph or args.children else []
                # At a fixed low rate the server runs a few ms a second: sample
                # its runs densely enough to see them.
                hz = "20000" if args.qps else "4000"
                rec = subprocess.Popen(["perf", "record", "-q", "-F", hz, *graph, "-p", str(proc.pid), "-o", data],
                                       stdout=log, stderr=log)
            time.sleep(0.5)
            datafile = sc.files["mix0"] if args.scenario == "mix" else sc.files[args.scenario]
            if args.qps:
                r = redline.dnsperf(port, datafile, args.secs, qps=args.qps, outstanding=100)
            else:
                r = redline.blast(args, port, datafile, args.secs)
            subprocess.run(["kill", "-INT", str(rec.pid)])
            rec.wait(60)
            proc.terminate()
            proc.wait(10)
            print(f"{args.scenario}, {args.list} list: {r['qps']:,.0f} QPS under perf (which costs some), "
                  f"{r['completed']:,} answered")
            if args.syscalls:
                rows = []
                for line in open(counts):
                    w = line.split(",")
                    if len(w) > 2 and w[0].strip().isdigit() and int(w[0]) > 0:
                        rows.append((int(w[0]), w[2].replace("syscalls:sys_enter_", "")))
                print(f"system calls per answered query ({r['completed']:,} answered):")
                for n, name in sorted(rows, reverse=True):
                    print(f"  {name:20} {n / max(1, r['completed']):.4f}")
                return
        if args.annotate:
            # Where inside one function its samples fall (a build with line tables).
            out = subprocess.run(["perf", "annotate", "-i", data, "--stdio", "--percent-limit", "0.5", args.annotate],
                                 capture_output=True, text=True, check=True).stdout
            print("\n".join(line for line in out.splitlines()
                            if re.match(r"\s+[0-9]+\.[0-9]+\s", line) and float(line.split()[0]) >= 0.8))
            return
        if args.graph:
            # Callers of one symbol, each chain with its share of all samples.
            out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "sym", "--stdio",
                                  "--symbols", args.graph, "-G", "--percent-limit", "0.2"],
                                 capture_output=True, text=True, check=True).stdout
            print("\n".join(line for line in out.splitlines() if line.strip() and not line.startswith("#")))
            return
        out = subprocess.run(["perf", "report", "-i", data, "--children" if args.children else "--no-children",
                              "--sort", args.sort, "--stdio", "-n", "-g", "none", "--percent-limit", "0.5"],
                             capture_output=True, text=True, check=True).stdout
        rows = [line for line in out.splitlines() if line.strip() and not line.startswith("#")]
        print("\n".join(rows[:args.top]))
    finally:
        upstream.terminate()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    sys.exit(main())
