"""What every client-library check of the simulator shares: a failing check
ends the process with status 1; polling with since_id and paging back are the
same walk whatever the library, given a function that fetches one page.

IDs are compared by (length, text): numbers in decimal strings and Misskey's
fixed-length base36 IDs both sort that way.
"""

import sys
import time


def check(condition, message):
    if not condition:
        print(f"FAIL: {message}")
        sys.exit(1)
    print(f"ok: {message}")


def key(status_id):
    status_id = str(status_id)
    return (len(status_id), status_id)


def in_order(ids, newest_first):
    keys = [key(i) for i in ids]
    return keys == sorted(keys, reverse=newest_first) and len(set(keys)) == len(keys)


def wait_for(fetch, count, timeout_s=60):
    """Fetches until the page holds `count` items (the simulator posts in real time)."""
    deadline = time.time() + timeout_s
    page = fetch()
    while len(page) < count and time.time() < deadline:
        time.sleep(0.5)
        page = fetch()
    check(len(page) >= count, f"the simulator posted ({len(page)} items on the first page)")
    return page


def poll(fetch_since, cursor, newest_first, rounds=8, pause_s=0.5):
    """A since_id poller: each round asks for what is above the highest ID
    seen. Every item must be above the cursor, in the API's order, and never
    seen before. Returns every ID seen."""
    seen = []
    for round_ in range(rounds):
        time.sleep(pause_s)
        ids = [str(i) for i in fetch_since(cursor)]
        check(all(key(i) > key(cursor) for i in ids), f"poll {round_ + 1}: every item is above since_id")
        check(in_order(ids, newest_first), f"poll {round_ + 1}: {len(ids)} items in order")
        check(not set(ids) & set(seen), f"poll {round_ + 1}: nothing seen twice")
        seen.extend(ids)
        if ids:
            cursor = max(ids, key=key)
    check(len(seen) > 0, f"polling with since_id saw new items ({len(seen)})")
    return seen


def page_back(fetch_below, cursor, pages=3):
    """Pages down from `cursor`: each page newest first, below the previous one."""
    seen = []
    for n in range(pages):
        ids = [str(i) for i in fetch_below(cursor)]
        if not ids:
            break
        check(all(key(i) < key(cursor) for i in ids), f"back page {n + 1} is below the cursor")
        check(in_order(ids, True), f"back page {n + 1} is newest first")
        seen.extend(ids)
        cursor = ids[-1]
    check(len(seen) > 0 and len(set(seen)) == len(seen), f"paging back read {len(seen)} distinct items")
    return seen


def contains_all(walked, expected, what):
    """A walk in the other direction may find late arrivals too, never fewer items."""
    missing = set(map(str, expected)) - set(map(str, walked))
    check(not missing, f"{what}: every item of the other walk is there ({len(missing)} missing)")
