#!/usr/bin/env python3
"""What reading the truth from MariaDB's binary log costs the writers (issue 50, item 5):

    python3 tests/clients/bench_binlog_cost.py EXPERIMENT [PHASE_SECONDS] [PAIRS] [HOLD_MS]

The MariaDB counterpart of bench_log_cost.py (PostgreSQL's slot). One
throwaway MariaDB, started as `experiment judge --log mariadb` starts its
own (mariadb-install-db into a fresh temporary directory; mariadbd on a Unix
socket only, durable commits, `--log-bin=binlog --server-id=1
--binlog-format=ROW --binlog-row-image=FULL --binlog-row-metadata=FULL`).
Six PyMySQL writers, each a process of its own (PyMySQL is pure Python:
threads would share one core through the GIL), insert one row per
transaction into an AUTO_INCREMENT outbox, holding each transaction open
0-HOLD_MS ms (seeded; 0: no hold, as fast as they can), without a pause, for
the whole run. The binary log is on in every phase (the server is the
judge's); what a phase adds is its reader.

The run alternates phases of PHASE_SECONDS, "without" a reader and "with"
`EXPERIMENT watch --target mariadb:URL --table app.outbox --server-id 4243`
(the judge's own reader: registered as a replica, the binlog read in
rounds a second apart and stamped every 10 ms, every event decoded, the truth
written to a run.db, in its own process, competing for the machine's cores
as the judge does). A pair is
one phase of each, in ABBA order over the pairs (without-with, with-without,
...), so that a drift of the machine's speed over the run weighs on both.
Commits are counted from the moment watch prints its banner (its dump
started) for PHASE_SECONDS; watch ends at its --duration, PHASE_SECONDS +
1.5 s after it starts, and each with-phase checks that its run.db holds at
least a truth row per commit of the phase.

Prints each phase's commits per second, then the ratio of the medians
(with / without) with a bootstrap 95 % interval (the pairs resampled, 10,000
times, seeded), the median of the pairs' ratios, the number of pairs, the
load average at the start and the end, the reader's CPU (its user and
system time over its run, from wait4, as a share of one core), and the
command.
"""

import multiprocessing as mp
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

import pymysql

WRITERS = 6
SERVER_OPTIONS = [
    "--log-bin=binlog", "--server-id=1", "--binlog-format=ROW",
    "--binlog-row-image=FULL", "--binlog-row-metadata=FULL",
]
READER_ID = "4243"


def find(name, dirs=("/usr/sbin", "/usr/bin")):
    for d in os.environ.get("PATH", "").split(os.pathsep) + list(dirs):
        path = os.path.join(d, name)
        if os.path.isfile(path):
            return path
    sys.exit(f"cannot find {name}: install MariaDB (Debian: apt-get install mariadb-server)")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def start_server(tmp):
    data, socket = os.path.join(tmp, "data"), os.path.join(tmp, "mariadbd.sock")
    scratch = os.path.join(tmp, "tmp")
    os.mkdir(scratch)
    root = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run([find("mariadb-install-db"), "--no-defaults", f"--datadir={data}",
                    f"--tmpdir={scratch}", "--auth-root-authentication-method=normal",
                    "--skip-test-db"] + root,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = subprocess.Popen(
        [find("mariadbd"), "--no-defaults", f"--datadir={data}", f"--tmpdir={scratch}",
         f"--socket={socket}", f"--pid-file={tmp}/mariadbd.pid", f"--log-error={tmp}/server.log",
         "--skip-networking", "--innodb-flush-log-at-trx-commit=1",
         "--innodb-buffer-pool-size=64M", "--max-connections=100"] + SERVER_OPTIONS + root,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            pymysql.connect(unix_socket=socket, user="root").close()
            return server, socket
        except pymysql.err.OperationalError:
            if server.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"mariadbd did not start: see {tmp}/server.log")
            time.sleep(0.05)  # a poll: each round connects afresh


def writer(socket, n, hold_ms, stop, counts):
    rng = random.Random(1000 + n)
    conn = pymysql.connect(unix_socket=socket, user="root", database="app", autocommit=False)
    with conn.cursor() as cur:
        while not stop.is_set():
            cur.execute("INSERT INTO outbox (payload) VALUES ('x')")
            if hold_ms:
                time.sleep(rng.uniform(0, hold_ms) / 1000)
            conn.commit()
            with counts.get_lock():
                counts[n] += 1
    conn.close()


def total(counts):
    with counts.get_lock():
        return sum(counts)


def await_banner(watch):
    """Reads watch's stderr up to its banner ("watching ...": the truth
    starts there); returns the lines read, or exits with them if watch ended first."""
    seen = []
    for line in watch.stderr:
        seen.append(line)
        if line.startswith("watching "):
            return seen
    watch.wait()
    sys.exit(f"experiment watch ended before it watched: {''.join(seen).strip()}")


def with_reader(experiment, socket, db, phase_s, counts):
    """One phase with `experiment watch`: its commits per second and the
    reader's CPU seconds; checks the truth rows it recorded."""
    url = f"mysql://root@localhost/app?socket={socket}"
    watch = subprocess.Popen(
        [experiment, "watch", "--target", f"mariadb:{url}", "--table", "app.outbox",
         "--server-id", READER_ID, "--duration", f"{int((phase_s + 1.5) * 1000)}ms", "--db", db,
         # Every row stays in log_truth (counted below): none settles within the phase.
         "--settle-after", "1h"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    await_banner(watch)
    before, start = total(counts), time.monotonic()
    time.sleep(phase_s)
    phase_commits = total(counts) - before
    rate = phase_commits / (time.monotonic() - start)
    err = watch.stderr.read()
    # wait4: the reader's own CPU time (user + system) over its run.
    _, status, usage = os.wait4(watch.pid, 0)
    watch.returncode = os.waitstatus_to_exitcode(status)
    cpu_s = usage.ru_utime + usage.ru_stime
    # 0: no consumer named, nothing owed; anything else: it failed.
    if watch.returncode != 0:
        sys.exit(f"experiment watch exited {watch.returncode}: {err.strip()}")
    # Watch read from before the banner to 1.5 s after the phase: every
    # commit of the phase is in its truth (the writers go on after it ends,
    # so later commits are not owed).
    rows = sqlite3.connect(db).execute("SELECT count(*) FROM log_truth").fetchone()[0]
    if rows < phase_commits:
        sys.exit(f"experiment watch recorded {rows} rows of the phase's {phase_commits} commits")
    return rate, cpu_s


def bootstrap(without, with_, rounds=10000, seed=1):
    rng = random.Random(seed)
    n = len(without)
    ratios = []
    for _ in range(rounds):
        pick = [rng.randrange(n) for _ in range(n)]
        ratios.append(statistics.median(with_[i] for i in pick)
                      / statistics.median(without[i] for i in pick))
    ratios.sort()
    return ratios[int(0.025 * rounds)], ratios[int(0.975 * rounds) - 1]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: bench_binlog_cost.py EXPERIMENT [PHASE_SECONDS] [PAIRS] [HOLD_MS]")
    experiment = sys.argv[1]
    if not os.access(experiment, os.X_OK):
        sys.exit(f"cannot run {experiment}: build it (cargo build --release --bin experiment)")
    phase_s = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    hold_ms = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    load_start = loadavg()
    tmp = tempfile.mkdtemp(prefix="snowleak-bench-binlog-")
    server = None
    procs = []
    stop = mp.Event()
    try:
        server, socket = start_server(tmp)
        conn = pymysql.connect(unix_socket=socket, user="root", autocommit=True)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE app")
            cur.execute("CREATE TABLE app.outbox (id bigint AUTO_INCREMENT PRIMARY KEY, "
                        "payload text NOT NULL) ENGINE=InnoDB")
        conn.close()
        counts = mp.Array("q", WRITERS)
        procs = [mp.Process(target=writer, args=(socket, n, hold_ms, stop, counts))
                 for n in range(WRITERS)]
        for p in procs:
            p.start()
        rates = {"without": [], "with": []}
        cpu = []
        for pair in range(pairs):
            order = ("without", "with") if pair % 2 == 0 else ("with", "without")
            for mode in order:
                if mode == "with":
                    db = os.path.join(tmp, f"watch-{pair}.db")
                    rate, cpu_s = with_reader(experiment, socket, db, phase_s, counts)
                    cpu.append(cpu_s / (phase_s + 1.5))
                else:
                    before, start = total(counts), time.monotonic()
                    time.sleep(phase_s)
                    rate = (total(counts) - before) / (time.monotonic() - start)
                rates[mode].append(rate)
                print(f"pair {pair + 1:2} {mode:8} {rate:8.1f} commits/s", flush=True)
        stop.set()
        for p in procs:
            p.join()
        procs = []
        without, with_ = rates["without"], rates["with"]
        ratio = statistics.median(with_) / statistics.median(without)
        low, high = bootstrap(without, with_)
        pair_ratios = sorted(w / o for w, o in zip(with_, without))
        print(f"median without a reader {statistics.median(without):.1f}/s, with experiment watch "
              f"{statistics.median(with_):.1f}/s: ratio of medians {ratio:.3f}, bootstrap 95 % "
              f"interval {low:.3f} to {high:.3f}; median of the pairs' ratios "
              f"{statistics.median(pair_ratios):.3f} (pairs {pair_ratios[0]:.2f} to "
              f"{pair_ratios[-1]:.2f}); {pairs} pairs of {phase_s:g} s phases, ABBA, {WRITERS} "
              f"writers, hold 0-{hold_ms:g} ms; load average {load_start} at the start, "
              f"{loadavg()} at the end; the reader's CPU, median over its runs: "
              f"{statistics.median(cpu):.2f} of a core")
        print("command: python3 " + " ".join(sys.argv))
    finally:
        stop.set()
        for p in procs:
            p.terminate()
            p.join()
        if server is not None:
            server.kill()
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
