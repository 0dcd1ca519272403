#!/usr/bin/env python3
"""The `eventsourcing` library (PyPI) judged against PostgreSQL's own log:

    python3 tests/clients/run_log_eventsourcing.py target/debug/experiment target/debug/analyze [SECONDS]

(SECONDS of writes, 15 unless given.)

Runs eventsourcing_app.py (writer processes saving events to one
application's aggregates with the library's PostgreSQL persistence, and a
follower reading the application's notification log) under `experiment judge
--log postgres --table ledger_events --key notification_id`, then checks,
without the checker:

- the truth: the notification IDs the log says were inserted are exactly
  those whose save returned to a writer;
- the library's claim, on the log itself: in commit order the notification
  IDs only increase (its table lock serialises the inserting transactions),
  so a follower reading `id > last` cannot pass a row that commits later;
- the follower's losses: the committed IDs below the highest it read that
  its own output never names, computed from the truth and its file, must
  be exactly the judge's (`analyze --json`): none, and its verdict `valid`;
  the judge's and the application's exit status is 0.

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


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def keys_in(path):
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def main():
    experiment, analyze = sys.argv[1], sys.argv[2]
    seconds = sys.argv[3] if len(sys.argv) > 3 else SECONDS
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "judge.db")
        follower = os.path.join(tmp, "follower.csv")
        judged = subprocess.run(
            [experiment, "judge", "--log", "postgres", "--table", "ledger_events",
             "--key", "notification_id", "--db", db, "--drain", "1s",
             "--delivered", f"follower={follower}", "--",
             sys.executable, os.path.join(HERE, "eventsourcing_app.py"), tmp, seconds, SEED],
            capture_output=True, text=True)
        print(judged.stdout, end="")
        if judged.returncode != 0:
            fail(f"the judge exited with {judged.returncode}, not 0: {judged.stderr.strip()}")
        if "(the command exited with status 0)" not in judged.stdout:
            fail(f"the application failed: {judged.stderr.strip()[-2000:]}")
        check(tmp, analyze)
    print("the log's truth and the follower's verdict confirmed")


def check(tmp, analyze):
    """The checks above on a judged run's directory (its judge.db, the
    writers' committed-N.txt and follower.csv)."""
    db = os.path.join(tmp, "judge.db")
    follower = os.path.join(tmp, "follower.csv")
    committed = set()
    for name in os.listdir(tmp):
        if name.startswith("committed-"):
            committed |= set(keys_in(os.path.join(tmp, name)))
    in_order = [int(k) for (k,) in sqlite3.connect(db).execute(
        "SELECT key FROM log_truth WHERE op = 'insert' ORDER BY seq")]
    truth = set(in_order)
    if not truth:
        fail("the log holds no notification: the check proves nothing")
    if truth != committed:
        fail(f"the log's truth differs from the writers' saves: "
             f"{len(truth - committed)} only in the log, {len(committed - truth)} only saved")
    behind = [(a, b) for a, b in zip(in_order, in_order[1:]) if b < a]
    if behind:
        fail(f"notification {behind[0][1]} committed after {behind[0][0]}: "
             f"the table lock did not serialise the inserts")
    out = subprocess.run([analyze, db, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"analyze failed: {out.stderr.strip()}")
    report = {c["name"]: c for c in json.loads(out.stdout)["consumers"]}["follower"]
    mine = keys_in(follower)
    if len(mine) != len(set(mine)):
        fail("the follower read a notification twice")
    read, highest = set(mine), max(mine)
    lost = {k for k in truth if k < highest and k not in read}
    theirs = {int(row["key"]) for row in report["lost"]}
    if lost != theirs:
        fail(f"the judge's losses {sorted(theirs)[:10]} are not the follower's own "
             f"{sorted(lost)[:10]}")
    if lost or report["verdict"] != "valid":
        fail(f"the follower lost {len(lost)} notifications, judged {report['verdict']}")
    print(f"ok: eventsourcing follower: judged valid, {len(mine)} of {len(truth)} committed "
          f"notifications read, none lost, as its own output says; IDs in commit order")


if __name__ == "__main__":
    main()
