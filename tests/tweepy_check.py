#!/usr/bin/env python3
"""Reads the simulator's X API v2 with tweepy (pinned in .ci/run), a client
library none of us wrote: user lookups, a since_id poll of a user timeline,
paging back with until_id, tweepy's Paginator forward and reversed (next_token
and previous_token), expansions=author_id, and recent search's end_time.

    experiment serve --profile twitter --set rate_per_s=20 --set delete_probability=0 &
    python3 tests/tweepy_check.py http://127.0.0.1:8080

tweepy always calls https://api.twitter.com: a requests adapter mounted on its
session sends those requests to the simulator instead.
"""

import sys
from datetime import datetime, timedelta, timezone

import requests
import tweepy

from checklib import check, contains_all, in_order, page_back, poll, wait_for

FIELDS = ["created_at", "author_id", "conversation_id", "lang", "public_metrics"]


class ToSimulator(requests.adapters.HTTPAdapter):
    def __init__(self, base):
        super().__init__()
        self.base = base

    def send(self, request, **kwargs):
        request.url = request.url.replace("https://api.twitter.com", self.base, 1)
        return super().send(request, **kwargs)


def ids(response):
    return [t.id for t in response.data or []]


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    client = tweepy.Client(bearer_token="not-a-token", wait_on_rate_limit=True)
    client.session.mount("https://api.twitter.com", ToSimulator(base))

    # Lookups: the reader, an author by username and by ID, the same object each time.
    me = client.get_me(user_auth=False).data
    check(me is not None and me.username == "snowleak", "get_me returns the reader")
    by_name = client.get_user(username="user3", user_fields=["created_at"]).data
    by_id = client.get_user(id=by_name.id, user_fields=["created_at"]).data
    check(by_name.data == by_id.data, "an author is the same object by username and by ID")
    many = client.get_users(ids=[by_id.id, 42])
    check(len(many.data) == 1 and len(many.errors) == 1, "get_users returns the found and errors the missing")

    timeline = lambda **kw: client.get_users_tweets(me.id, tweet_fields=FIELDS, expansions=["author_id"], **kw)
    first = wait_for(lambda: ids(timeline(max_results=100)), 20)
    check(in_order(first, True), "the timeline is newest first")

    # Every post's author is in includes.users, once, identical to the lookup.
    page = timeline(max_results=100)
    users = {u.id: u for u in page.includes["users"]}
    check(all(t.author_id in users for t in page.data), "expansions=author_id: every author is included")
    check(len(users) == len(page.includes["users"]), "each author is included once")
    one = page.data[0]
    check(one.conversation_id == one.id and one.lang == "en", "tweet.fields: conversation_id and lang")
    check(isinstance(one.created_at, datetime) and one.public_metrics is not None, "created_at and public_metrics")
    looked_up = client.get_user(id=one.author_id).data
    check(users[one.author_id].data == looked_up.data, "the included author is the looked-up user")

    newest = max(first, key=int)
    polled = poll(lambda cursor: ids(timeline(since_id=cursor, max_results=100)), newest, newest_first=True)
    top = max(polled, key=int)
    back = page_back(lambda cursor: ids(timeline(until_id=cursor, max_results=10)), top)

    # The Paginator, both ways, over a fixed window: forward with next_token...
    forward = list(tweepy.Paginator(client.get_users_tweets, me.id, until_id=top, max_results=5, limit=4))
    check(len(forward) == 4, "the Paginator followed next_token over 4 pages")
    walked = [i for r in forward for i in ids(r)]
    check(in_order(walked, True), "forward pages join newest first without overlap")
    # ... and back up from the last page with previous_token.
    token = forward[-1].meta["previous_token"]
    backward = list(reversed(tweepy.Paginator(client.get_users_tweets, me.id, until_id=top, max_results=5,
                                              pagination_token=token, limit=3)))
    check(len(backward) == 3, "reversed(Paginator) followed previous_token over 3 pages")
    up = [i for r in backward for i in ids(r)]
    check(all(int(i) < int(top) for i in up), "previous pages stay below until_id")
    contains_all(up, [i for r in forward[:3] for i in ids(r)], "reversed Paginator")

    # start_time/end_time bound created_at (tweepy sends whole seconds), over
    # the two seconds before the newest post: the simulator has posted for longer.
    newest_post = timeline(max_results=5).data[0]
    end = newest_post.created_at.replace(microsecond=0)
    start = end - timedelta(seconds=2)
    bounded = client.get_users_tweets(me.id, start_time=start, end_time=end, max_results=100,
                                      tweet_fields=["created_at"])
    check(bool(bounded.data) and all(start <= t.created_at < end for t in bounded.data),
          "start_time/end_time bound created_at")

    # Recent search: end_time defaults to 30 s before the request.
    asked = datetime.now(timezone.utc)
    found = client.search_recent_tweets("snowleak", max_results=100, tweet_fields=["created_at"])
    check(all(t.created_at <= asked - timedelta(seconds=29) for t in found.data or []),
          "recent search returns nothing from the last 30 s")
    recent = client.search_recent_tweets("snowleak", end_time=asked, max_results=100, tweet_fields=["created_at"])
    # Both pages may be full (the simulator starts with a backlog): compare the newest post, not counts.
    check(any(t.created_at > asked - timedelta(seconds=29) for t in recent.data or []),
          "an explicit end_time returns the last 30 s too")
    print(f"all checks passed ({len(polled)} polled, {len(back)} paged back, {len(walked)} paginated)")


if __name__ == "__main__":
    main()
