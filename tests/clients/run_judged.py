#!/usr/bin/env python3
"""Judges client programs written on libraries nobody here wrote, each under
`experiment judge`, and checks each verdict against an independent
computation from the truth and the client's own output, without the checker:

    python3 tests/clients/run_judged.py target/debug/experiment target/debug/analyze

A status that became visible well before the client's last request (300 ms:
the server's and the client's clocks of that instant differ by the request's
transit), that the client never received, and whose ID is below the highest
the client received (its cursor passed it; one above was simply not fetched
yet, as when a slow round leaves the last page full) is lost to it, unless it is
below a full first page (the README's baseline: no cursor yet). The judge must
say the same: its leaks and other misses of the client, over the same
statuses, are exactly these; and its verdict is `invalid` exactly when some
are. Exits 1 with a message on any difference.

The JavaScript client needs node and `npm ci --prefix tests/js` first;
without node it is left out, and this says so.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
JS = os.path.join(os.path.dirname(HERE), "js")
MARGIN_MS = 300
ROUNDS = "30"

# A busy timeline of PROFILE with nothing remote, fetched or deleted: a loss
# can only be the cursor's doing (or a page cut off).
def busy(profile, rate=100):
    return ["--profile", profile, "--backlog", "0s", "--set", f"rate_per_s={rate}",
            "--set", "remote_fraction=0", "--set", "fetched_fraction=0",
            "--set", "delete_probability=0"]


BUSY = busy("mastodon")
# Quieter and without the rare slow tail: every status is visible within
# k = 2 s of its ID time, and a window of 2 s fits in one page.
CALM = busy("mastodon", 10) + ["--set", "tail_probability=0"]
# Between the two: a naive cursor loses statuses, and a window of k = 1 s
# (what the second of two clients holds back) fits in one page of 40.
BETWEEN = busy("mastodon", 20) + ["--set", "tail_probability=0"]


def python(script, rounds=ROUNDS):
    return lambda out: [sys.executable, os.path.join(HERE, script), out, rounds]


def node(script):
    return lambda out: ["node", os.path.join(JS, script), out, ROUNDS]


# (what, the command given its output path, serve options, extra environment,
#  the clients to check: (poller name, output file suffix, expectation)).
# Expectations: "loses" (a naive cursor on a busy timeline; it must lose
# statuses, or the check proves nothing), "valid" (nothing lost), "judged"
# (whatever it lost, the judge must find exactly that).
SCENARIOS = [
    ("Mastodon.py, since_id = newest seen", python("mastodon_since_id.py"), BUSY, {},
     [("command", "", "loses")]),
    ("Mastodon.py, min_id = newest seen", python("mastodon_min_id.py"), BUSY, {},
     [("command", "", "loses")]),
    ("Mastodon.py, since_id held k = 2 s behind", python("mastodon_k_behind.py"), CALM, {},
     [("command", "", "valid")]),
    ("tweepy (X API v2), since_id = newest seen", python("tweepy_since_id.py"), busy("twitter"), {},
     [("command", "", "loses")]),
    ("Misskey.py, sinceId = newest seen", python("misskey_since_id.py"), busy("misskey"), {},
     [("command", "", "loses")]),
    ("discord.py, history(after = newest seen)", python("discord_after.py"), busy("discord"), {},
     [("command", "", "judged")]),
    ("masto (JavaScript), sinceId = newest seen", node("masto_since_id.mjs"), BUSY, {},
     [("command", "", "loses")]),
    ("two clients at once: naive and k behind", python("two_clients.py", "60"),
     BETWEEN + ["--client", "second=SNOWLEAK_SECOND_TOKEN"],
     {"SNOWLEAK_SECOND_TOKEN": "a-second-clients-token", "SNOWLEAK_K_MS": "1000"},
     [("command", ".command", "loses"), ("second", ".second", "valid")]),
]


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def independent_losses(db, served_path):
    received, last_sent, first = set(), 0, None
    with open(served_path) as f:
        for line in f:
            row = json.loads(line)
            first = first or row
            last_sent = max(last_sent, row["sent"])
            received.update(str(i) for i in row["ids"])
    rows = sqlite3.connect(db).execute("SELECT id, id_key, visible_at_ms FROM truth").fetchall()
    # id_key sorts like the ID in every layout (Misskey's aid is not a number).
    key = {i: k for i, k, _ in rows}
    settled = {i for i, _, visible in rows if visible <= last_sent - MARGIN_MS}
    # Above the highest ID received, the client's cursor never passed: not lost yet.
    passed = max((key[i] for i in received if i in key), default="")
    lost = {i for i in settled if i not in received and key[i] < passed}
    # The first request had no cursor: when its page was full (a status already
    # visible then, below the page, was left out), nothing below the page is owed
    # (the README's "baseline"). A client that starts slowly, on a loaded machine,
    # meets a full first page.
    page = [key[str(i)] for i in (first or {}).get("ids", []) if str(i) in key]
    if page:
        low, page_ids = min(page), {str(i) for i in first["ids"]}
        cut = any(k < low and v <= first["sent"] - MARGIN_MS and i not in page_ids
                  for i, k, v in rows)
        if cut:
            lost = {i for i in lost if key[i] >= low}
            settled = {i for i in settled if key[i] >= low}
    return lost, settled


def judged(report, name):
    # A client's poller is one a timeline it polled; each of these polls one.
    pollers = [p for p in report["pollers"] if p["client"] == name]
    if len(pollers) != 1:
        fail(f"the judge has {len(pollers)} pollers of client {name!r}, not one")
    poller = pollers[0]["name"]
    lost = {leak["id"] for leak in report["leaks"] if poller in leak["missed_by"]}
    lost |= {m["id"] for m in report["other_misses"] if m["poller"] == poller}
    return lost, pollers[0]["verdict"]


def check(what, db, served, report, name, expect):
    mine, settled = independent_losses(db, served)
    theirs, verdict = judged(report, name)
    theirs &= settled
    if mine != theirs:
        fail(f"{what}, {name}: the judge's losses {sorted(theirs)} are not the client's own {sorted(mine)}")
    if expect == "loses" and not mine:
        fail(f"{what}: a naive cursor on a busy timeline lost nothing; the check proves nothing")
    if expect == "valid" and mine:
        fail(f"{what}, {name}: k covers this timeline, yet {len(mine)} lost")
    if (verdict == "invalid") != bool(mine):
        fail(f"{what}, {name}: lost {len(mine)} statuses but was judged {verdict}")
    print(f"ok: {what}, {name}: judged {verdict}, {len(mine)} statuses lost, as its own output says")


def main():
    experiment, analyze = sys.argv[1], sys.argv[2]
    has_node = shutil.which("node") is not None
    for what, command, serve, env, clients in SCENARIOS:
        if command("x")[0] == "node" and not has_node:
            print(f"node not found: {what} is left out")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            db, served = os.path.join(tmp, "judge.db"), os.path.join(tmp, "served.jsonl")
            run = subprocess.run(
                [experiment, "judge", *serve, "--db", db, "--", *command(served)],
                capture_output=True, text=True,
                env={**os.environ, "PYTHONPATH": HERE, **env})
            print(f"== {what}: exit {run.returncode}\n{run.stdout.strip()}")
            if run.returncode not in (0, 1):
                fail(f"{what}: experiment judge failed: {run.stderr.strip()}")
            out = subprocess.run([analyze, db, "--json", "--out", tmp],
                                 capture_output=True, text=True, check=True)
            report = json.loads(out.stdout)
            names = sorted(p["client"] for p in report["pollers"])
            if names != sorted(name for name, _, _ in clients):
                fail(f"{what}: the judge saw clients {names}, not {[c[0] for c in clients]}")
            for name, suffix, expect in clients:
                check(what, db, served + suffix, report, name, expect)
            any_lost = run.returncode == 1
            if any_lost != any(p["verdict"] == "invalid" for p in report["pollers"]):
                fail(f"{what}: exit {run.returncode} does not follow the verdicts")
    print("all judged clients confirmed")


if __name__ == "__main__":
    main()
