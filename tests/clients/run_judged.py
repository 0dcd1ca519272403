#!/usr/bin/env python3
"""Judges client programs nobody here wrote the library of, each under
`experiment judge`, and checks each verdict against an independent
computation from the truth and the client's own output, without the checker:

    python3 tests/clients/run_judged.py target/debug/experiment target/debug/analyze

A status that became visible well before the client's last request (300 ms:
the server's and the client's clocks of that instant differ by the request's
transit) and that the client never received is lost to it. The judge must
say the same: its leaks and other misses of the client, over the same
statuses, are exactly these. Exits 1 with a message on any difference.
"""

import json
import os
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MARGIN_MS = 300

# A busy timeline whose statuses become visible tens of ms after their IDs
# are taken (the mastodon profile: IDs at transaction start, visible at
# commit), with nothing remote, fetched or deleted: a loss can only be the
# cursor's doing (or a page cut off).
BUSY = ["--profile", "mastodon", "--backlog", "0s", "--set", "rate_per_s=100",
        "--set", "remote_fraction=0", "--set", "fetched_fraction=0",
        "--set", "delete_probability=0"]
# The same, quieter and without the rare slow tail: every status is visible
# within k = 2 s of its ID time, and a window of 2 s fits in one page.
CALM = ["--profile", "mastodon", "--backlog", "0s", "--set", "rate_per_s=10",
        "--set", "remote_fraction=0", "--set", "fetched_fraction=0",
        "--set", "delete_probability=0", "--set", "tail_probability=0"]

SCENARIOS = [
    # (client program, serve options, whether it must lose statuses)
    ("mastodon_since_id.py", BUSY, True),
    ("mastodon_min_id.py", BUSY, True),
    ("mastodon_k_behind.py", CALM, False),
]


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def independent_losses(db, served_path):
    received, last_sent = set(), 0
    with open(served_path) as f:
        for line in f:
            row = json.loads(line)
            last_sent = max(last_sent, row["sent"])
            received.update(row["ids"])
    truth = dict(sqlite3.connect(db).execute("SELECT id, visible_at_ms FROM truth"))
    settled = {i for i, visible in truth.items() if visible <= last_sent - MARGIN_MS}
    return {i for i in settled if i not in received}, settled


def judged_losses(analyze, db):
    out = subprocess.run([analyze, db, "--json", "--out", os.path.dirname(db)],
                         capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    lost = {leak["id"] for leak in report["leaks"] if "command" in leak["missed_by"]}
    lost |= {m["id"] for m in report["other_misses"] if m["poller"] == "command"}
    verdict = next(p["verdict"] for p in report["pollers"] if p["name"] == "command")
    return lost, verdict


def main():
    experiment, analyze = sys.argv[1], sys.argv[2]
    for script, serve, must_lose in SCENARIOS:
        with tempfile.TemporaryDirectory() as tmp:
            db, served = os.path.join(tmp, "judge.db"), os.path.join(tmp, "served.jsonl")
            run = subprocess.run(
                [experiment, "judge", *serve, "--db", db, "--",
                 sys.executable, os.path.join(HERE, script), served, "30"],
                capture_output=True, text=True, env={**os.environ, "PYTHONPATH": HERE})
            print(f"== {script}: exit {run.returncode}\n{run.stdout.strip()}")
            if run.returncode not in (0, 1):
                fail(f"{script}: experiment judge failed: {run.stderr.strip()}")
            mine, settled = independent_losses(db, served)
            theirs, verdict = judged_losses(analyze, db)
            theirs &= settled
            if mine != theirs:
                fail(f"{script}: the judge's losses {sorted(theirs)} are not the client's own {sorted(mine)}")
            if must_lose and not mine:
                fail(f"{script}: a naive cursor at 100 statuses/s lost nothing; the check proves nothing")
            if must_lose and (run.returncode != 1 or verdict != "invalid"):
                fail(f"{script}: lost {len(mine)} statuses but was judged {verdict} (exit {run.returncode})")
            if not must_lose and (mine or run.returncode != 0 or verdict != "valid"):
                fail(f"{script}: k = 2 s covers this timeline, yet {len(mine)} lost, judged {verdict}")
            print(f"ok: {script} judged {verdict}, {len(mine)} statuses lost, as its own output says")
    print("all judged clients confirmed")


if __name__ == "__main__":
    main()
