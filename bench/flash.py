#!/usr/bin/env python3
"""What the gateway writes to flash in a day (issue 46), driven by bench/flash.sh.

The gateway runs with the live query log on tmpfs and `flash_path` and
`list_dir` on a filesystem of their own (a loop device bench/flash.sh made),
and a simulated day is compressed 3600 times: an hour is a second. So
`flush_interval` is 1 s (the shipped 1 h), `retention` 168 s (the shipped
7 d), `refresh_interval` 6 s (the shipped 6 h). Before the measured day the
live database is filled with 7 simulated days of rows at the day's rate and
the gateway makes its first flash copy of them (not measured), so the day is
steady state: retention full, each flush adding an hour of rows and deleting
the hour that expired. During the day a client sends the day's queries at an
even rate (blocked names of a 3,000-name mix, answered locally: no upstream
needed; a blocked row is about the size of a forwarded one). `max_size` is
256M so that retention, not size, bounds the log at every load (the shipped
32M holds about 400,000 rows: 200,000 a day would reach it in two days).

Measured: the sectors the loop device wrote over one simulated day
(/sys/block/<dev>/stat, field 7, after a sync before and after), next to the
gateway's own count (`flash_bytes_written` in `stats --json`) and the new
rows' own bytes (rows added x the bytes a row takes in the database).

  bench/flash.py BIN DEV MOUNT QUERIES_PER_DAY [--idle] [--lists]
"""
import json, os, random, socket, sqlite3, struct, subprocess, sys, threading, time
import http.server

BIN, DEV, MNT, PER_DAY = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
IDLE = "--idle" in sys.argv
LISTS = "--lists" in sys.argv
HOUR = 1.0  # a simulated hour, in seconds
DAYS = 7
WORK = f"/dev/shm/hydradns-flash-bench-{os.getpid()}"
os.makedirs(WORK + "/live", exist_ok=True)

SCHEMA = """
CREATE TABLE IF NOT EXISTS queries (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, client TEXT NOT NULL,
 name TEXT NOT NULL, qtype INTEGER NOT NULL, outcome TEXT NOT NULL, rcode INTEGER NOT NULL, upstream TEXT,
 list TEXT, latency_us INTEGER NOT NULL, mac TEXT, client_name TEXT);
CREATE TABLE IF NOT EXISTS totals (outcome TEXT PRIMARY KEY, count INTEGER NOT NULL);
"""
random.seed(46)
NAMES = [f"{random.choice(['www', 'api', 'cdn', 'img', 't', 's'])}."
         f"{''.join(random.choice('abcdefghijklmnop') for _ in range(random.randint(4, 12)))}.bench.example"
         for _ in range(3000)]


def sectors_written():
    os.sync()
    with open(f"/sys/block/{DEV}/stat") as f:
        return int(f.read().split()[6]) * 512


def prefill():
    """Seven simulated days of rows, ending now, at the day's rate."""
    db = sqlite3.connect(WORK + "/live/queries.db")
    db.executescript(SCHEMA)
    now = int(time.time() * 1000)
    n = PER_DAY * DAYS
    span = int(DAYS * 24 * HOUR * 1000)
    rows = []
    for i in range(n):
        ts = now - span + i * span // n
        rows.append(((ts << 12) + i % 4096, ts, f"192.168.1.{2 + i % 37}", random.choice(NAMES),
                     random.choice([1, 1, 28, 65]), "blocked", 0, None, "bench", random.randint(20, 400)))
    db.executemany("INSERT INTO queries (id, ts, client, name, qtype, outcome, rcode, upstream, list, latency_us)"
                   " VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
    db.execute("INSERT INTO totals VALUES ('blocked', ?)", (n,))
    db.commit()
    db.close()


def query(qid, name):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack(">HH", 1, 1)


class ListHandler(http.server.BaseHTTPRequestHandler):
    """The same list every time: a 304 when asked with its ETag, else the
    same bytes (which the gateway compares with its copy)."""
    body = "".join(f"ads{i}.example\n" for i in range(20000)).encode()

    def do_GET(self):
        if self.path == "/etag.txt" and self.headers.get("If-None-Match") == '"v1"':
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(200)
        if self.path == "/etag.txt":
            self.send_header("ETag", '"v1"')
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a):
        pass


def main():
    prefill()
    lists = ""
    if LISTS:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ListHandler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        port = srv.server_address[1]
        lists = (f"config blocklist\n\toption name 'etag'\n\toption url 'http://127.0.0.1:{port}/etag.txt'\n"
                 f"config blocklist\n\toption name 'plain'\n\toption url 'http://127.0.0.1:{port}/plain.txt'\n")
    conf = f"""config hydradns 'main'
\tlist listen '127.0.0.1:0'
\tlist upstream '127.0.0.1:9'
\toption control_socket '{WORK}/control.sock'
\toption stats_interval '0'
\toption list_dir '{MNT}/lists'
\toption refresh_interval '{int(6 * HOUR)}s'
config blocklist
\toption name 'bench'
\tlist domain 'bench.example'
{lists}config querylog 'querylog'
\toption path '{WORK}/live/queries.db'
\toption flash_path '{MNT}/queries.db'
\toption flush_interval '{int(HOUR)}s'
\toption retention '{int(DAYS * 24 * HOUR)}s'
\toption batch_interval '{int(HOUR)}s'
\toption max_size '256M'
"""
    with open(WORK + "/conf", "w") as f:
        f.write(conf)
    log = open(WORK + "/log", "w+")
    gw = subprocess.Popen([BIN, "run", "--user", "root", "--log", "stderr", "-c", WORK + "/conf"],
                          stdout=subprocess.DEVNULL, stderr=log)
    try:
        addr = None
        for _ in range(600):
            text = open(WORK + "/log").read()
            if "ready with" in text and "listening on " in text:
                a = text.split("listening on ")[1].split(" ")[0]
                host, port = a.rsplit(":", 1)
                addr = (host, int(port))
                break
            time.sleep(0.05)
        # The first copy of the seven days (and the lists' first download): not measured.
        for _ in range(1200):
            text = open(WORK + "/log").read()
            copied = PER_DAY == 0 or "query log copied to" in text
            if copied and (not LISTS or text.count("updated") >= 2):
                break
            time.sleep(0.05)
        time.sleep(1.5 * HOUR)
        stats0 = stats()
        w0 = sectors_written()
        cpu0 = flusher_cpu_ns(gw.pid)
        copies0 = open(WORK + "/log").read().count("query log copied to")
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        start = time.monotonic()
        day = 24 * HOUR
        sent = 0
        total = 0 if IDLE else PER_DAY
        while True:
            t = time.monotonic() - start
            if t >= day:
                break
            due = min(total, int(total * t / day))
            while sent < due:
                sock.sendto(query(sent & 0xFFFF, random.choice(NAMES)), addr)
                sent += 1
                if sent % 64 == 0:
                    # Read the answers away now and then (not needed, but keeps buffers quiet).
                    sock.setblocking(False)
                    try:
                        while True:
                            sock.recv(512)
                    except BlockingIOError:
                        pass
                    sock.setblocking(True)
            time.sleep(0.002)
        # The last hour's flush.
        time.sleep(1.2 * HOUR)
        w1 = sectors_written()
        cpu1 = flusher_cpu_ns(gw.pid)
        stats1 = stats()
        copies = open(WORK + "/log").read().count("query log copied to") - copies0
        db = sqlite3.connect(f"file:{MNT}/queries.db?mode=ro", uri=True)
        pages, free, size, rows = (db.execute("PRAGMA page_count").fetchone()[0],
                                   db.execute("PRAGMA freelist_count").fetchone()[0],
                                   db.execute("PRAGMA page_size").fetchone()[0],
                                   db.execute("SELECT count(*) FROM queries").fetchone()[0])
        per_row = (pages - free) * size / max(rows, 1)
        q = stats1["querylog"]
        print(json.dumps({
            "queries_per_day": total,
            "sent": sent,
            "logged": q["written"] - stats0["querylog"]["written"],
            "loop_bytes_per_day": w1 - w0,
            "gateway_flash_bytes_per_day": q.get("flash_bytes_written", 0) - stats0["querylog"].get("flash_bytes_written", 0),
            "flushes_that_wrote": copies,
            "bytes_per_row": round(per_row, 1),
            "new_rows_bytes_per_day": int(per_row * sent),
            "flash_copy_bytes": pages * size,
            "rows_on_flash": rows,
            "flush_cpu_ms_per_day": round((cpu1 - cpu0) / 1e6, 1),
            "flush_cpu_us_per_query": round((cpu1 - cpu0) / 1e3 / max(sent, 1), 2),
        }))
    finally:
        gw.terminate()
        gw.wait()
        subprocess.run(["rm", "-rf", WORK])


def flusher_cpu_ns(pid):
    """CPU time of the gateway's flush thread so far (schedstat): what the
    flushes cost the router's CPU."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            if open(f"/proc/{pid}/task/{tid}/comm").read().strip() == "hydradns-flush":
                return int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except FileNotFoundError:
            continue
    return 0


def stats():
    out = subprocess.run([BIN, "stats", "-c", WORK + "/conf", "--json"], capture_output=True, text=True).stdout
    return json.loads(out)


main()
