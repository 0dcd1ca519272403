#!/usr/bin/env python3
"""Relays judged against PostgreSQL's own log:

    python3 tests/clients/run_log_relays.py target/debug/experiment target/debug/analyze

Runs outbox_app.py (six psycopg writers on a BIGSERIAL outbox holding each
transaction 0-30 ms, no lock, and three relays: naive `id > last`, gap
tracking, xmin) under `experiment judge --log postgres --table outbox`,
then checks, without the checker:

- the truth: the keys the log says were inserted are exactly those whose
  COMMIT returned to a writer;
- each relay's losses: the committed keys below the highest key it delivered
  that its own output never names, computed from the truth and its file, must
  be exactly the judge's (`analyze --json`), its verdict `invalid` exactly
  when there are some;
- the naive relay lost some (or the check proves nothing), the gap-tracking
  and xmin relays none; the judge's exit status is 1.

Exits 1 with a message on any difference.
"""

import json
import os
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SECONDS = "15"
SEED = "1"
RELAYS = ("naive", "gaps", "xmin")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def keys_in(path):
    with open(path) as f:
        return {int(line) for line in f if line.strip()}


def main():
    experiment, analyze = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "judge.db")
        delivered = []
        for name in RELAYS:
            delivered += ["--delivered", f"{name}={os.path.join(tmp, name + '.csv')}"]
        judged = subprocess.run(
            [experiment, "judge", "--log", "postgres", "--table", "outbox", "--db", db,
             "--drain", "1s", *delivered, "--",
             sys.executable, os.path.join(HERE, "outbox_app.py"), tmp, SECONDS, SEED],
            capture_output=True, text=True)
        print(judged.stdout, end="")
        if judged.returncode != 1:
            fail(f"the judge exited with {judged.returncode}, not 1: {judged.stderr.strip()}")
        committed = set()
        for name in os.listdir(tmp):
            if name.startswith("committed-"):
                committed |= keys_in(os.path.join(tmp, name))
        truth = {int(k) for (k,) in sqlite3.connect(db).execute(
            "SELECT key FROM log_truth WHERE op = 'insert'")}
        if truth != committed:
            fail(f"the log's truth differs from the writers' commits: "
                 f"{len(truth - committed)} only in the log, {len(committed - truth)} only committed")
        out = subprocess.run([analyze, db, "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            fail(f"analyze failed: {out.stderr.strip()}")
        report = {c["name"]: c for c in json.loads(out.stdout)["consumers"]}
        for name in RELAYS:
            mine = keys_in(os.path.join(tmp, name + ".csv"))
            lost = {k for k in truth if k < max(mine) and k not in mine}
            theirs = {int(lost_row["key"]) for lost_row in report[name]["lost"]}
            verdict = report[name]["verdict"]
            if lost != theirs:
                fail(f"{name}: the judge's losses {sorted(theirs)[:10]}... are not the relay's own "
                     f"{sorted(lost)[:10]}...")
            if name == "naive" and not lost:
                fail("the naive relay lost nothing; the check proves nothing")
            if name != "naive" and lost:
                fail(f"the {name} relay lost {len(lost)} rows")
            if (verdict == "invalid") != bool(lost):
                fail(f"{name}: lost {len(lost)} rows but was judged {verdict}")
            print(f"ok: psycopg relay {name}: judged {verdict}, {len(lost)} of {len(truth)} "
                  f"committed rows lost, as its own output says")
    print("the log's truth and every relay's losses confirmed")


if __name__ == "__main__":
    main()
