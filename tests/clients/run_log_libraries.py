#!/usr/bin/env python3
"""Log-reading relays on published libraries, judged against the database's own log:

    python3 tests/clients/run_log_libraries.py EXPERIMENT ANALYZE [--runs N] [--seconds S] [--seed S]

Each relay of log_library_app.py (pg-logical-replication 2.5.0, as its
README shows and acknowledging a Commit at its commitLsn, and pg-listen
1.7.0 on PostgreSQL, mysql-replication 1.0.17 on MariaDB) is judged by
`experiment judge --log postgres|mariadb --table outbox` for SECONDS (15)
of writes, once without faults and once with the relay's process group
killed with SIGKILL at 5 s and 10 s and started again (`--kill-at 5s,10s`;
the writers run in a session of their own and go on). Each run is then
checked without the checker:

- the truth: the keys the log says were inserted are exactly those whose
  COMMIT returned to a writer (and, with a server restart, perhaps some
  whose connection was lost during COMMIT), and every writer finished;
- the relay's losses: the committed keys below the highest key it delivered
  that its own file never names, computed from the truth and its file, are
  exactly the judge's (`analyze --json`), and the judge's exit status is 1
  exactly when there are some; its duplicates (split at the judge's recorded
  restarts into redelivered and other) and its deliveries out of commit
  order, counted from its file, are the judge's;
- its verdict matches its promise, `invalid` exactly when it lost a row:
  pg-logical-replication, acknowledging each message only after its key is
  written, and mysql-replication, resuming from the GTID it stores after
  writing a transaction's keys, are at-least-once (`--promise
  NAME=at-least-once`), duplicates allowed. No relay loses a row without
  faults. With kills, mysql-replication and pg-logical-replication
  acknowledging a Commit at its commitLsn lose nothing;
  pg-logical-replication as its README shows may lose a transaction whose
  commit record follows the last one acknowledged (acknowledge() reports
  the Commit message's LSN + 1: docs/relays.md); pg-listen, which promises
  nothing across a restart, must lose (what is notified while no relay
  listens is gone: PostgreSQL manual, NOTIFY).

With `--runs N` each configuration runs N times (seeds SEED, SEED+1, ...),
one run at a time, and a table is printed: per library and fault setting,
the runs with a loss, lost rows median and max, duplicates after a restart,
other duplicates, deliveries out of commit order. Exits 1 with a message on
any difference (after all runs).

With `--server-restarts`, PostgreSQL's relays also run with the server
restarted (fast shutdown, then start) at 5 s and 10 s while the relay runs
on (`--restart-server-at 5s,10s`), held to the same promises.

If the judge has no `--kill-at` (`experiment judge --help`), the runs with
faults are skipped with a message.
"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "log_library_app.py")

# (relay, database, promise, expected losses with faults): what each relay here
# promises, and whether a run with kills must lose nothing ("none"), may lose
# ("may": pg-logical-replication as its README shows can, through the
# acknowledge off-by-one, docs/relays.md) or must lose ("some").
CONFIGS = (
    ("pg-logical-replication", "postgres", "at-least-once", "may"),
    ("pg-logical-replication-commit-lsn", "postgres", "at-least-once", "none"),
    ("mysql-replication", "mariadb", "at-least-once", "none"),
    ("pg-listen", "postgres", None, "some"),
)
FAULTS = (("none", []), ("kills", ["--kill-at", "5s,10s"]))
# With --server-restarts, PostgreSQL's relays also run with the server restarted under them.
SERVER_RESTARTS = ("server-restarts", ["--restart-server-at", "5s,10s"])
KILLS = 2


def keys_in(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def judge_flags(experiment):
    help_text = subprocess.run([experiment, "judge", "--help"], capture_output=True, text=True).stdout
    return "--kill-at" in help_text, "--promise" in help_text


def own_account(truth_order, lines, marks):
    """From the relay's own file: duplicates split at the restarts' line
    marks (a duplicate whose previous delivery came before a restart is
    redelivered), and first deliveries of a key committed before one
    delivered earlier (out of commit order)."""
    position = {k: i for i, k in enumerate(truth_order)}
    marks = sorted(marks)

    def life(line):
        return sum(1 for m in marks if m < line)

    last_line, latest = {}, None
    redelivered = duplicated = out_of_order = 0
    for n, key in enumerate(lines, start=1):
        if key not in position:
            continue
        if key in last_line:
            if life(last_line[key]) < life(n):
                redelivered += 1
            else:
                duplicated += 1
            last_line[key] = n
            continue
        last_line[key] = n
        if latest is not None and latest > position[key]:
            out_of_order += 1
        else:
            latest = position[key]
    return redelivered, duplicated, out_of_order


def run_once(experiment, analyze, relay, database, promise, expected, fault, fault_args, seconds, seed,
             has_promise):
    """One judged run; returns (stats, differences)."""
    differences = []

    def differ(message):
        differences.append(f"{relay} ({fault}, seed {seed}): {message}")

    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "judge.db")
        state = os.path.join(tmp, "state")
        csv = os.path.join(state, f"{relay}.csv")
        promise_args = ["--promise", f"{relay}={promise}"] if promise and has_promise else []
        judged = subprocess.run(
            [experiment, "judge", "--log", database, "--table", "outbox", "--db", db, "--drain", "1s",
             "--delivered", f"{relay}={csv}", *promise_args, *fault_args, "--",
             sys.executable, APP, relay, state, str(seconds), str(seed)],
            capture_output=True, text=True)
        print(judged.stdout, end="")
        if judged.returncode not in (0, 1):
            differ(f"the judge exited with {judged.returncode}: {judged.stderr.strip()[-500:]}")
            return None, differences
        if not os.path.exists(os.path.join(state, "writers-done")):
            log = os.path.join(state, "writers.log")
            differ("the writers did not finish: " + (open(log).read().strip()[-500:] if os.path.exists(log) else ""))
            return None, differences
        committed, uncertain = set(), set()
        for name in os.listdir(state):
            if name.startswith("committed-"):
                committed |= set(keys_in(os.path.join(state, name)))
            if name.startswith("uncertain-"):
                uncertain |= set(keys_in(os.path.join(state, name)))
        conn = sqlite3.connect(db)
        truth_order = [int(k) for (k,) in conn.execute(
            "SELECT key FROM log_truth WHERE op = 'insert' ORDER BY seq")]
        conn.close()
        truth = set(truth_order)
        # A transaction whose connection was lost during COMMIT (a server restart) may be in
        # the log or not; every other one is in it exactly when its COMMIT returned.
        if not committed <= truth <= committed | uncertain:
            differ(f"the log's truth differs from the writers' commits: {len(truth - committed - uncertain)} "
                   f"only in the log, {len(committed - truth)} only committed")
        out = subprocess.run([analyze, db, "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            differ(f"analyze failed: {out.stderr.strip()}")
            return None, differences
        report = json.loads(out.stdout)
        consumer = {c["name"]: c for c in report["consumers"]}[relay]
        restarts = report.get("restarts", [])
        marks = [r["lines"][relay] for r in restarts if relay in r.get("lines", {})]

        lines = keys_in(csv)
        mine = set(lines)
        lost = {k for k in truth if mine and k < max(mine) and k not in mine}
        theirs = {int(row["key"]) for row in consumer["lost"]}
        if lost != theirs:
            differ(f"the judge's losses {sorted(theirs)[:10]} are not the relay's own {sorted(lost)[:10]}")
        if judged.returncode != (1 if lost else 0):
            differ(f"lost {len(lost)} rows but the judge exited with {judged.returncode}")
        redelivered, duplicated, out_of_order = own_account(truth_order, lines, marks)
        counts = {
            "redelivered": consumer.get("redelivered", {}).get("count", 0),
            "duplicates": consumer["duplicates"]["count"],
            "out_of_order": consumer["out_of_order"]["count"],
        }
        if (redelivered, duplicated, out_of_order) != (counts["redelivered"], counts["duplicates"], counts["out_of_order"]):
            differ(f"its own file counts {redelivered} redelivered, {duplicated} other duplicates, "
                   f"{out_of_order} out of order; the judge {counts}")
        if fault != "none" and len(restarts) != KILLS:
            differ(f"the judge recorded {len(restarts)} restarts, not {KILLS}")

        verdict = consumer["verdict"]
        if (verdict == "invalid") != bool(lost):
            differ(f"lost {len(lost)} rows but was judged {verdict}")
        if lost and (fault == "none" or expected == "none"):
            differ(f"lost {len(lost)} rows ({fault}; promise {promise})")
        if expected == "some" and fault != "none" and not lost:
            differ(f"lost nothing across two faults ({fault}): the check proves nothing")
        if not differences:
            print(f"ok: {relay} ({fault}, seed {seed}): {verdict}, {len(lost)} of {len(truth)} committed "
                  f"rows lost, {redelivered} redelivered, {duplicated} other duplicates, {out_of_order} out "
                  f"of commit order, as its own file says")
        stats = {"committed": len(truth), "lost": len(lost), "redelivered": redelivered,
                 "duplicated": duplicated, "out_of_order": out_of_order, "verdict": verdict}
        return stats, differences


def table(results, runs):
    print()
    print(f"| library | faults | runs | runs with loss | lost rows median / max | duplicates after restart "
          f"(total, max a run) | other duplicates | out of order | committed rows median | verdicts |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (relay, fault), stats in results.items():
        if not stats:
            print(f"| {relay} | {fault} | 0 | | | | | | | |")
            continue
        lost = [s["lost"] for s in stats]
        red = [s["redelivered"] for s in stats]
        verdicts = {}
        for s in stats:
            verdicts[s["verdict"]] = verdicts.get(s["verdict"], 0) + 1
        print(f"| {relay} | {fault} | {len(stats)} | {sum(1 for x in lost if x)} | "
              f"{statistics.median(lost):g} / {max(lost)} | {sum(red)}, {max(red)} | "
              f"{sum(s['duplicated'] for s in stats)} | {sum(s['out_of_order'] for s in stats)} | "
              f"{statistics.median(s['committed'] for s in stats):g} | "
              f"{', '.join(f'{v} {n}' for v, n in sorted(verdicts.items()))} |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("experiment")
    parser.add_argument("analyze")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", help="one relay: " + ", ".join(c[0] for c in CONFIGS))
    parser.add_argument("--server-restarts", action="store_true",
                        help="also run PostgreSQL's relays with the server restarted at 5 s and 10 s")
    parser.add_argument("--faults", help="only these fault settings, comma-separated: none, kills, server-restarts")
    args = parser.parse_args()
    has_kills, has_promise = judge_flags(args.experiment)
    if not has_kills:
        print("NOTE: this judge has no --kill-at: the runs with kills are skipped")
    results, differences = {}, []
    for relay, database, promise, expected in CONFIGS:
        if args.only and relay != args.only:
            continue
        faults = FAULTS + ((SERVER_RESTARTS,) if args.server_restarts and database == "postgres" else ())
        for fault, fault_args in faults:
            if args.faults and fault not in args.faults.split(","):
                continue
            if fault_args and not has_kills:
                continue
            results[(relay, fault)] = []
            for i in range(args.runs):
                stats, diffs = run_once(args.experiment, args.analyze, relay, database, promise, expected,
                                        fault, fault_args, args.seconds, args.seed + i, has_promise)
                differences += diffs
                for d in diffs:
                    print(f"DIFFERENCE: {d}")
                if stats:
                    results[(relay, fault)].append(stats)
    if args.runs > 1:
        table(results, args.runs)
    if differences:
        print(f"FAIL: {len(differences)} differences:")
        for d in differences:
            print(f"  {d}")
        sys.exit(1)
    print("the log's truth and every relay's losses, duplicates and order confirmed; each verdict as promised")


if __name__ == "__main__":
    main()
