#!/usr/bin/env python3
"""Consumers the server cannot see, judged from what they delivered:

    python3 tests/clients/run_delivered.py target/debug/experiment target/debug/analyze

Starts `experiment serve --backend postgres --record`, reads the read-only
connection string it prints, runs two psycopg relays on the table for a
while (psycopg_relay.py: a naive `id > newest` cursor and one held 1 s
behind), stops the server, and judges both with `analyze --delivered`.
Then checks each verdict against an independent computation from the
truth and the relay's own output, without the checker: a row committed
(visible) well before the relay's last query, at or below the highest ID it
delivered, and never delivered, is lost to it. The judge's losses over the
same rows must be exactly these, its verdict `invalid` exactly when some
are; the naive relay must lose some (or the check proves nothing) and the
one held behind none. Exits 1 with a message on any difference.
"""

import csv
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SECONDS = "20"
MARGIN_MS = 300


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def reader_url(server):
    """The read-only connection string from the server's banner."""
    for line in server.stdout:
        if line.strip().startswith("read-only SQL"):
            return line.split()[2]
    fail("the server printed no read-only connection string")


def delivered_ids(path):
    with open(path) as f:
        return {row["id"] for row in csv.DictReader(f)}


def independent_losses(db, delivered_path, queries_path):
    delivered = delivered_ids(delivered_path)
    with open(queries_path) as f:
        last_sent = max(json.loads(line)["sent"] for line in f)
    highest = max(int(i) for i in delivered)
    truth = sqlite3.connect(db).execute("SELECT id, visible_at_ms FROM truth").fetchall()
    settled = {i for i, visible in truth if visible <= last_sent - MARGIN_MS and int(i) <= highest}
    return {i for i in settled if i not in delivered}, settled


def main():
    experiment, analyze = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "relay.db")
        server = subprocess.Popen(
            [experiment, "serve", "--backend", "postgres", "--record", db,
             "--addr", f"127.0.0.1:{free_port()}"],
            stdout=subprocess.PIPE, text=True)
        try:
            url = reader_url(server)
            relays = {
                mode: subprocess.Popen(
                    [sys.executable, os.path.join(HERE, "psycopg_relay.py"), url, mode,
                     os.path.join(tmp, f"{mode}.csv"), os.path.join(tmp, f"{mode}.jsonl"),
                     SECONDS])
                for mode in ("naive", "behind")
            }
            for mode, relay in relays.items():
                if relay.wait() != 0:
                    fail(f"the {mode} relay failed")
        finally:
            server.send_signal(signal.SIGINT)
            server.wait()
        if server.returncode != 0:
            fail(f"the server exited with {server.returncode}")
        out = subprocess.run(
            [analyze, db, "--json", "--out", tmp,
             "--delivered", f"naive={tmp}/naive.csv", "--delivered", f"behind={tmp}/behind.csv"],
            capture_output=True, text=True)
        if out.returncode != 0:
            fail(f"analyze failed: {out.stderr.strip()}")
        report = json.loads(out.stdout)
        for mode in ("naive", "behind"):
            mine, settled = independent_losses(
                db, os.path.join(tmp, f"{mode}.csv"), os.path.join(tmp, f"{mode}.jsonl"))
            theirs = {leak["id"] for leak in report["leaks"] if mode in leak["missed_by"]}
            theirs |= {m["id"] for m in report["other_misses"] if m["poller"] == mode}
            theirs &= settled
            verdict = next(p["verdict"] for p in report["pollers"] if p["name"] == mode)
            if mine != theirs:
                fail(f"{mode}: the judge's losses {sorted(theirs)} are not the relay's own {sorted(mine)}")
            if mode == "naive" and not mine:
                fail("the naive relay lost nothing; the check proves nothing")
            if mode == "behind" and mine:
                fail(f"the relay held 1 s behind lost {len(mine)} rows")
            if (verdict == "invalid") != bool(mine):
                fail(f"{mode}: lost {len(mine)} rows but was judged {verdict}")
            print(f"ok: psycopg relay, {mode}: judged {verdict}, {len(mine)} rows lost "
                  f"of {len(settled)}, as its own output says")
    print("both delivered lists confirmed")


if __name__ == "__main__":
    main()
