#!/usr/bin/env python3
"""The CPU the server spends decoding for `experiment watch`, per commit:

    python3 tests/clients/bench_slot_backend.py WINDOW_S ROUNDS HOLD_MS EXPERIMENT [EXPERIMENT...]

One throwaway cluster and six writers as in `bench_log_cost.py` (one row a
transaction into a BIGSERIAL outbox, each transaction held 0-HOLD_MS ms), for
the whole run. Each round runs `EXPERIMENT watch --create-slot` on the outbox
once for each binary given, in turn (the order reversed every other round);
3 s after one starts, the CPU time (user + system, /proc/PID/stat) of the
server process that serves its slot is read, and again WINDOW_S seconds
later, with the commits the writers made between. Prints each window's
microseconds of that process's CPU a commit, and each binary's median.

The server's CPU a commit, unlike the writers' commit rate, hardly depends
on what else the machine runs: a comparison of two readers (a consuming
one and a peeking one, say) that a loaded machine cannot give with
`bench_log_cost.py`.
"""

import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

import psycopg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_log_cost as bench  # noqa: E402


def cpu_s(pid):
    """User and system CPU time of process `pid`, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def slot_backend(admin):
    """The pid of the server process whose last query read a slot (watch's)."""
    for _ in range(100):
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE query LIKE '%%pg_logical_slot_%%' "
            "AND pid <> pg_backend_pid()").fetchone()
        if row:
            return row[0]
        time.sleep(0.1)
    sys.exit("no server process reads the slot")


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    window_s, rounds, hold_ms = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    binaries = sys.argv[4:]
    bin_dir, tmp, data, url = bench.start_cluster("snowleak-slot-cpu-")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE outbox (id BIGSERIAL PRIMARY KEY, payload text NOT NULL)")
        stop = threading.Event()
        counts = [0] * bench.WRITERS
        writers = [threading.Thread(target=bench.writer, args=(url, n, hold_ms, stop, counts))
                   for n in range(bench.WRITERS)]
        for t in writers:
            t.start()
        per_commit = {b: [] for b in binaries}
        with psycopg.connect(url, autocommit=True) as admin:
            for r in range(rounds):
                for b in (binaries if r % 2 == 0 else list(reversed(binaries))):
                    watch = subprocess.Popen(
                        [b, "watch", "--target", f"postgres:{url}", "--table", "outbox",
                         "--slot", "bench", "--create-slot",
                         "--duration", f"{int((window_s + 6) * 1000)}ms",
                         "--db", os.path.join(tmp, f"watch-{r}-{len(per_commit[b])}.db")],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    time.sleep(3)
                    pid = slot_backend(admin)
                    cpu0, n0, t0 = cpu_s(pid), sum(counts), time.monotonic()
                    time.sleep(window_s)
                    cpu1, n1, t1 = cpu_s(pid), sum(counts), time.monotonic()
                    _, err = watch.communicate()
                    if watch.returncode != 0:
                        sys.exit(f"{b} watch exited {watch.returncode}: {err.strip()}")
                    us = (cpu1 - cpu0) / max(n1 - n0, 1) * 1e6
                    per_commit[b].append(us)
                    print(f"{b}: {n1 - n0} commits in {t1 - t0:.1f} s, the slot's server "
                          f"process {cpu1 - cpu0:.2f} s of CPU: {us:.1f} us a commit", flush=True)
        stop.set()
        for t in writers:
            t.join()
        for b in binaries:
            print(f"median {statistics.median(per_commit[b]):.1f} us a commit: {b} "
                  f"({rounds} windows of {window_s:g} s, writers holding 0-{hold_ms:g} ms)")
    finally:
        bench.run_as_postgres([f"{bin_dir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
