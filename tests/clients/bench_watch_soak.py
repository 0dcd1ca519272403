#!/usr/bin/env python3
"""watch for weeks (issue 52, item 3): memory and run.db stay flat.

    python3 tests/clients/bench_watch_soak.py EXPERIMENT [MINUTES] [RATE] [SAMPLE_S] [LOG]

LOG is `postgres` (the default) or `mariadb`. For postgres: one throwaway
cluster, set up as `experiment judge --log postgres` sets up its own
(wal_level=logical, track_commit_timestamp=on, a Unix socket only), with a
BIGSERIAL outbox, watched through a slot watch makes (`--create-slot`). For
mariadb: one throwaway MariaDB as bench_binlog_cost.py starts it (the binary
log in ROW format, a Unix socket only), with an AUTO_INCREMENT outbox,
watched as a replica (`--server-id`). Three writers (psycopg or PyMySQL)
insert one row per transaction at RATE
commits a second in all (default 300), each appending the id it committed to
`writers.csv` after its COMMIT (the writers' own account: a consumer that
delivers every row). A naive relay reads `id > highest read ORDER BY id` every
100 ms into `naive.csv` (it loses the rows that commit behind a higher id).
EXPERIMENT (a release `experiment`) watches the outbox, judging both files,
for MINUTES (default 60). Every SAMPLE_S
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

import tempfile

import psycopg
import pymysql

# The throwaway servers as the cost benchmarks start them.
from bench_binlog_cost import await_banner, start_server as start_mariadb
from bench_log_cost import run_as_postgres, start_cluster

WRITERS = 3


class Postgres:
    """The cluster, its outbox, and how watch reads it."""

    def __init__(self):
        self.bin_dir, self.tmp, self.data, self.url = start_cluster("snowleak-soak-")
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE outbox (id BIGSERIAL PRIMARY KEY, payload text NOT NULL)")

    def watch_args(self):
        return ["--target", f"postgres:{self.url}", "--table", "outbox", "--slot", "soak",
                "--create-slot"]

    def connect(self):
        return psycopg.connect(self.url, autocommit=True)

    @staticmethod
    def insert(conn):
        return conn.execute("INSERT INTO outbox (payload) VALUES ('x') RETURNING id").fetchone()[0]

    @staticmethod
    def ids_above(conn, last):
        return [r[0] for r in conn.execute("SELECT id FROM outbox WHERE id > %s ORDER BY id", (last,))]

    def stop(self):
        run_as_postgres([f"{self.bin_dir}/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"])


class Mariadb:
    """The server, its outbox, and how watch reads it."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="snowleak-soak-")
        self.server, self.socket = start_mariadb(self.tmp)
        conn = pymysql.connect(unix_socket=self.socket, user="root", autocommit=True)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE app")
            cur.execute("CREATE TABLE app.outbox (id bigint AUTO_INCREMENT PRIMARY KEY, "
                        "payload text NOT NULL) ENGINE=InnoDB")
        conn.close()

    def watch_args(self):
        url = f"mysql://root@localhost/app?socket={self.socket}"
        return ["--target", f"mariadb:{url}", "--table", "app.outbox", "--server-id", "4243"]

    def connect(self):
        return pymysql.connect(unix_socket=self.socket, user="root", database="app", autocommit=True)

    @staticmethod
    def insert(conn):
        with conn.cursor() as cur:
            cur.execute("INSERT INTO outbox (payload) VALUES ('x')")
            return cur.lastrowid

    @staticmethod
    def ids_above(conn, last):
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM outbox WHERE id > %s ORDER BY id", (last,))
            return [r[0] for r in cur.fetchall()]

    def stop(self):
        self.server.terminate()
        self.server.wait()


def writer(db, rate, stop, counts, n, out, lock):
    """Commits `rate` rows a second, paced on the clock, each id appended after its COMMIT."""
    period, due = 1.0 / rate, time.monotonic()
    conn = db.connect()
    with conn:
        while not stop.is_set():
            ident = db.insert(conn)
            with lock:
                out.write(f"{ident}\n")
                out.flush()
            counts[n] += 1
            due += period
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)


def relay(db, stop, path):
    """The naive relay: every row above the highest id read, every 100 ms."""
    last = 0
    conn = db.connect()
    with conn, open(path, "a") as out:
        while not stop.wait(0.1):
            ids = db.ids_above(conn, last)
            if ids:
                out.write("".join(f"{i}\n" for i in ids))
                out.flush()
                last = ids[-1]


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
    log = sys.argv[5] if len(sys.argv) > 5 else "postgres"
    if log not in ("postgres", "mariadb"):
        sys.exit(f"LOG is postgres or mariadb, not {log}")
    db = Postgres() if log == "postgres" else Mariadb()
    tmp = db.tmp
    run_db = os.path.join(tmp, "watch.db")
    own, naive = os.path.join(tmp, "writers.csv"), os.path.join(tmp, "naive.csv")
    watch = None
    try:
        open(own, "w").close()
        open(naive, "w").close()
        watch = subprocess.Popen(
            [experiment, "watch"] + db.watch_args()
            + ["--delivered", f"writers={own}", "--delivered", f"naive={naive}", "--db", run_db],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Its banner says where the truth starts (the slot made, the dump read).
        print("".join(await_banner(watch)).strip(), flush=True)
        threading.Thread(target=lambda: [None for _ in watch.stderr], daemon=True).start()
        stop, lock = threading.Event(), threading.Lock()
        counts = [0] * WRITERS
        with open(own, "a") as out:
            threads = [threading.Thread(target=writer, args=(db, rate / WRITERS, stop, counts, n, out, lock))
                       for n in range(WRITERS)]
            threads.append(threading.Thread(target=relay, args=(db, stop, naive)))
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
        db.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
