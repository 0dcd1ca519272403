#!/usr/bin/env python3
"""What recording costs `experiment serve` (issue 33, item 5):

    python3 tests/clients/bench_record_cost.py EXPERIMENT [SECONDS] [PAIRS]

Each pair runs `EXPERIMENT serve --profile twitter --set rate_per_s=100`
twice, once alone and once with `--record` to a fresh run.db, the order
alternating from pair to pair (alone first, then recording first), and loads
each with wrk at full speed for SECONDS (default 10):
`wrk -t1 -c8 -dSECONDS -H "Authorization: Bearer t"` on Twitter v1.1's list
timeline, pages of 200. Prints each run's pages a second and each pair's
ratio (recording / alone), then the medians with a 95 % bootstrap interval of
the median (10,000 resamples of the pairs, seeded).

Every page recorded is checked: the run.db's `client_requests` rows are at
least wrk's completed requests and at most that plus wrk's 8 connections (a
request served as wrk stopped is recorded, not counted by wrk). A run that
fails this exits 1.

Needs `wrk` on the PATH. Run it on a quiet machine: wrk and the server share
the cores, and anything else running moves the figures.
"""

import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ADDR = ("127.0.0.1", 8093)
URL = f"http://{ADDR[0]}:{ADDR[1]}/1.1/lists/statuses.json?list_id=1&count=200"
CONNECTIONS = 8


def wait_for_port():
    for _ in range(500):
        try:
            socket.create_connection(ADDR, timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.02)
    sys.exit(f"the server did not listen on {ADDR[0]}:{ADDR[1]}")


def one_run(experiment, seconds, db):
    args = [experiment, "serve", "--profile", "twitter", "--set", "rate_per_s=100",
            "--addr", f"{ADDR[0]}:{ADDR[1]}"]
    if db:
        args += ["--record", db]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port()
        out = subprocess.run(
            ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "-H", "Authorization: Bearer t", URL],
            check=True, capture_output=True, text=True).stdout
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=60)
    if server.returncode != 0:
        sys.exit(f"experiment serve exited {server.returncode}: {err.strip()}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    done = int(re.search(r"(\d+) requests in", out).group(1))
    if db:
        with sqlite3.connect(db) as conn:
            recorded = conn.execute("SELECT count(*) FROM client_requests").fetchone()[0]
        if not done <= recorded <= done + CONNECTIONS:
            sys.exit(f"{recorded} pages recorded, wrk completed {done}: not every page was recorded")
    return rate


def median_interval(values, rng):
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(10000))
    return medians[249], medians[9749]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    experiment = sys.argv[1]
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    if shutil.which("wrk") is None:
        sys.exit("wrk is not on the PATH (apt-get install wrk)")
    tmp = tempfile.mkdtemp(prefix="snowleak-bench-record-")
    alone, recording, ratios = [], [], []
    try:
        for pair in range(pairs):
            order = ("alone", "record") if pair % 2 == 0 else ("record", "alone")
            rates = {}
            for mode in order:
                db = os.path.join(tmp, f"rec-{pair}.db") if mode == "record" else None
                rates[mode] = one_run(experiment, seconds, db)
            alone.append(rates["alone"])
            recording.append(rates["record"])
            ratios.append(rates["record"] / rates["alone"])
            print(f"pair {pair + 1:2} ({order[0]} first): alone {rates['alone']:8.1f}, "
                  f"recording {rates['record']:8.1f} pages/s, ratio {ratios[-1]:.3f}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rng = random.Random(33)
    for name, values in (("alone", alone), ("recording", recording), ("ratio", ratios)):
        lo, hi = median_interval(values, rng)
        print(f"{name:9} median {statistics.median(values):9.3f} (95 % interval {lo:.3f} to "
              f"{hi:.3f}; min {min(values):.3f}, max {max(values):.3f}, {len(values)} pairs)")


if __name__ == "__main__":
    main()
