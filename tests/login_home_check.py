#!/usr/bin/env python3
"""The calls a new user's client makes before it polls, made by client
libraries none of us wrote (pinned in .ci/run), unmodified: who am I, then
the home timeline, which serves the authors the reader follows and no one
else.

    experiment serve --profile mastodon --set rate_per_s=20 &
    python3 tests/login_home_check.py mastodon http://127.0.0.1:8080

DIALECT is mastodon (Mastodon.py: account_verify_credentials,
timeline_home), misskey (Misskey.py: i, notes_timeline), twitter (tweepy:
v1.1 verify_credentials and home_timeline, v2 get_home_timeline) or discord
(discord.py: fetch_guilds, fetch_channels, a channel's history).
"""

import asyncio
import sys

from checklib import check, wait_for


def order(item_id):
    """IDs compare as numbers when they are digits, else as text (aidx)."""
    text = str(item_id)
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def down_to(oldest, first, below):
    """The whole timeline from its newest page down past `oldest`."""
    every = first()
    while every and order(every[-1][1]) > order(oldest):
        page = [s for s in below(every[-1][1]) if s[1] != every[-1][1]]
        if not page:
            break
        every += page
    return [s for s, _ in every]


def followed(home, every, key, author, what):
    """Home serves statuses of the timeline (`every`, paged down at least as
    far as home's oldest) by some of its authors, not all of them: the
    authors the reader follows."""
    oldest = min(order(key(s)) for s in home)
    window = [s for s in every if order(key(s)) >= oldest]
    check({key(s) for s in home} <= {key(s) for s in every}, f"{what}: every home status is on the timeline")
    mine, theirs = {author(s) for s in home}, {author(s) for s in window}
    check(mine and mine < theirs, f"{what}: home serves {len(mine)} of the {len(theirs)} authors posting then")


def mastodon(base):
    from mastodon import Mastodon

    api = Mastodon(api_base_url=base, access_token="not-a-token", request_timeout=10)
    me = api.account_verify_credentials()
    check(me.username == "snowleak", "verify_credentials returns the reader")
    home = wait_for(lambda: api.timeline_home(limit=40), 10)
    pairs = lambda page: [(s, s.id) for s in page]
    public = down_to(home[-1].id, lambda: pairs(api.timeline_public(limit=40)),
                     lambda below: pairs(api.timeline_public(limit=40, max_id=below)))
    followed(home, public, lambda s: s.id, lambda s: s.account.username, "Mastodon.py")
    newer = api.timeline_home(since_id=home[-1].id, limit=40)
    check(all(s.id > home[-1].id for s in newer), "timeline_home(since_id=) polls above the cursor")


def misskey(base):
    from misskey import Misskey

    api = Misskey(base, i="not-a-token")
    check(api.i()["username"] == "snowleak", "i returns the reader")
    home = wait_for(lambda: api.notes_timeline(limit=100, with_files=False), 10)
    pairs = lambda page: [(n, n["id"]) for n in page]
    every = down_to(home[-1]["id"], lambda: pairs(api.notes_global_timeline(limit=100, with_files=False)),
                    lambda below: pairs(api.notes_global_timeline(limit=100, with_files=False, until_id=below)))
    followed(home, every, lambda n: n["id"], lambda n: n["user"]["username"], "Misskey.py")
    newer = api.notes_timeline(since_id=home[-1]["id"], limit=100, with_files=False)
    check(all(n["id"] > home[-1]["id"] for n in newer), "notes_timeline(since_id=) polls above the cursor")


def twitter(base):
    import tweepy
    from tweepy_check import ToSimulator

    auth = tweepy.OAuth1UserHandler("key", "secret", "token", "token-secret")
    v1 = tweepy.API(auth, wait_on_rate_limit=True)
    v1.session.mount("https://api.twitter.com", ToSimulator(base))
    check(v1.verify_credentials().screen_name == "snowleak", "v1.1 verify_credentials returns the reader")
    home = wait_for(lambda: v1.home_timeline(count=200), 10)
    pairs = lambda page: [(t, t.id) for t in page]
    every = down_to(home[-1].id, lambda: pairs(v1.list_timeline(list_id=1, count=200)),
                    lambda below: pairs(v1.list_timeline(list_id=1, count=200, max_id=below)))
    followed(home, every, lambda t: t.id, lambda t: t.user.screen_name, "tweepy v1.1")

    # An OAuth 2.0 user token goes where tweepy takes it: bearer_token.
    v2 = tweepy.Client(bearer_token="not-a-token", wait_on_rate_limit=True)
    v2.session.mount("https://api.twitter.com", ToSimulator(base))
    page = wait_for(lambda: v2.get_home_timeline(user_auth=False, max_results=100,
                                                 expansions=["author_id"]).data or [], 10)
    check(len(page) > 0, f"tweepy v2 get_home_timeline: {len(page)} posts")


def discord_(base):
    import discord

    discord.http.Route.BASE = f"{base}/api/v10"

    async def run():
        client = discord.Client(intents=discord.Intents.none())
        await client.login("not-a-token")
        try:
            guilds = [g async for g in client.fetch_guilds()]
            check(len(guilds) == 1, "fetch_guilds finds the guild")
            channels = await guilds[0].fetch_channels()
            check(len(channels) == 1 and isinstance(channels[0], discord.TextChannel),
                  "fetch_channels finds its text channel")
            messages = [m async for m in channels[0].history(limit=10)]
            check(len(messages) > 0, f"the channel's history: {len(messages)} messages")
        finally:
            await client.close()

    asyncio.run(run())


def main():
    dialect, base = sys.argv[1], sys.argv[2]
    {"mastodon": mastodon, "misskey": misskey, "twitter": twitter, "discord": discord_}[dialect](base)
    print(f"ok: {dialect}: the login and home endpoints")


if __name__ == "__main__":
    main()
