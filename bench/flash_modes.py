#!/usr/bin/env python3
"""Which SQLite journal mode writes least to flash for the query log's copy
(issue 46): a prototype of the flush, in Python's sqlite3, outside the
gateway. The flash copy holds 7 days of rows; one simulated day of 24 hourly
flushes each deletes the expired hour and adds the new one (DEL=0: adds
only), in one transaction; reported: the sectors the loop device under MNT
wrote that day, against the new rows' own bytes.

  bench/flash_modes.py MODE QUERIES_PER_DAY     (needs DEV=loopN MNT=/its/mount)
  MODE: full (the backup-API copy of today), delete, truncate, persist, wal,
        hybrid (delete in WAL, insert with the rollback journal)
"""
import sqlite3, os, random, sys
MNT = os.environ["MNT"]; DEV = os.environ["DEV"]
SCHEMA="""CREATE TABLE IF NOT EXISTS queries (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, client TEXT NOT NULL, name TEXT NOT NULL, qtype INTEGER NOT NULL, outcome TEXT NOT NULL, rcode INTEGER NOT NULL, upstream TEXT, list TEXT, latency_us INTEGER NOT NULL, mac TEXT, client_name TEXT);
CREATE TABLE IF NOT EXISTS totals (outcome TEXT PRIMARY KEY, count INTEGER NOT NULL);"""
random.seed(1)
names=[f"{random.choice(['www','api','cdn','img','t','s'])}.{''.join(random.choice('abcdefghijklmnop') for _ in range(random.randint(4,12)))}.{random.choice(['com','net','org','de'])}" for _ in range(3000)]
def rows(start_ms, n, span_ms):
    out=[]
    for i in range(n):
        ts=start_ms+i*span_ms//n
        o=random.choice(['cached','cached','forwarded','blocked'])
        out.append(((ts<<12)+i%4096, ts, f"192.168.1.{random.randint(2,40)}", random.choice(names), random.choice([1,1,28,65]), o, 0, '9.9.9.9:53' if o=='forwarded' else None, 'ads' if o=='blocked' else None, random.randint(50,30000), None, None))
    return out
def written():
    os.sync()
    return int(open(f"/sys/block/{DEV}/stat").read().split()[6])*512
PER_DAY=int(sys.argv[2]); mode=sys.argv[1]; DAYS=7; H=3600_000
live="/dev/shm/hydradns-flash-modes.db"
for f in [live, live+"-wal", live+"-shm"]:
    if os.path.exists(f): os.remove(f)
L=sqlite3.connect(live); L.executescript(SCHEMA); L.execute("PRAGMA journal_mode=WAL")
t0=1_700_000_000_000
per_h=PER_DAY//24
for h in range(DAYS*24):
    L.executemany("INSERT INTO queries VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows(t0+h*H, per_h, H)); 
L.commit()
flash=MNT+"/q.db"
for f in os.listdir(MNT):
    if f.startswith("q.db"): os.remove(os.path.join(MNT,f))
# seed flash with the 7 days
F=sqlite3.connect(flash, isolation_level=None)
if mode!="full":
    F.execute(f"PRAGMA journal_mode={'WAL' if mode=='wal' else ('DELETE' if mode=='hybrid' else mode)}")
    F.executescript(SCHEMA)
    F.execute("ATTACH ? AS live", (live,))
    F.execute("BEGIN"); F.execute("INSERT INTO main.queries SELECT * FROM live.queries"); F.execute("COMMIT")
    F.execute("DETACH live")
    if mode=="wal": F.execute("PRAGMA wal_checkpoint(TRUNCATE)")
F.close()
newbytes=0
w0=written()
now=t0+DAYS*24*H
for h in range(24):
    batch=rows(now+h*H, per_h, H)
    L.executemany("INSERT INTO queries VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", batch); L.commit()
    cutoff=now+(h+1)*H-DAYS*24*H
    L.execute("DELETE FROM queries WHERE id < ?", (cutoff<<12,)); L.commit()
    if mode=="full":
        tmp=flash+".tmp"
        d=sqlite3.connect(tmp); L.backup(d); d.close()
        fd=os.open(tmp,os.O_RDONLY); os.fsync(fd); os.close(fd); os.rename(tmp,flash)
        fd=os.open(MNT,os.O_RDONLY); os.fsync(fd); os.close(fd)
        continue
    F=sqlite3.connect(flash, isolation_level=None)
    if mode=="hybrid":
        F.execute("PRAGMA main.locking_mode=EXCLUSIVE")
        F.execute("PRAGMA journal_mode=WAL"); F.execute("PRAGMA synchronous=FULL")
        F.execute("BEGIN"); F.execute("DELETE FROM main.queries WHERE id < ?", (cutoff<<12,)); F.execute("COMMIT")
        F.execute("PRAGMA journal_mode=DELETE")
        F.execute("ATTACH ? AS live", (live,))
        F.execute("BEGIN")
        F.execute("INSERT INTO main.queries SELECT * FROM live.queries WHERE id > (SELECT coalesce(max(id),0) FROM main.queries)")
        F.execute("COMMIT"); F.execute("DETACH live"); F.close(); continue
    F.execute(f"PRAGMA journal_mode={'WAL' if mode=='wal' else mode}")
    F.execute("PRAGMA synchronous=" + ("NORMAL" if mode=='wal' else "FULL"))
    F.execute("ATTACH ? AS live", (live,))
    F.execute("BEGIN")
    if os.environ.get("DEL","1")=="1": F.execute("DELETE FROM main.queries WHERE id < ?", (cutoff<<12,))
    F.execute("INSERT INTO main.queries SELECT * FROM live.queries WHERE id > (SELECT coalesce(max(id),0) FROM main.queries)")
    F.execute("COMMIT")
    F.execute("DETACH live")
    if mode=="wal": F.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    F.close()
w1=written()
pc=L.execute("PRAGMA page_count").fetchone()[0]*4096
print(f"{mode:9} {PER_DAY}/day: flash writes {(w1-w0)/1e6:.2f} MB/day; live db {pc/1e6:.1f} MB; new rows/day ~{pc/DAYS/1e6:.2f} MB; ratio {(w1-w0)/(pc/DAYS):.2f}; flash file {os.path.getsize(flash)/1e6:.1f} MB")
