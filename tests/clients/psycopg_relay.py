"""An outbox relay on psycopg (PostgreSQL's Python client, not written here)
that reads the PostgreSQL backend's table itself, as Kafka Connect's JDBC
source in incrementing mode does, and delivers every row it reads:

    python3 psycopg_relay.py DATABASE_URL naive|behind OUT.csv QUERIES.jsonl SECONDS

naive:  WHERE id > newest delivered ORDER BY id (the relay's own query).
behind: the cursor held k = 1 s behind by the ID's time (the table's IDs are
        Mastodon's: ms << 16), so a row committed late is still read; rows
        already delivered are not delivered again.

OUT.csv gets one `id,delivered_at` line per row delivered (what `analyze
--delivered` reads); QUERIES.jsonl the send time of every query, for the
independent check.
"""

import datetime
import json
import sys
import time

import psycopg

K_MS = 1000


def main():
    url, mode, out_path, queries_path, seconds = sys.argv[1:6]
    deadline = time.time() + float(seconds)
    newest, delivered = 0, set()
    with psycopg.connect(url, autocommit=True) as conn, \
            open(out_path, "w") as out, open(queries_path, "w") as queries:
        out.write("id,delivered_at\n")
        while time.time() < deadline:
            cursor = newest
            if mode == "behind":
                cursor = min(newest, (int(time.time() * 1000) - K_MS) << 16)
            sent = int(time.time() * 1000)
            rows = conn.execute(
                "SELECT id FROM statuses WHERE id > %s ORDER BY id LIMIT 500", (cursor,)
            ).fetchall()
            queries.write(json.dumps({"sent": sent}) + "\n")
            for (row_id,) in rows:
                if row_id in delivered:
                    continue
                delivered.add(row_id)
                at = datetime.datetime.now(datetime.timezone.utc).isoformat()
                out.write(f"{row_id},{at}\n")
                newest = max(newest, row_id)
            out.flush()
            time.sleep(0.01)


if __name__ == "__main__":
    main()
