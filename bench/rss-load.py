#!/usr/bin/env python3
"""Resident memory of one or more builds on the same work: a 100k-name
list, the query log on (live copy on /dev/shm, flushed every 2 s), RSS at
the first answer, then the peak and the end of 100,000 forwarded queries
(20,000 names, one at a time, answered by examples/echo-responder).
Compares builds where bench/rss.sh measures one; for a soak's RSS that
moved, this says whether the binary or the run did.

    bench/rss-load.py BIN [BIN ...]

Needs `cargo build --release --example synth-list --example echo-responder`.
"""
import os, shutil, socket, struct, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "target", "release", "examples")


def free_ports(n):
    # Held until all are chosen, so that no two are the same.
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def query(name, qid):
    out = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\x00\x00\x01\x00\x01"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0])


def measure(binary, listfile):
    work = tempfile.mkdtemp(prefix="hydradns-rss-")
    shm = tempfile.mkdtemp(prefix="hydradns-rss-", dir="/dev/shm")
    port, up = free_ports(2)
    echo = subprocess.Popen([os.path.join(EXAMPLES, "echo-responder"), f"127.0.0.1:{up}"])
    with open(f"{work}/conf", "w") as f:
        f.write(f"""config hydradns 'main'
\tlist listen '127.0.0.1:{port}'
\tlist upstream '127.0.0.1:{up}'
\toption control_socket '{work}/control.sock'
\toption list_dir '{work}/lists'
\toption user 'root'
config blocklist
\toption name 'rss'
\toption path '{listfile}'
config querylog 'querylog'
\toption path '{shm}/queries.db'
\toption flash_path '{work}/flash/queries.db'
\toption flush_interval '2s'
\toption max_size '8M'
""")
    # Builds before `option user` (2026-12-02) refused root without --allow-root.
    usage = subprocess.run([binary, "run", "--help"], capture_output=True, text=True)
    old = ["--allow-root"] if "--allow-root" in usage.stdout + usage.stderr else []
    srv = subprocess.Popen([binary, "run", "-c", f"{work}/conf", *old], stderr=open(f"{work}/stderr", "w"))
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(0.05)
        end = time.time() + 30
        while time.time() < end:
            try:
                s.sendto(query("x.example", 1), ("127.0.0.1", port))
                s.recv(512)
                break
            except OSError:
                pass
        else:
            sys.exit(f"{binary}: no answer in 30 s\n" + open(f"{work}/stderr").read())
        time.sleep(1)
        first = rss_kib(srv.pid)
        s.settimeout(1)
        peak = first
        for i in range(100_000):
            s.sendto(query(f"n{i % 20000}.load.example", i & 0xFFFF), ("127.0.0.1", port))
            try:
                s.recv(512)
            except OSError:
                pass
            if i % 5000 == 0:
                peak = max(peak, rss_kib(srv.pid))
        time.sleep(3)
        last = rss_kib(srv.pid)
        return first, max(peak, last), last
    finally:
        srv.terminate()
        echo.terminate()
        srv.wait()
        echo.wait()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    listdir = tempfile.mkdtemp(prefix="hydradns-rss-list-")
    listfile = os.path.join(listdir, "list.txt")
    subprocess.run([os.path.join(EXAMPLES, "synth-list"), "100000", listfile], check=True)
    print("| build | RSS at first answer | peak | after 100k queries |")
    print("|---|---|---|---|")
    mib = lambda k: f"{k / 1024:.1f} MiB"
    for binary in sys.argv[1:]:
        first, peak, last = measure(binary, listfile)
        print(f"| {binary} | {mib(first)} | {mib(peak)} | {mib(last)} |")
    shutil.rmtree(listdir, ignore_errors=True)


if __name__ == "__main__":
    main()
