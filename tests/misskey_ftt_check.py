#!/usr/bin/env python3
"""Reads Misskey's Fanout Timeline (`experiment serve --backend misskey-ftt`:
real Redis lists and a real PostgreSQL, docs/misskey-ftt.md) with Misskey.py
(pinned in .ci/run), a client library none of us wrote: its constructor
posts /api/meta, then /api/i; then, on each of the three timelines (home,
local, hybrid), the paging rules the docs state:

- no cursor: newest first (a page from the Redis lists);
- sinceId alone: the oldest notes above the cursor, ascending (every such
  request is answered by PostgreSQL's fallback);
- untilId: pages newest first, each below the last, continuing down;
- sinceId with untilId: newest first, inside the window, and walking the
  same window again finds every note paging down found;
- the hybrid timeline holds the home and local timelines' notes;
- the global timeline is read from PostgreSQL alone (every page's path is
  db-direct), pages as the others do, and holds the hybrid timeline's notes;
- an endpoint the server lacks answers as Misskey does, a 404 with its JSON
  error (UNKNOWN_API_ENDPOINT), which Misskey.py raises as an API error.

    experiment serve --backend misskey-ftt --addr 127.0.0.1:8080 &
    python3 tests/misskey_ftt_check.py http://127.0.0.1:8080

Misskey.py asks for notes with files by default (withFiles=true): every
call here says with_files=False.
"""

import json
import sys
import urllib.error
import urllib.request

from misskey import Misskey
from misskey.exceptions import MisskeyAPIException

from checklib import check, contains_all, in_order, key, page_back, poll, wait_for


def ids(notes):
    return [n["id"] for n in notes]


def read_path(base, endpoint, body):
    """The path that answered (the server's x-snowleak-ftt-path header),
    which Misskey.py does not show: one raw request."""
    request = urllib.request.Request(
        f"{base}/api/notes/{endpoint}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers.get("x-snowleak-ftt-path")


def walk_window(fetch, bottom, top):
    """Every note strictly between `bottom` and `top`, by pages of sinceId
    with untilId (newest first), each page's untilId the last note of the
    one before."""
    seen, cursor = [], top
    for n in range(50):
        page = [str(i) for i in fetch(bottom, cursor)]
        if not page:
            return seen
        check(in_order(page, True), f"window page {n + 1}: newest first")
        check(all(key(bottom) < key(i) < key(cursor) for i in page), f"window page {n + 1}: inside the window")
        seen.extend(page)
        cursor = page[-1]
    check(False, "walking the window ended within 50 pages")


def timeline_checks(name, read, base, endpoint):
    first = wait_for(lambda: ids(read(limit=20)), 20)
    check(in_order(first, True), f"{name}: the first page is newest first")
    check(all(len(i) == 16 for i in first), f"{name}: aidx IDs of 16 characters")
    check(read_path(base, endpoint, {"limit": 5}) in ("redis", "redis+db"), f"{name}: a page without sinceId is read from Redis")
    check(read_path(base, endpoint, {"limit": 5, "sinceId": first[-1]}) == "db-fallback",
          f"{name}: a page with sinceId is answered by PostgreSQL's fallback")

    # sinceId alone: ascending pages above the cursor, nothing twice.
    bottom = first[-1]
    up = poll(lambda cursor: ids(read(limit=5, since_id=cursor)), bottom, newest_first=False, rounds=4, pause_s=0.2)
    top = max(up + first, key=key)

    # untilId paging from the top down: each page below the last.
    back = page_back(lambda cursor: ids(read(limit=5, until_id=cursor)), top, pages=4)
    low = back[-1]

    # The same window again, with sinceId and untilId.
    window = walk_window(lambda since, until: ids(read(limit=7, since_id=since, until_id=until)), low, top)
    contains_all(window, back[:-1], f"{name}: walking the window with sinceId and untilId")
    # Notes committed since may sit in the range too: compare below the poll's top.
    reached = max(up, key=key)
    contains_all(up, [i for i in first if key(bottom) < key(i) <= key(reached)],
                 f"{name}: polling up from the first page's oldest")
    return low, top


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    api = Misskey(base, i="not-a-token")
    me = api.i()
    check(me["id"] == "0" and me["username"] == "snowleak", "/api/i: the account the timelines are read as")

    home = lambda **kw: api.notes_timeline(with_files=False, **kw)
    local = lambda **kw: api.notes_local_timeline(with_files=False, **kw)
    hybrid = lambda **kw: api.notes_hybrid_timeline(with_files=False, **kw)

    windows = {}
    for name, read, endpoint in [
        ("home", home, "timeline"),
        ("local", local, "local-timeline"),
        ("hybrid", hybrid, "hybrid-timeline"),
    ]:
        windows[name] = (read, timeline_checks(name, read, base, endpoint))

    # The hybrid timeline is home and local together: a window of each,
    # walked again on the hybrid timeline, finds every note of theirs.
    for name in ("home", "local"):
        read, (low, top) = windows[name]
        theirs = walk_window(lambda s, u: ids(read(limit=100, since_id=s, until_id=u)), low, top)
        mixed = walk_window(lambda s, u: ids(hybrid(limit=100, since_id=s, until_id=u)), low, top)
        contains_all(mixed, theirs, f"hybrid holds the {name} timeline's notes between {low} and {top}")

    # The global timeline: PostgreSQL alone, every note.
    glob = lambda **kw: api.notes_global_timeline(with_files=False, **kw)
    first = wait_for(lambda: ids(glob(limit=20)), 20)
    check(in_order(first, True), "global: the first page is newest first")
    for body in ({"limit": 5}, {"limit": 5, "sinceId": first[-1]}, {"limit": 5, "untilId": first[0]}):
        check(read_path(base, "global-timeline", body) == "db-direct",
              f"global: {body} is read from PostgreSQL alone")
    bottom = first[-1]
    up = poll(lambda cursor: ids(glob(limit=5, since_id=cursor)), bottom, newest_first=False, rounds=4, pause_s=0.2)
    top = max(up + first, key=key)
    back = page_back(lambda cursor: ids(glob(limit=5, until_id=cursor)), top, pages=4)
    low = back[-1]
    window = walk_window(lambda s, u: ids(glob(limit=7, since_id=s, until_id=u)), low, top)
    contains_all(window, back[:-1], "global: walking the window with sinceId and untilId")
    mixed = walk_window(lambda s, u: ids(hybrid(limit=100, since_id=s, until_id=u)), low, top)
    contains_all(window, mixed, f"global holds the hybrid timeline's notes between {low} and {top}")

    # An endpoint the server lacks: Misskey's 404 and JSON error, raised by Misskey.py as one.
    request = urllib.request.Request(f"{base}/api/notes/favorites/create", data=b"{}",
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        urllib.request.urlopen(request, timeout=10)
        check(False, "an unknown endpoint answers 404")
    except urllib.error.HTTPError as e:
        body = json.loads(e.read())
        check(e.code == 404 and body["error"]["code"] == "UNKNOWN_API_ENDPOINT",
              "an unknown endpoint: 404 and Misskey's UNKNOWN_API_ENDPOINT error")
    try:
        api.notes_favorites_create(first[0])
        check(False, "Misskey.py raises on an unknown endpoint")
    except MisskeyAPIException as e:
        check(e.code == "UNKNOWN_API_ENDPOINT", "Misskey.py reads the unknown endpoint's error as an API error")
    print("all checks passed")


if __name__ == "__main__":
    main()
