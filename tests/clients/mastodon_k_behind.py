#!/usr/bin/env python3
"""A Mastodon.py loop that holds its cursor k behind, with the compensated
formula of tesaguri's "Your Timelines Are Leaky" (the core's
`compensated_since_id`): since_id = clamp(min_id_at(retrieved_at - k) - 1,
min_id_at(ts(latest) - k) - 1, latest), for Mastodon's IDs (ms << 16).
K_MS is 2000, or SNOWLEAK_K_MS from the environment. Run by `experiment judge`."""

import os
import time

from mastodon import Mastodon

from judgedlib import Served, args, server

K_MS = int(os.environ.get("SNOWLEAK_K_MS", "2000"))


def ts(i):
    return i >> 16


def min_id_at(ms):
    return ms << 16


def compensated(latest, retrieved_at_ms, k_ms):
    lower = latest if ts(latest) <= k_ms else min_id_at(ts(latest) - k_ms) - 1
    return min(max(min_id_at(retrieved_at_ms - k_ms) - 1, lower), latest)


base, token = server()
out, rounds = args()
api = Mastodon(access_token=token, api_base_url=base, request_timeout=10)
served = Served(out)
latest, retrieved_at = None, None
for _ in range(rounds):
    since = None if latest is None else compensated(latest, retrieved_at, K_MS)
    sent = int(time.time() * 1000)
    ids = served.request(lambda: [s["id"] for s in api.timeline_public(since_id=since, limit=40)])
    retrieved_at = sent
    if ids:
        latest = max([latest or 0] + [int(i) for i in ids])
    time.sleep(0.2)
