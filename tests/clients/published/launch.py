#!/usr/bin/env python3
"""Runs one published program as a user would, for `experiment judge`:

    launch.py NAME VENV OUT [SECONDS]

NAME is a key of programs.PROGRAMS, VENV the virtual environment it was
installed in, OUT the folder for its configuration and its own output. The
program's configuration is written from SNOWLEAK_BASE_URL and SNOWLEAK_TOKEN
(which the judge sets), then a program that polls by itself is run once, and
one that runs once per call is run every second, as cron or a shell loop
would. A program that fails ends the loop with its exit status. After
SECONDS, a looped program is not started again and one that polls by itself
gets SIGINT (its Ctrl-C), so that each run ends as a user's would, with its
output stored. SIGINT or SIGTERM (the judge's stop) is passed to the running
program and ends the loop as well.
"""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import programs  # noqa: E402

INTERVAL_S = 1.0


def main():
    name, venv, out = sys.argv[1], sys.argv[2], sys.argv[3]
    deadline = time.monotonic() + float(sys.argv[4]) if len(sys.argv) > 4 else None
    os.makedirs(out, exist_ok=True)
    prog = programs.program(name, venv, out)
    env = {**os.environ, **prog.configure(os.environ["SNOWLEAK_BASE_URL"],
                                          os.environ["SNOWLEAK_TOKEN"])}
    if prog.redirected:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [programs.HERE, env.get("PYTHONPATH")]))
    else:
        env.pop("PYTHONPATH", None)
    stopping, child = [], [None]

    def stop(signum, _frame):
        stopping.append(signum)
        if child[0] is not None and child[0].poll() is None:
            child[0].send_signal(signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    capture = prog.mode == "loop" and type(prog).after is not programs.Program.after
    while not stopping and (deadline is None or time.monotonic() < deadline):
        child[0] = subprocess.Popen(prog.command(), env=env, cwd=out,
                                    stdout=subprocess.PIPE if capture else None, text=True)
        if prog.mode == "daemon":
            try:
                child[0].wait(None if deadline is None else max(0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stop(signal.SIGINT, None)
            child[0].wait()
            break
        stdout, _ = child[0].communicate()
        if stopping:
            break
        if child[0].returncode != 0:
            sys.exit(child[0].returncode)
        prog.after(stdout)
        time.sleep(INTERVAL_S)


if __name__ == "__main__":
    main()
