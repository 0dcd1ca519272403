#!/usr/bin/env python3
"""Reads the simulator's Misskey API with Misskey.py (pinned in .ci/run), a
client library none of us wrote: its constructor posts /api/meta; then a
since_id poll of the local timeline (sinceId alone: the oldest notes after the
cursor, ascending), paging back with untilId (newest first), the same window
walked up again with sinceId and untilId, and the global timeline.

    experiment serve --profile misskey --set rate_per_s=20 --set delete_probability=0 &
    python3 tests/misskey_py_check.py http://127.0.0.1:8080

Misskey.py asks for notes with files by default (withFiles=true): the
simulator's notes have none, so every call here says with_files=False.
"""

import sys

from misskey import Misskey

from checklib import check, contains_all, in_order, key, page_back, poll, wait_for


def ids(notes):
    return [n["id"] for n in notes]


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    api = Misskey(base, i="not-a-token")
    local = lambda **kw: ids(api.notes_local_timeline(with_files=False, **kw))

    first = wait_for(lambda: local(limit=100), 30)
    check(in_order(first, True), "the local timeline is newest first")
    check(all(len(i) == 16 for i in first), "aidx IDs of 16 characters")

    polled = poll(lambda cursor: local(limit=100, since_id=cursor), first[0], newest_first=False)
    top = max(polled, key=key)
    back = page_back(lambda cursor: local(limit=10, until_id=cursor), top)
    bottom = back[-1]
    up = local(limit=100, since_id=bottom, until_id=top)
    check(in_order(up, True), "sinceId with untilId is newest first")
    contains_all(up, back[:-1], "walking up again")

    notes = api.notes_local_timeline(with_files=False, limit=100)
    users = {}
    for n in notes:
        users.setdefault(n["userId"], n["user"])
        check(users[n["userId"]] == n["user"], f"note {n['id']}: one user object per userId")
    everything = ids(api.notes_global_timeline(with_files=False, limit=100))
    lowest = min(everything, key=key)
    check(in_order(everything, True), "the global timeline is newest first")
    contains_all(everything, [n["id"] for n in notes if key(n["id"]) >= key(lowest)], "the global timeline")
    print(f"all checks passed ({len(polled)} polled, {len(back)} paged back, {len(up)} walked up)")


if __name__ == "__main__":
    main()
