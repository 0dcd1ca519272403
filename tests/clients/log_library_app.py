"""An outbox application whose relay is a published log-reading library, for
`experiment judge --log postgres|mariadb` (run by run_log_libraries.py):

    python3 log_library_app.py RELAY STATEDIR SECONDS SEED

RELAY is one of

  pg-logical-replication  (PostgreSQL) js/pg_logical_relay.mjs: the npm package
                          pg-logical-replication 2.5.0, pgoutput, its own slot
                          and publication, each message acknowledged after its
                          key is written;
  pg-logical-replication-commit-lsn
                          the same relay acknowledging a Commit message at its
                          commitLsn instead of the message's LSN (docs/relays.md:
                          the message's LSN + 1, which acknowledge() reports,
                          can pass the next transaction's commit record);
  pg-listen               (PostgreSQL) js/pg_listen_relay.mjs: the npm package
                          pg-listen 1.7.0 LISTENs to what a trigger NOTIFYs on
                          each insert;
  mysql-replication       (MariaDB) mysql_replication_relay.py: the PyPI package
                          mysql-replication 1.0.17, resuming from its stored GTID.

A launcher, so that `experiment judge --kill-at ...` can SIGKILL the relay's
process group and start this command again: on the first start
(SNOWLEAK_START unset or 0) it makes the table `outbox` (and, for pg-listen,
its NOTIFY trigger), starts the writers detached in a session of their own
(so that no SIGKILL of this command's group reaches them), and then becomes
the relay (exec); on a later start it only becomes the relay, which resumes
from the state it keeps in STATEDIR.

The writers (`--writers`) wait until the relay has made STATEDIR/ready (its
slot made, its stream or LISTEN started), then for SECONDS run WRITERS
threads, each on its own connection (psycopg on PostgreSQL, PyMySQL on
MariaDB), inserting 1-3 rows per transaction and holding it open 0-30 ms
(seeded) before COMMIT; each appends the keys of a transaction whose COMMIT
returned to STATEDIR/committed-N.txt, as outbox_app.py's writers do. A
PostgreSQL writer whose connection is lost (`judge --restart-server-at`)
connects again; the keys of a transaction lost during its COMMIT, which may
or may not have committed, go to STATEDIR/uncertain-N.txt. When all
have stopped they make STATEDIR/writers-done, and the relay exits CATCH_UP_S
seconds after it sees that file. The relay appends each key it delivers to
STATEDIR/RELAY.csv.
"""

import os
import random
import subprocess
import sys
import threading
import time
from urllib.parse import parse_qs, urlparse

HERE = os.path.dirname(os.path.abspath(__file__))
WRITERS = 4
HOLD_MS = 30
READY_TIMEOUT_S = 60.0

# relay: (database, program, its options after STATEDIR NAME)
RELAYS = {
    "pg-logical-replication": ("postgres", ["node", os.path.join(HERE, "js", "pg_logical_relay.mjs")], []),
    "pg-logical-replication-commit-lsn": (
        "postgres", ["node", os.path.join(HERE, "js", "pg_logical_relay.mjs")], ["--ack-commit-lsn"]),
    "pg-listen": ("postgres", ["node", os.path.join(HERE, "js", "pg_listen_relay.mjs")], []),
    "mysql-replication": ("mariadb", [sys.executable, os.path.join(HERE, "mysql_replication_relay.py")], []),
}


def mariadb_settings():
    """PyMySQL's connection arguments from the judge's DATABASE_URL
    (mysql://root@localhost/app?socket=DIR/mariadbd.sock)."""
    url = urlparse(os.environ["DATABASE_URL"])
    return {
        "unix_socket": parse_qs(url.query)["socket"][0],
        "user": url.username or "root",
        "password": "",
        "database": url.path.lstrip("/") or "app",
    }


def setup(database, relay):
    if database == "postgres":
        import psycopg

        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS outbox (id BIGSERIAL PRIMARY KEY, payload text NOT NULL)")
            if relay == "pg-listen":
                # PostgreSQL manual, NOTIFY: pg_notify(channel, payload), delivered at commit
                # to the sessions that LISTEN on the channel at that moment.
                conn.execute(
                    "CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN PERFORM pg_notify('outbox', NEW.id::text); RETURN NEW; END $$"
                )
                conn.execute(
                    "CREATE OR REPLACE TRIGGER outbox_notify AFTER INSERT ON outbox "
                    "FOR EACH ROW EXECUTE FUNCTION outbox_notify()"
                )
    else:
        import pymysql

        conn = pymysql.connect(**mariadb_settings(), autocommit=True)
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TABLE IF NOT EXISTS outbox (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                "payload TEXT NOT NULL) ENGINE=InnoDB"
            )
        conn.close()


def pg_connect(stop):
    """A connection, retried every 100 ms while the server is down
    (`judge --restart-server-at`); None once the writers are stopped."""
    import psycopg

    while not stop.is_set():
        try:
            return psycopg.connect(os.environ["DATABASE_URL"])
        except psycopg.OperationalError:
            time.sleep(0.1)
    return None


def pg_writer(n, seed, stop, statedir):
    import psycopg

    rng = random.Random(seed * 1000 + n)
    conn = pg_connect(stop)
    with open(os.path.join(statedir, f"committed-{n}.txt"), "a") as out, open(
        os.path.join(statedir, f"uncertain-{n}.txt"), "a"
    ) as uncertain:
        while conn is not None and not stop.is_set():
            keys = []
            try:
                for _ in range(rng.randint(1, 3)):
                    (key,) = conn.execute(
                        "INSERT INTO outbox (payload) VALUES (%s) RETURNING id", (f"w{n}",)
                    ).fetchone()
                    keys.append(key)
                time.sleep(rng.uniform(0, HOLD_MS) / 1000)
            except psycopg.OperationalError:
                # The server went away before COMMIT: the transaction did not commit.
                conn.close()
                conn = pg_connect(stop)
                continue
            try:
                conn.commit()
            except psycopg.OperationalError:
                # Lost during COMMIT: it may or may not have committed.
                uncertain.write("".join(f"{k}\n" for k in keys))
                uncertain.flush()
                conn.close()
                conn = pg_connect(stop)
                continue
            # COMMIT returned.
            out.write("".join(f"{k}\n" for k in keys))
            out.flush()
    if conn is not None:
        conn.close()


def mariadb_writer(n, seed, stop, statedir):
    import pymysql

    rng = random.Random(seed * 1000 + n)
    conn = pymysql.connect(**mariadb_settings(), autocommit=False)
    with open(os.path.join(statedir, f"committed-{n}.txt"), "a") as out:
        while not stop.is_set():
            keys = []
            with conn.cursor() as cur:
                for _ in range(rng.randint(1, 3)):
                    cur.execute("INSERT INTO outbox (payload) VALUES (%s)", (f"w{n}",))
                    keys.append(cur.lastrowid)
            time.sleep(rng.uniform(0, HOLD_MS) / 1000)
            conn.commit()
            out.write("".join(f"{k}\n" for k in keys))
            out.flush()
    conn.close()


def writers(database, statedir, seconds, seed):
    ready = os.path.join(statedir, "ready")
    deadline = time.monotonic() + READY_TIMEOUT_S
    # The relay makes `ready` once it holds everything committed from then on.
    while not os.path.exists(ready):
        if time.monotonic() > deadline:
            sys.exit(f"the relay did not make {ready} within {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.02)
    stop = threading.Event()
    target = pg_writer if database == "postgres" else mariadb_writer
    threads = [threading.Thread(target=target, args=(n, seed, stop, statedir)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    with open(os.path.join(statedir, "writers-done"), "w"):
        pass


def main():
    if sys.argv[1] == "--writers":
        database, statedir, seconds, seed = sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
        writers(database, statedir, seconds, seed)
        return
    relay, statedir, seconds, seed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    if relay not in RELAYS:
        sys.exit(f"unknown relay {relay!r}: one of {', '.join(RELAYS)}")
    database, command, options = RELAYS[relay]
    os.makedirs(statedir, exist_ok=True)
    if os.environ.get("SNOWLEAK_START", "0") == "0":
        setup(database, relay)
        with open(os.path.join(statedir, "writers.log"), "a") as log:
            subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--writers", database, statedir, seconds, seed],
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
    os.execvp(command[0], command + [statedir, relay] + options)


if __name__ == "__main__":
    main()
