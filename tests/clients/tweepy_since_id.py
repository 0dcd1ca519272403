#!/usr/bin/env python3
"""A naive tweepy loop on X API v2: since_id = the newest tweet seen, every
0.2 s, on the reader's own user timeline (which the simulator serves whole).
tweepy always calls https://api.twitter.com: a requests adapter mounted on
its session sends the requests to the judge's server. Run by `experiment
judge`; see run_judged.py."""

import os
import sys
import time

import tweepy

from judgedlib import Served, args, server

# The adapter of tests/tweepy_check.py, which sends tweepy's requests elsewhere.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tweepy_check import ToSimulator  # noqa: E402


base, token = server()
out, rounds = args()
client = tweepy.Client(bearer_token=token, wait_on_rate_limit=True)
client.session.mount("https://api.twitter.com", ToSimulator(base))
me = client.get_me(user_auth=False).data
served = Served(out)
since = None
for _ in range(rounds):
    page = served.request(lambda: [t.id for t in client.get_users_tweets(me.id, since_id=since, max_results=100).data or []])
    if page:
        since = max(page, key=int)
    time.sleep(0.2)
