#!/usr/bin/env python3
"""Judges published polling programs, installed from PyPI at pinned versions,
each under `experiment judge`, and checks each verdict against what the
program itself stored and the truth, without the checker:

    python3 tests/clients/published/run_published.py EXPERIMENT ANALYZE
        [--seconds 45] [--timeline busy|profile] [--venvs DIR] [--keep DIR]
        [PROGRAM ...]

Each program (programs.py; by default those that install quickly and run
unmodified) is installed into its own virtual environment (under a temporary
folder, or DIR with --venvs, reused when there), pointed at the judge's server
by its own configuration or sitecustomize.py, and run as a user runs it
(launch.py) for --seconds. `--timeline busy` (the default) is a busy timeline
with nothing remote, fetched or deleted, so that a loss can only be the
cursor's doing, where statuses become visible slowly (median 300 ms), so
that a naive cursor loses some within a minute; `--timeline profile`
is the profile as it is (the ten-minute runs of docs/clients.md).

Each of the program's pollers (one a timeline it polls, `command home`) is
checked against what the program stored of that timeline. A status the
poller's endpoint serves (the scope the server recorded for its requests), visible well before the program's last request (GRACE_MS, so that
its last poll, cut by the stop, does not count), not deleted, below the newest
ID the program stored (it had got past it), and not among the IDs it stored,
is lost to it. The judge must say the same: its
leaks and other misses of the program, over the same statuses, are exactly
these, and it judges the program `invalid` when there are some. Exits 1 on
any difference, and when no program lost anything on the busy timeline (the
check would prove nothing).
"""

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import programs  # noqa: E402

# The programs CI runs: each installs in under a minute and runs unmodified.
QUICK = ["kabi-discord-cli", "masto-mailo-inator", "toot", "twarc2", "twarc-v1", "twitter-to-sqlite"]
# Statuses visible this long before the last request are settled: a program
# polls at least every few seconds, so each was served by an earlier poll
# whose output the program stored before the stop.
GRACE_MS = 10_000
MARGIN_MS = 300


def busy(profile, rate):
    # Statuses take longer to become visible after their ID is taken than in
    # the profiles (median 300 ms, against 20 to 40 ms): a cursor at the
    # newest ID seen then skips some within a minute.
    return ["--profile", profile, "--backlog", "0s", "--set", f"rate_per_s={rate}",
            "--set", "delay_median_ms=300", "--set", "remote_fraction=0",
            "--set", "fetched_fraction=0", "--set", "delete_probability=0"]


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def install(name, prog, venvs):
    venv = os.path.join(venvs, name)
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        pins = os.path.join(HERE, "pins", f"{prog.name}.txt")
        extra = getattr(prog, "extra", [])
        run = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "-r", pins, *extra], capture_output=True, text=True)
        if run.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            fail(f"{name}: pip install failed: {run.stderr.strip()[-2000:]}")
    return venv


def observed(con, request_id):
    """The IDs a request was served: its page stored as one value
    (`client_requests.served`: rundb::pages, a recorded client's page), or
    else its rows of `observations`."""
    row = con.execute("SELECT served FROM client_requests WHERE request_id = ?",
                      (request_id,)).fetchone()
    if row is None or row[0] is None:
        return [i for (i,) in con.execute(
            "SELECT status_id FROM observations WHERE request_id = ?", (request_id,))]
    data, ids, previous, at = bytes(row[0]), [], 0, 1

    def varint():
        nonlocal at
        value, shift = 0, 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while at < len(data):
        if data[0] == 1:  # pages::DECIMAL: zigzag differences of u64s
            zigzag = varint()
            previous = (previous + ((zigzag >> 1) ^ -(zigzag & 1))) % (1 << 64)
            ids.append(str(previous))
        else:  # pages::TEXT: each ID's length, then its bytes
            length = varint()
            ids.append(data[at:at + length].decode())
            at += length
    return ids


def owed(db, poller, newest):
    """The statuses the poller's endpoint serves (the scopes the server
    recorded for its requests; a poller is one timeline of a client),
    settled before its last request, not deleted, below NEWEST (the newest
    ID it stored: above it, it had not got there, which no output can tell
    from losing), and not the backlog it started from (below a full first
    page, visible when it was sent)."""
    con = sqlite3.connect(db)
    mine = "r.poller_id IN (SELECT id FROM pollers WHERE name = ?)"
    scopes = {s for (s,) in con.execute(
        "SELECT DISTINCT c.scope FROM client_requests c JOIN requests r ON r.id = c.request_id "
        f"WHERE {mine}", (poller,))}
    requests = con.execute(
        "SELECT r.id, r.sent_at_ms, r.items, r.page_limit FROM requests r "
        f"JOIN client_requests c ON c.request_id = r.id WHERE {mine} ORDER BY r.sent_at_ms",
        (poller,)).fetchall()
    if not requests:
        fail(f"{poller}: the server recorded no timeline request")
    first, first_sent, items, limit = requests[0]
    last = requests[-1][1]
    backlog_below = None
    if items >= limit:
        backlog_below = min(int(i) for i in observed(con, first))
    authors, everything, local = set(), False, False
    for scope in scopes:
        if scope == "all":
            everything = True
        elif scope == "local":
            local = True
        elif scope.startswith("authors:"):
            authors |= {int(a) for a in scope[len("authors:"):].split(",") if a}
        elif scope != "none":
            fail(f"{poller}: scope {scope!r} is not one this check knows")
    rows = con.execute(
        "SELECT t.id, t.visible_at_ms, t.deleted_at_ms, t.origin, a.author FROM truth t "
        "LEFT JOIN truth_authors a ON a.run_id = t.run_id AND a.id = t.id")
    settled = set()
    for sid, visible, deleted, origin, author in rows:
        if deleted is not None or visible > last - GRACE_MS - MARGIN_MS or int(sid) >= newest:
            continue
        if backlog_below is not None and int(sid) < backlog_below and visible <= first_sent:
            continue
        if everything or (local and origin == "local") or author in authors:
            settled.add(sid)
    return settled


def pollers_of(report, client):
    """The names of the client's pollers: one a timeline it polled
    (`CLIENT home`, `CLIENT tag:NAME`), each carrying its client."""
    names = sorted(p["name"] for p in report["pollers"] if p.get("client") == client)
    if not names:
        fail(f"the judge has no poller of {client!r}: {[p['name'] for p in report['pollers']]}")
    return names


def judged(report, poller):
    """The judge's losses, verdict and largest required k for one poller."""
    lost = {leak["id"] for leak in report["leaks"] if poller in leak["missed_by"]}
    lost |= {m["id"] for m in report["other_misses"] if m["poller"] == poller}
    verdict = next(p["verdict"] for p in report["pollers"] if p["name"] == poller)
    ks = [leak.get("required_k_ms") for leak in report["leaks"] if poller in leak["missed_by"]]
    k = max((k for k in ks if k is not None), default=None)
    return lost, verdict, k


def judge_one(name, args, venvs, tmp):
    prog = programs.program(name, "", "")
    venv = install(name, prog, venvs)
    out = os.path.join(tmp, name)
    os.makedirs(out, exist_ok=True)
    db = os.path.join(out, "judge.db")
    timeline = busy(prog.profile, prog.rate) if args.timeline == "busy" else ["--profile", prog.profile]
    command = [sys.executable, os.path.join(HERE, "launch.py"), name, venv, out, str(args.seconds)]
    serve = [*timeline, *prog.serve, "--addr", "127.0.0.1:0", "--db", db,
             "--duration", f"{args.seconds + 60}s"]
    print(f"== {name}: experiment judge {' '.join(serve)} -- {' '.join(command[1:])}", flush=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([args.experiment, "judge", *serve, "--", *command],
                         capture_output=True, text=True, env=env)
    print("\n".join(run.stdout.strip().splitlines()[-6:]))
    if run.returncode not in (0, 1):
        fail(f"{name}: experiment judge exited {run.returncode}: {run.stderr.strip()[-3000:]}")
    report = json.loads(subprocess.run([args.analyze, db, "--json", "--out", out],
                                       capture_output=True, text=True, check=True).stdout)
    timelines = programs.program(name, venv, out).own_timelines()
    lost_in_all, verdicts = 0, set()
    for poller in pollers_of(report, "command"):
        label = poller[len("command "):]
        own = timelines.get(label, timelines.get(programs.ANY))
        if own is None:
            fail(f"{name}: the judge has a poller {poller!r} the program keeps no output of")
        if not own:
            fail(f"{name}: the program stored nothing of {poller!r}")
        settled = owed(db, poller, max(int(i) for i in own))
        mine = settled - own
        theirs, verdict, k = judged(report, poller)
        verdicts.add(verdict)
        if (theirs & settled) != mine:
            fail(f"{name}, {poller}: the judge's losses {sorted(theirs & settled)} are not those "
                 f"its own output gives {sorted(mine)}")
        if mine and verdict != "invalid":
            fail(f"{name}, {poller}: lost {len(mine)} statuses but was judged {verdict}")
        if verdict == "invalid" and not theirs:
            fail(f"{name}, {poller}: judged invalid with no status lost")
        later = len(theirs - settled)
        print(f"ok: {name}, {poller}: judged {verdict}, {len(mine)} of {len(settled)} settled "
              f"statuses lost, as its own output ({len(own)} stored) says"
              + (f"; {later} more lost in the last {GRACE_MS // 1000} s" if later else "")
              + (f"; k to catch its leaks: {k} ms" if k is not None else ""), flush=True)
        lost_in_all += len(mine)
    if (run.returncode == 1) != ("invalid" in verdicts):
        fail(f"{name}: exit {run.returncode} does not follow the verdicts {sorted(verdicts)}")
    return lost_in_all


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment")
    parser.add_argument("analyze")
    parser.add_argument("programs", nargs="*", default=QUICK,
                        help=f"of {sorted(programs.PROGRAMS)} (default: {' '.join(QUICK)})")
    parser.add_argument("--seconds", type=int, default=45)
    parser.add_argument("--timeline", choices=["busy", "profile"], default="busy")
    parser.add_argument("--venvs", help="install into (and reuse) virtual environments here")
    parser.add_argument("--keep", help="leave each run's folder here")
    args = parser.parse_intermixed_args()
    for name in args.programs:
        if name not in programs.PROGRAMS:
            parser.error(f"unknown program {name!r}")
    with tempfile.TemporaryDirectory() as tmp:
        venvs = args.venvs or os.path.join(tmp, "venvs")
        runs = args.keep or os.path.join(tmp, "runs")
        lost = sum(judge_one(name, args, venvs, runs) for name in args.programs)
    if args.timeline == "busy" and lost == 0:
        fail("no program lost a status on the busy timeline: the check proves nothing")
    print("all published programs confirmed")


if __name__ == "__main__":
    main()
