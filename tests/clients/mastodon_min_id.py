#!/usr/bin/env python3
"""A Mastodon.py loop on min_id: the statuses immediately above the newest
seen, one page a poll, every 0.2 s. Run by `experiment judge`."""

import time

from mastodon import Mastodon

from judgedlib import Served, args, server

base, token = server()
out, rounds = args()
api = Mastodon(access_token=token, api_base_url=base, request_timeout=10)
served = Served(out)
cursor = None
for _ in range(rounds):
    if cursor is None:
        ids = served.request(lambda: [s["id"] for s in api.timeline_public(limit=40)])
    else:
        ids = served.request(lambda: [s["id"] for s in api.timeline_public(min_id=cursor, limit=40)])
    if ids:
        cursor = max(ids, key=int)
    time.sleep(0.2)
