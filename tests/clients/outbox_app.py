"""A small application with its own writers and relays, for `experiment judge
--log postgres` (run by run_log_relays.py):

    python3 outbox_app.py OUTDIR SECONDS SEED

Creates `outbox` (a BIGSERIAL key, and the writing transaction's id), then for
SECONDS runs WRITERS threads, each on its own psycopg connection, inserting one
row per transaction and holding the transaction open 0-30 ms (seeded) before
COMMIT, with no lock; each writer appends the key of every row whose COMMIT
returned to OUTDIR/committed-N.txt. Beside them, three relays read the table
every 50 ms and deliver every row they read once, appending its key to
OUTDIR/RELAY.csv:

naive:  WHERE id > newest delivered ORDER BY id (Kafka Connect JDBC's
        incrementing mode): a row committed after a higher key was read is skipped.
gaps:   the missing keys below the newest delivered are gaps, re-read with
        `id = ANY(gaps)` until they fill or are 10 s old (Axon's gap-aware token).
xmin:   reads only rows whose transaction is older than every transaction still
        running (`xid < pg_snapshot_xmin(pg_current_snapshot())`), in (xid, id)
        order from a (xid, id) cursor, so nothing can commit behind it.

When the writers stop, the relays keep reading for 2 s, then exit.
"""

import os
import random
import sys
import threading
import time

import psycopg

WRITERS = 6
HOLD_MS = 30
PERIOD_S = 0.05
GAP_TIMEOUT_S = 10.0
CATCH_UP_S = 2.0


def writer(url, n, seed, stop, outdir):
    rng = random.Random(seed * 1000 + n)
    with psycopg.connect(url) as conn, open(os.path.join(outdir, f"committed-{n}.txt"), "w") as out:
        while not stop.is_set():
            with conn.transaction():
                (key,) = conn.execute(
                    "INSERT INTO outbox (payload) VALUES (%s) RETURNING id", (f"w{n}",)
                ).fetchone()
                time.sleep(rng.uniform(0, HOLD_MS) / 1000)
            out.write(f"{key}\n")


def naive(conn, state):
    rows = conn.execute(
        "SELECT id FROM outbox WHERE id > %s ORDER BY id LIMIT 500", (state["last"],)
    ).fetchall()
    keys = [k for (k,) in rows]
    if keys:
        state["last"] = keys[-1]
    return keys


def gaps(conn, state):
    now = time.monotonic()
    open_gaps = state["gaps"]
    for key in [k for k, since in open_gaps.items() if now - since > GAP_TIMEOUT_S]:
        del open_gaps[key]
    rows = conn.execute(
        "SELECT id FROM outbox WHERE id > %s OR id = ANY(%s) ORDER BY id LIMIT 500",
        (state["last"], list(open_gaps)),
    ).fetchall()
    keys = [k for (k,) in rows]
    for key in keys:
        if key in open_gaps:
            del open_gaps[key]
        elif key > state["last"]:
            for missing in range(state["last"] + 1, key):
                open_gaps[missing] = now
            state["last"] = key
    return keys


def xmin(conn, state):
    rows = conn.execute(
        "SELECT id, xid::text::bigint FROM outbox "
        "WHERE (xid, id) > (%s::text::xid8, %s) AND xid < pg_snapshot_xmin(pg_current_snapshot()) "
        "ORDER BY xid, id LIMIT 500",
        (str(state["xid"]), state["last"]),
    ).fetchall()
    if rows:
        state["last"], state["xid"] = rows[-1]
    return [k for (k, _) in rows]


def relay(url, name, read, writers_done, outdir):
    state = {"last": 0, "xid": 0, "gaps": {}}
    delivered = set()
    deadline = None
    with psycopg.connect(url, autocommit=True) as conn, open(os.path.join(outdir, f"{name}.csv"), "w") as out:
        while deadline is None or time.monotonic() < deadline:
            if deadline is None and writers_done.is_set():
                deadline = time.monotonic() + CATCH_UP_S
            for key in read(conn, state):
                if key not in delivered:
                    delivered.add(key)
                    out.write(f"{key}\n")
            out.flush()
            time.sleep(PERIOD_S)


def main():
    outdir, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    url = os.environ["DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE outbox (id BIGSERIAL PRIMARY KEY, payload text NOT NULL, "
            "xid xid8 NOT NULL DEFAULT pg_current_xact_id())"
        )
    stop, writers_done = threading.Event(), threading.Event()
    relays = [
        threading.Thread(target=relay, args=(url, name, read, writers_done, outdir))
        for name, read in (("naive", naive), ("gaps", gaps), ("xmin", xmin))
    ]
    writers = [
        threading.Thread(target=writer, args=(url, n, seed, stop, outdir)) for n in range(WRITERS)
    ]
    for t in relays + writers:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in writers:
        t.join()
    writers_done.set()
    for t in relays:
        t.join()


if __name__ == "__main__":
    main()
