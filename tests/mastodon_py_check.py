#!/usr/bin/env python3
"""Reads the snowleak simulator's Mastodon API with Mastodon.py, a client
library none of us wrote: if it can page the simulator, real clients can.

Run (see SIM_NOTES.md):

    pip install Mastodon.py
    experiment serve --profile mastodon --addr 127.0.0.1:8080 --set rate_per_s=20 --set delete_probability=0 &
    python3 tests/mastodon_py_check.py http://127.0.0.1:8080

Exits 0 when every check passes, 1 with a message otherwise. It waits (up to
60 s) for the simulator to have posted enough statuses, since it posts in
real time.
"""

import sys
import time
from datetime import datetime

from mastodon import Mastodon

from checklib import check, contains_all, in_order, poll


def ids(page):
    return [int(status["id"]) for status in page]


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    # No token: the public timeline is public. The version check reads /api/v1/instance.
    api = Mastodon(api_base_url=base, request_timeout=10)

    # NodeInfo: /.well-known/nodeinfo, then the 2.0 document it links to.
    info = api.instance_nodeinfo()
    check(info.software.name == "mastodon" and info.version == "2.0", "instance_nodeinfo names Mastodon")

    deadline = time.time() + 60
    page = api.timeline_public(limit=40)
    while len(page) < 12 and time.time() < deadline:
        time.sleep(1)
        page = api.timeline_public(limit=40)
    window = ids(page)
    check(len(window) >= 12, f"the simulator posted statuses ({len(window)} on the first page)")
    check(window == sorted(window, reverse=True), "the public timeline is newest first")
    first = page[0]
    check(isinstance(first["created_at"], datetime), "created_at parses as a datetime")
    check(bool(first["account"]["acct"]), "statuses carry an account with acct")

    # since_id: the NEWEST statuses above the cursor.
    cursor = window[-1]
    newest = ids(api.timeline_public(since_id=cursor, limit=2))
    check(len(newest) == 2 and all(i > cursor for i in newest), "since_id returns statuses above the cursor")
    check(newest[0] >= window[0], "since_id returns the newest statuses, not the ones next to the cursor")

    # min_id: the statuses IMMEDIATELY above the cursor, still newest first.
    following = ids(api.timeline_public(min_id=cursor, limit=2))
    check(len(following) == 2 and all(i > cursor for i in following), "min_id returns statuses above the cursor")
    check(following == sorted(following, reverse=True), "min_id pages are newest first")
    # The two smallest IDs above the cursor can only be smaller than or equal to
    # the known ones (a late arrival may slip in below them: the leak we study).
    check(max(following) <= window[-3], "min_id returns the statuses right above the cursor")

    # fetch_next follows the Link header (max_id) down the timeline.
    seen = list(window)
    current = page
    pages = 0
    while pages < 3:
        current = api.fetch_next(current)
        if not current:
            break
        below = ids(current)
        check(all(i < seen[-1] for i in below), f"fetch_next page {pages + 1} is below the previous page")
        seen.extend(below)
        pages += 1
    check(pages >= 1 or len(window) < 40, "fetch_next followed at least one page")
    check(len(seen) == len(set(seen)), "no status appears twice while paging")

    # A since_id poll, then fetch_previous (Link rel="prev", min_id) back up
    # over what fetch_next paged down.
    polled = poll(lambda cursor: ids(api.timeline_public(since_id=cursor, limit=40)), window[0], newest_first=True)
    up = []
    current = api.timeline_public(min_id=seen[-1], limit=10)
    for n in range(3):
        if not current:
            break
        check(in_order(ids(current), True) and all(i > seen[-1] for i in ids(current)),
              f"fetch_previous page {n + 1} is newest first, above min_id")
        check(not up or min(ids(current)) > max(up), f"fetch_previous page {n + 1} is above the last one")
        up.extend(ids(current))
        current = api.fetch_previous(current)
    contains_all(up, [i for i in seen[:-1] if i <= max(up)], "walking up with fetch_previous")
    print(f"{len(polled)} statuses polled with since_id, {len(up)} walked up")
    print(f"all checks passed ({len(seen)} statuses read over {pages + 1} pages)")


if __name__ == "__main__":
    main()
