#!/usr/bin/env python3
"""watch for weeks (issue 52, item 3): memory and run.db stay flat.

    python3 tests/clients/bench_watch_soak.py EXPERIMENT [MINUTES] [RATE] [SAMPLE_S]

One throwaway cluster, set up as `experiment judge --log postgres` sets up its
own (wal_level=logical, track_commit_timestamp=on, a Unix socket only), with a
BIGSERIAL outbox. Three psycopg writers insert one row per transaction at RATE
commits a second in all (default 300), each appending the id it committed to
`writers.csv` after its COMMIT (the writers' own account: a consumer that
delivers every row). A naive relay reads `id > highest read ORDER BY id` every
100 ms into `naive.csv` (it loses the rows that commit behind a higher id).
EXPERIMENT (a release `experiment`) watches the outbox through a slot it makes
(`--create-slot`), judging both files, for MINUTES (default 60). Every SAMPLE_S
seconds (default 60) the table gets a line: minutes, commits so far, watch's
RSS (VmRSS of /proc/PID/status), run.db's size (the file and its -wal), and
the rows of `log_truth` (watch's open rows). At the end watch is stopped
with SIGINT and its verdicts printed beside the writers' count.
"""

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import psycopg

# The throwaway cluster as the cost benchmark starts it.
from bench_log_cost import run_as_postgres, start_cluster

WRITERS = 3


def writer(url, rate, stop, counts, n, out, lock):
    """Commits `rate` rows a second, paced on the clock, each id appended after its COMMIT."""
    period, due = 1.0 / rate, time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            (ident,) = conn.execute("INSERT INTO outbox (payload) VALUES ('x') RETURNING id").fetchone()
            with lock:
                out.write(f"{ident}\n")
                out.flush()
            counts[n] += 1
            due += period
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)


def relay(url, stop, path):
    """The naive relay: every row above the highest id read, every 100 ms."""
    last = 0
    with psycopg.connect(url, autocommit=True) as conn, open(path, "a") as out:
        while not stop.wait(0.1):
            rows = conn.execute("SELECT id FROM outbox WHERE id > %s ORDER BY id", (last,)).fetchall()
            if rows:
                out.write("".join(f"{r[0]}\n" for r in rows))
                out.flush()
                last = rows[-1][0]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def db_mib(path):
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)) / 2**20


def open_rows(path):
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT count(*) FROM log_truth").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return -1


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    experiment = sys.argv[1]
    minutes = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else 300.0
    sample_s = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
    bin_dir, tmp, data, url = start_cluster("snowleak-soak-")
    run_db = os.path.join(tmp, "watch.db")
    own, naive = os.path.join(tmp, "writers.csv"), os.path.join(tmp, "naive.csv")
    watch = None
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE outbox (id BIGSERIAL PRIMARY KEY, payload text NOT NULL)")
        open(own, "w").close()
        open(naive, "w").close()
        watch = subprocess.Popen(
            [experiment, "watch", "--target", f"postgres:{url}", "--table", "outbox",
             "--slot", "soak", "--create-slot", "--delivered", f"writers={own}",
             "--delivered", f"naive={naive}", "--db", run_db],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Its banner says the slot is made: the truth starts there.
        banner = watch.stderr.readline()
        print(banner.strip(), flush=True)
        threading.Thread(target=lambda: [None for _ in watch.stderr], daemon=True).start()
        stop, lock = threading.Event(), threading.Lock()
        counts = [0] * WRITERS
        with open(own, "a") as out:
            threads = [threading.Thread(target=writer, args=(url, rate / WRITERS, stop, counts, n, out, lock))
                       for n in range(WRITERS)]
            threads.append(threading.Thread(target=relay, args=(url, stop, naive)))
            for t in threads:
                t.start()
            start = time.monotonic()
            print(f"{'minutes':>8} {'commits':>9} {'RSS MiB':>8} {'run.db MiB':>10} {'open rows':>9} "
                  f"{'load1':>6}", flush=True)
            while True:
                elapsed = time.monotonic() - start
                print(f"{elapsed / 60:8.1f} {sum(counts):9d} {rss_mib(watch.pid):8.1f} "
                      f"{db_mib(run_db):10.2f} {open_rows(run_db):9d} {os.getloadavg()[0]:6.2f}",
                      flush=True)
                if elapsed >= minutes * 60:
                    break
                time.sleep(min(sample_s, minutes * 60 - elapsed) or 0.001)
            stop.set()
            for t in threads:
                t.join()
        time.sleep(1)
        watch.send_signal(signal.SIGINT)
        out, _ = watch.communicate()
        print(f"watch exited {watch.returncode}; the writers committed {sum(counts)} rows")
        print(out.strip())
    finally:
        if watch and watch.poll() is None:
            watch.kill()
        run_as_postgres([f"{bin_dir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
