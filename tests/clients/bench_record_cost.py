#!/usr/bin/env python3
"""What recording costs `experiment serve` (issue 33, item 5):

    python3 tests/clients/bench_record_cost.py [--control] [--swap] EXPERIMENT [SECONDS] [ROUNDS]

Starts two servers side by side, `EXPERIMENT serve --profile twitter --set
rate_per_s=100` alone and the same with `--record` to a fresh run.db, and
loads them in turn with wrk at full speed, never both at once: bursts of
SECONDS (default 10) of `wrk -t1 -c8 -dSECONDS -H "Authorization: Bearer t"`
on Twitter v1.1's list timeline, pages of 200. A round is four bursts, in the
order alone, recording, recording, alone (the next round the other way
round), so that a drift of the machine within a round falls on both alike;
after each burst the script waits 2 seconds, so that what a burst left to
do (the recorder commits at least once a second, then the checkpoints) is
done before the next burst is measured. That work, at most the last second
of a burst's commits and checkpoints, is then measured in no burst: a bias
in recording's favour, smaller the longer the bursts. One warm-up burst on
each server is not counted. Each round's ratio is the recording server's pages over the
alone server's; prints each round, then the medians with a 95 % bootstrap
interval of the median (10,000 resamples of the rounds, seeded).

Why side by side: from one 10 s run to the next the machine's speed moves by
up to a quarter, in phases that last minutes (docs/benchmarks.md); two
servers measured in the same few seconds share the phase.

With `--control` the second server does not record either: two equal
servers, whose ratio should be 1 within its interval, so that a bias of the
method itself (the second port, the order of the bursts) would show. With
`--swap` the recording server is started first, on the first port (8093),
and the alone server second, on 8094.

Every page recorded is checked: the run.db's `client_requests` rows are at
least wrk's completed requests on the recording server and at most that plus
wrk's 8 connections a burst (a request served as wrk stopped is recorded,
not counted by wrk). A run that fails this exits 1.

Needs `wrk` on the PATH. Run it on a quiet machine: wrk and the servers
share the cores, and anything else running moves the figures.
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

HOST = "127.0.0.1"
FIRST_PORT, SECOND_PORT = 8093, 8094
PATH = "/1.1/lists/statuses.json?list_id=1&count=200"
CONNECTIONS = 8
GAP_SECONDS = 2


def start(experiment, port, db, log):
    # serve's default rate limit (a million requests in 5 minutes) is beyond
    # any poller but not beyond wrk over a whole run: lifted, so that every
    # page counted is a page of 200, never a short 429.
    args = [experiment, "serve", "--profile", "twitter", "--set", "rate_per_s=100",
            "--rate-limit", "4000000000/1s", "--addr", f"{HOST}:{port}"]
    if db:
        args += ["--record", db]
    # Its log goes to a file: a pipe nobody reads would stop a server kept up
    # for minutes once it filled.
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(500):
        try:
            socket.create_connection((HOST, port), timeout=0.1).close()
            return server
        except OSError:
            time.sleep(0.02)
    server.kill()
    sys.exit(f"the server did not listen on {HOST}:{port}")


def stop(server, log):
    server.send_signal(signal.SIGINT)
    server.wait(timeout=120)
    if server.returncode != 0:
        log.seek(0)
        sys.exit(f"experiment serve exited {server.returncode}: {log.read().decode().strip()}")


def burst(port, seconds):
    """wrk's completed requests in one burst."""
    out = subprocess.run(
        ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "-H", "Authorization: Bearer t",
         f"http://{HOST}:{port}{PATH}"],
        check=True, capture_output=True, text=True).stdout
    time.sleep(GAP_SECONDS)
    failed = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if failed:
        sys.exit(f"{failed.group(1)} responses on port {port} were not pages: {out.strip()}")
    return int(re.search(r"(\d+) requests in", out).group(1))


def median_interval(values, rng):
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(10000))
    return medians[249], medians[9749]


def main():
    args = sys.argv[1:]
    control = "--control" in args
    swap = "--swap" in args
    args = [a for a in args if a not in ("--control", "--swap")]
    if not args:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    experiment = args[0]
    seconds = int(args[1]) if len(args) > 1 else 10
    rounds = int(args[2]) if len(args) > 2 else 20
    if not (os.path.isfile(experiment) and os.access(experiment, os.X_OK)):
        sys.exit(f"{experiment}: no such program (build it: cargo build --release -p experiment)")
    if shutil.which("wrk") is None:
        sys.exit("wrk is not on the PATH (apt-get install wrk)")
    tmp = tempfile.mkdtemp(prefix="snowleak-bench-record-")
    db = os.path.join(tmp, "rec.db")
    ports = {"alone": FIRST_PORT, "record": SECOND_PORT}
    if swap:
        ports = {"alone": SECOND_PORT, "record": FIRST_PORT}
    logs = {mode: open(os.path.join(tmp, f"{mode}.log"), "w+b") for mode in ports}
    servers = {}
    alone, recording, ratios = [], [], []
    second = "second" if control else "recording"
    recorded_bursts, completed = 0, 0
    try:
        for mode in sorted(ports, key=ports.get):
            recorded_db = db if mode == "record" and not control else None
            servers[mode] = start(experiment, ports[mode], recorded_db, logs[mode])
        # Warm-up, not counted but for the pages recorded.
        burst(ports["alone"], seconds)
        completed += burst(ports["record"], seconds)
        recorded_bursts += 1
        for r in range(rounds):
            order = (("alone", "record", "record", "alone") if r % 2 == 0
                     else ("record", "alone", "alone", "record"))
            pages = {"alone": 0, "record": 0}
            for mode in order:
                pages[mode] += burst(ports[mode], seconds)
            completed += pages["record"]
            recorded_bursts += 2
            alone.append(pages["alone"] / (2 * seconds))
            recording.append(pages["record"] / (2 * seconds))
            ratios.append(pages["record"] / pages["alone"])
            first = "alone" if order[0] == "alone" else second
            print(f"round {r + 1:2} ({first} first): alone {alone[-1]:8.1f}, "
                  f"{second} {recording[-1]:8.1f} pages/s, ratio {ratios[-1]:.3f}", flush=True)
        for mode, server in servers.items():
            stop(server, logs[mode])
        if control:
            print("control: the second server did not record")
            return summary(alone, recording, ratios, second)
        with sqlite3.connect(db) as conn:
            recorded = conn.execute("SELECT count(*) FROM client_requests").fetchone()[0]
        if not completed <= recorded <= completed + CONNECTIONS * recorded_bursts:
            sys.exit(f"{recorded} pages recorded, wrk completed {completed}: "
                     "not every page was recorded")
        print(f"every page recorded: {recorded} rows for wrk's {completed} completed requests "
              f"in {recorded_bursts} bursts")
    finally:
        for server in servers.values():
            if server.poll() is None:
                server.kill()
        for log in logs.values():
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    summary(alone, recording, ratios, second)


def summary(alone, recording, ratios, second):
    rng = random.Random(33)
    for name, values in (("alone", alone), (second, recording), ("ratio", ratios)):
        lo, hi = median_interval(values, rng)
        print(f"{name:9} median {statistics.median(values):9.3f} (95 % interval {lo:.3f} to "
              f"{hi:.3f}; min {min(values):.3f}, max {max(values):.3f}, {len(values)} rounds)")


if __name__ == "__main__":
    main()
