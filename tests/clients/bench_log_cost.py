#!/usr/bin/env python3
"""What reading the truth from PostgreSQL's log costs the writers (issue 35, item 6):

    python3 tests/clients/bench_log_cost.py [PHASE_SECONDS] [PAIRS] [HOLD_MS] [EXPERIMENT]

One throwaway cluster, set up as `experiment judge --log postgres` sets
up its own (wal_level=logical, track_commit_timestamp=on, shared_buffers=32MB,
a Unix socket only). Six psycopg writers insert one row per transaction into a
BIGSERIAL outbox, holding each transaction open 0-HOLD_MS ms (seeded; 0: no
hold, as fast as they can), without a pause, for the whole run. The run
alternates phases of PHASE_SECONDS: without a slot, then with a
`test_decoding` slot drained every 200 ms by the judge's own query
(`pg_logical_slot_get_changes(slot, NULL, 10000, 'include-xids', 'on',
'include-timestamp', 'on', 'skip-empty-xacts', 'on')`, again while a batch is
full), the slot dropped when the phase ends. Prints the commits per second of
each phase, and the ratio of the medians.

Without EXPERIMENT, the drainer is a thread here that only fetches the rows.
With EXPERIMENT (the path of the `experiment` binary), each drained phase
runs `EXPERIMENT watch --create-slot` on the outbox instead: the judge's own
reader (the same slot, query and period, every row decoded and written to a
run.db), in its own process, competing for the machine's cores as the judge
does. Commits are counted from 0.5 s after it starts (its slot made) for
PHASE_SECONDS; it ends at its --duration and drops its slot.
"""

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psycopg

WRITERS = 6
BATCH = 10000
PERIOD_S = 0.2


def pg_bin():
    for base in sorted(os.listdir("/usr/lib/postgresql"), key=int, reverse=True):
        path = os.path.join("/usr/lib/postgresql", base, "bin")
        if os.path.exists(os.path.join(path, "initdb")):
            return path
    sys.exit("no PostgreSQL in /usr/lib/postgresql/*/bin")


def run_as_postgres(args):
    if os.geteuid() == 0:
        args = ["runuser", "-u", "postgres", "--"] + args
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_cluster(prefix):
    """A throwaway cluster with logical decoding, on a Unix socket in a new
    temporary folder: (PostgreSQL's bin folder, the folder, its data, its URL)."""
    bin_dir = pg_bin()
    tmp = tempfile.mkdtemp(prefix=prefix)
    if os.geteuid() == 0:
        shutil.chown(tmp, "postgres", "postgres")
    data = os.path.join(tmp, "data")
    run_as_postgres([f"{bin_dir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"])
    options = (f"-k {tmp} -c listen_addresses='' -c track_commit_timestamp=on -c shared_buffers=32MB "
               "-c max_connections=60 -c wal_level=logical -c max_replication_slots=4 "
               "-c max_wal_senders=4")
    run_as_postgres([f"{bin_dir}/pg_ctl", "-D", data, "-o", options, "-l", f"{tmp}/log", "-w", "start"])
    return bin_dir, tmp, data, f"postgresql://postgres@/postgres?host={tmp}"


def writer(url, n, hold_ms, stop, counts):
    rng = random.Random(1000 + n)
    with psycopg.connect(url) as conn:
        while not stop.is_set():
            with conn.transaction():
                conn.execute("INSERT INTO outbox (payload) VALUES ('x')")
                if hold_ms:
                    time.sleep(rng.uniform(0, hold_ms) / 1000)
            counts[n] += 1


def drainer(url, stop):
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.wait(PERIOD_S):
            while True:
                rows = conn.execute(
                    "SELECT lsn::text, data FROM pg_logical_slot_get_changes('bench', NULL, %s, "
                    "'include-xids', 'on', 'include-timestamp', 'on', 'skip-empty-xacts', 'on')",
                    (BATCH,)).fetchall()
                if len(rows) < BATCH:
                    break


def main():
    phase_s = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    hold_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
    experiment = sys.argv[4] if len(sys.argv) > 4 else None
    bin_dir, tmp, data, url = start_cluster("snowleak-bench-")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE outbox (id BIGSERIAL PRIMARY KEY, payload text NOT NULL)")
        stop = threading.Event()
        counts = [0] * WRITERS
        writers = [threading.Thread(target=writer, args=(url, n, hold_ms, stop, counts))
                   for n in range(WRITERS)]
        for t in writers:
            t.start()
        rates = {"without": [], "drained": []}
        with psycopg.connect(url, autocommit=True) as admin:
            for _ in range(pairs):
                for mode in ("without", "drained"):
                    drain_stop, drain, watch = threading.Event(), None, None
                    if mode == "drained" and experiment:
                        watch = subprocess.Popen(
                            [experiment, "watch", "--target", f"postgres:{url}", "--table", "outbox",
                             "--slot", "bench", "--create-slot",
                             "--duration", f"{int((phase_s + 1.5) * 1000)}ms",
                             "--db", os.path.join(tmp, f"watch-{len(rates[mode])}.db")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                        time.sleep(0.5)
                    elif mode == "drained":
                        admin.execute("SELECT pg_create_logical_replication_slot('bench', 'test_decoding')")
                        drain = threading.Thread(target=drainer, args=(url, drain_stop))
                        drain.start()
                    before, start = sum(counts), time.monotonic()
                    time.sleep(phase_s)
                    rate = (sum(counts) - before) / (time.monotonic() - start)
                    rates[mode].append(rate)
                    if drain:
                        drain_stop.set()
                        drain.join()
                        admin.execute("SELECT pg_drop_replication_slot('bench')")
                    if watch:
                        _, err = watch.communicate()
                        # 0: valid (no consumer named), anything else: it failed.
                        if watch.returncode != 0:
                            sys.exit(f"experiment watch exited {watch.returncode}: {err.strip()}")
                    print(f"{mode:8} {rate:8.1f} commits/s", flush=True)
        stop.set()
        for t in writers:
            t.join()
        without, drained = statistics.median(rates["without"]), statistics.median(rates["drained"])
        print(f"median without a slot {without:.1f}/s, drained {drained:.1f}/s: "
              f"ratio {drained / without:.3f} (hold 0-{hold_ms:g} ms, {WRITERS} writers, "
              f"{pairs} pairs of {phase_s:g} s phases, drained by "
              f"{'experiment watch' if experiment else 'a fetching thread'})")
    finally:
        run_as_postgres([f"{bin_dir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
