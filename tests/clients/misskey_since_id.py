#!/usr/bin/env python3
"""A naive Misskey.py loop: sinceId = the newest note seen, every 0.2 s, on
the global timeline (without `with_files=False`, Misskey.py asks for notes
with files only, which the simulator has none of). Run by `experiment judge`; see run_judged.py."""

import time

from misskey import Misskey

from judgedlib import Served, args, server

base, token = server()
out, rounds = args()
api = Misskey(base, i=token)
served = Served(out)
since = None
# Misskey's aidx IDs are fixed-width base-36 text: their order is the strings' order.
for _ in range(rounds):
    page = served.request(lambda: [n["id"] for n in api.notes_global_timeline(since_id=since, limit=100, with_files=False)])
    if page:
        since = max(page)
    time.sleep(0.2)
