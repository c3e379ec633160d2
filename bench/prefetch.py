#!/usr/bin/env python3
"""Prefetch on and off, on a query stream with the Internet's TTLs.

A home's queries go to a few popular names again and again and to a long
tail once; their answers live from 30 s to a day. With prefetch off, each
expiry of a name in use costs its next asker a round trip upstream; with
it on, a hit in the last tenth of the TTL refreshes the name behind the
answer. This measures what that buys and what it costs:

- two HydraDNS instances with the OpenWrt package's cache settings, one
  with `prefetch 0`, each with its own benchmark upstream answering with
  `real` TTLs (30 s, 1, 5, 10 min, 1 h, 1 d, fixed per name);
- one query stream for both, seeded: the top NAMES names of the Tranco-like
  popularity list, drawn by Zipf's law over their rank (s = 1), sent by
  dnsperf at a fixed QPS to both at once for MINUTES, measured after a
  warm-up of a third of that, at most 2 minutes (a name's first query is a
  miss either way);
- per instance: the hit rate, the misses a client waited on and the queries
  the upstream answered, per 1,000 client queries, and prefetches started
  and skipped. HydraDNS's query count is checked against what
  dnsperf sent, its upstream count against what the upstream answered.

    bench/prefetch.py --bin DIR --hydradns BIN [--minutes 10] [--qps 200] [--names 5000] [--out FILE]

With --out, the table replaces the prefetch section of that file (or is appended).
"""

import argparse
import datetime
import itertools
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import redline
import section
from redline import first_answer, free_port, stats



def query_file(path, names, count, rng):
    """`count` queries for A records of `names`, by Zipf's law over the rank."""
    weights = list(itertools.accumulate(1 / r for r in range(1, len(names) + 1)))
    with open(path, "w") as f:
        for name in rng.choices(names, cum_weights=weights, k=count):
            f.write(f"{name} A\n")


def read_count(path, deadline=5):
    """The upstream's answer count (its file appears within 100 ms of its start)."""
    t = time.monotonic() + deadline
    while not os.path.exists(path) and time.monotonic() < t:
        time.sleep(0.05)
    return int(open(path).read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with the examples")
    ap.add_argument("--hydradns", required=True)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--qps", type=int, default=200)
    ap.add_argument("--names", type=int, default=5000)
    ap.add_argument("--out")
    args = ap.parse_args()
    secs = int(args.minutes * 60)
    warm = min(120, secs // 3)
    work = tempfile.mkdtemp(prefix="hydradns-prefetch-")
    popular = redline.popular_names()
    names = popular[:args.names]
    queries = os.path.join(work, "queries.txt")
    query_file(queries, names, args.qps * secs, random.Random(20261202))
    blocklist = os.path.join(work, "list.txt")
    with open(blocklist, "w") as f:
        f.write(redline.CANARY + "\n")

    procs, runs = [], {}
    try:
        for prefetch in (1, 0):
            count = os.path.join(work, f"upstream-{prefetch}.count")
            up_port, port = free_port(), free_port()
            procs.append(subprocess.Popen([os.path.join(args.bin, "examples", "bench-upstream"),
                                           f"127.0.0.1:{up_port}", "real", count]))
            conf = os.path.join(work, f"prefetch-{prefetch}.conf")
            # The package's cache settings (openwrt/files/hydradns.config), log off.
            with open(conf, "w") as f:
                f.write(f"""config hydradns 'main'
\tlist listen '127.0.0.1:{port}'
\tlist upstream '127.0.0.1:{up_port}'
\toption cache_size '4096'
\toption serve_stale '1'
\toption prefetch '{prefetch}'
\toption stats_interval '0'
\toption refresh_interval '0'
\toption control_socket '{work}/{prefetch}.sock'
\toption list_dir '{work}/lists-{prefetch}'
config blocklist
\toption path '{blocklist}'
config querylog 'querylog'
\toption enabled '0'
""")
            log = open(os.path.join(work, f"hydradns-{prefetch}.log"), "w")
            procs.append(subprocess.Popen([args.hydradns, "run", "--user", "root", "--log", "stderr", "-c", conf],
                                          stdout=log, stderr=log))
            first_answer(port, True, time.monotonic() + 60)
            runs[prefetch] = {"port": port, "conf": conf, "count": count,
                              "before": stats(args.hydradns, conf)["counters"],
                              "up_before": read_count(count)}

        # Both at once, from one file: they see the same stream at the same time.
        done = {}

        def load(prefetch):
            done[prefetch] = redline.dnsperf(runs[prefetch]["port"], queries, secs, qps=args.qps, runs=1)

        threads = [threading.Thread(target=load, args=(p,)) for p in runs]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        # The measured part starts once the cache is warm: every name's first
        # query is a miss either way.
        time.sleep(warm)
        for r in runs.values():
            r["warm"] = stats(args.hydradns, r["conf"])["counters"]
            r["up_warm"] = read_count(r["count"])
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        time.sleep(0.5)  # the counters of answers in flight at the end

        rows = []
        for prefetch, r in runs.items():
            s = stats(args.hydradns, r["conf"])
            total = {k: v - r["before"].get(k, 0) for k, v in s["counters"].items() if isinstance(v, int)}
            c = {k: v - r["warm"].get(k, 0) for k, v in s["counters"].items() if isinstance(v, int)}
            up_now = read_count(r["count"])
            d = done[prefetch]
            if abs(total["udp_queries"] - d["sent"]) > d["sent"] // 1000:
                sys.exit(f"prefetch {prefetch}: HydraDNS counted {total['udp_queries']} queries, dnsperf sent {d['sent']}")
            if up_now - r["up_before"] != total["forwarded"]:
                sys.exit(f"prefetch {prefetch}: HydraDNS forwarded {total['forwarded']}, "
                         f"the upstream answered {up_now - r['up_before']}")
            upstream = up_now - r["up_warm"]
            asked = c["udp_queries"]
            waited = c["forwarded"] - c["prefetched"]
            rows.append({"prefetch": "on" if prefetch else "off", "asked": asked,
                         "hit": 100 * c["cached"] / asked, "waited": 1000 * waited / asked,
                         "upstream": 1000 * upstream / asked, "prefetched": c["prefetched"],
                         "skipped": c["prefetch_skipped"], "stale": c["stale_served"],
                         "lost": d.get("lost", 0)})
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)

    machine = f"{redline.cpu_model()}, {os.cpu_count()} cores, Linux {os.uname().release}"
    lines = [
        "## Prefetch on and off",
        "",
        f"Measured {datetime.date.today()} on {machine}, HydraDNS {redline.commit()}, "
        f"by `bench/prefetch.py --minutes {args.minutes:g} --qps {args.qps} --names {args.names}` "
        f"({elapsed:.0f} s). Both instances got the same {args.qps * secs:,} queries at {args.qps} QPS "
        f"at once, counted from {warm} s in (a warm cache): A records of the top {args.names:,} names of the Tranco-like list, drawn by Zipf's "
        "law over rank; each had its own benchmark upstream answering with `real` TTLs "
        "(30 s, 1, 5, 10 min, 1 h, 1 d per name) and the package's cache of 4,096 answers. "
        "Hit rate: answered from the cache; waited on: misses a client waited for an upstream "
        "answer on; upstream: queries the upstream answered (its own count, equal to HydraDNS's). "
        "Per 1,000 client queries.",
        "",
        "| prefetch | hit rate | waited on / 1,000 | upstream / 1,000 | prefetches | skipped | stale served | lost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['prefetch']} | {r['hit']:.1f} % | {r['waited']:.1f} | {r['upstream']:.1f} | "
                     f"{r['prefetched']:,} | {r['skipped']:,} | {r['stale']:,} | {r['lost']:,} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        section.replace(args.out, "prefetch", "bench/prefetch.py", table)


if __name__ == "__main__":
    main()
