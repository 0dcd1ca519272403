#!/usr/bin/env python3
"""A naive Mastodon.py loop: since_id = the newest status seen, every 0.2 s.
Run by `experiment judge`; see run_judged.py."""

import time

from mastodon import Mastodon

from judgedlib import Served, args, server

base, token = server()
out, rounds = args()
api = Mastodon(access_token=token, api_base_url=base, request_timeout=10)
served = Served(out)
since = None
for _ in range(rounds):
    ids = served.request(lambda: [s["id"] for s in api.timeline_public(since_id=since, limit=40)])
    if ids:
        since = max(ids, key=int)
    time.sleep(0.2)
