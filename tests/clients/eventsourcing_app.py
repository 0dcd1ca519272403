"""An application on the `eventsourcing` library (PyPI; not written here)
with its PostgreSQL persistence, for `experiment judge --log postgres`
(run by run_log_eventsourcing.py):

    python3 eventsourcing_app.py OUTDIR SECONDS SEED

The library's own writers and its own follower, unmodified:

- WRITERS processes, each with its own `Ledger` application (its own
  connection pool) on the same database, for SECONDS: each opens a few
  accounts of its own and then saves 1-3 events at a time to one of them
  (one transaction, as many notification IDs as events). The library inserts
  into `ledger_events` under `LOCK TABLE ... IN EXCLUSIVE MODE`, so that
  notification IDs are issued in commit order (its `_lock_table`, in
  the module eventsourcing.postgres). Each writer appends the notification ID of every
  event whose save returned to OUTDIR/committed-N.txt.
- A follower reads the application's notification log as the library's
  docs show, `notification_log.select(start, limit)` from one past the
  last ID it read, every 50 ms, and appends each notification ID it reads
  to OUTDIR/follower.csv. When the writers stop it keeps reading for 2 s.

The persistence comes from the environment as the library reads it:
PERSISTENCE_MODULE=eventsourcing.postgres and POSTGRES_DBNAME, _HOST,
_PORT, _USER, _PASSWORD, set here from the judge's PGDATABASE, PGHOST,
PGPORT and PGUSER (the judge's cluster trusts its Unix socket: the
password is empty).
"""

import multiprocessing
import os
import random
import sys
import time

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

WRITERS = 4
ACCOUNTS_PER_WRITER = 5
PERIOD_S = 0.05
CATCH_UP_S = 2.0
SECTION = 100


class Account(Aggregate):
    @event("Opened")
    def __init__(self, owner):
        self.owner = owner
        self.balance = 0

    @event("Deposited")
    def deposit(self, amount):
        self.balance += amount


class Ledger(Application):
    # Its events go to ledger_events (the lower-cased name + "_events").
    name = "Ledger"
    log_section_size = SECTION


def persistence_env(create_table):
    env = os.environ
    return {
        # The table and the library's insert function are made once, by
        # main: made by every process at once, CREATE OR REPLACE FUNCTION
        # collides ("tuple concurrently updated").
        "CREATE_TABLE": "yes" if create_table else "no",
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": env["PGDATABASE"],
        "POSTGRES_HOST": env["PGHOST"],
        "POSTGRES_PORT": env["PGPORT"],
        "POSTGRES_USER": env["PGUSER"],
        "POSTGRES_PASSWORD": env.get("PGPASSWORD", ""),
        "POSTGRES_POOL_SIZE": "2",
    }


def writer(n, seed, seconds, outdir):
    rng = random.Random(seed * 1000 + n)
    app = Ledger(env=persistence_env(False))
    with open(os.path.join(outdir, f"committed-{n}.txt"), "w") as out:
        def saved(recordings):
            for recording in recordings:
                out.write(f"{recording.notification.id}\n")
            out.flush()

        accounts = []
        for i in range(ACCOUNTS_PER_WRITER):
            account = Account(owner=f"w{n}-{i}")
            saved(app.save(account))
            accounts.append(account)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            account = rng.choice(accounts)
            for _ in range(rng.randint(1, 3)):
                account.deposit(rng.randint(1, 100))
            saved(app.save(account))
    app.close()


def follower(outdir, writers_done):
    app = Ledger(env=persistence_env(False))
    last = 0
    deadline = None
    with open(os.path.join(outdir, "follower.csv"), "w") as out:
        while deadline is None or time.monotonic() < deadline:
            if deadline is None and writers_done.is_set():
                deadline = time.monotonic() + CATCH_UP_S
            while True:
                notifications = app.notification_log.select(start=last + 1, limit=SECTION)
                for notification in notifications:
                    out.write(f"{notification.id}\n")
                    last = notification.id
                if len(notifications) < SECTION:
                    break
            out.flush()
            time.sleep(PERIOD_S)
    app.close()


def main():
    outdir, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    # The table made once, before the writers start.
    Ledger(env=persistence_env(True)).close()
    ctx = multiprocessing.get_context("spawn")
    writers_done = ctx.Event()
    reader = ctx.Process(target=follower, args=(outdir, writers_done))
    reader.start()
    writers = [
        ctx.Process(target=writer, args=(n, seed, seconds, outdir)) for n in range(WRITERS)
    ]
    for p in writers:
        p.start()
    for p in writers:
        p.join()
    writers_done.set()
    reader.join()
    failed = [p.exitcode for p in writers + [reader] if p.exitcode != 0]
    if failed:
        sys.exit(f"a process failed (exit codes {failed})")


if __name__ == "__main__":
    main()
