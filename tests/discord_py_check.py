#!/usr/bin/env python3
"""Reads the simulator's Discord API with discord.py (pinned in .ci/run), a
client library none of us wrote: login (GET /users/@me and the application),
fetch_channel, a since_id poll with history(after=...), paging back with
history(before=...) across several requests, and the same window walked up
again with history(after=...).

    experiment serve --profile discord --set rate_per_s=20 --set delete_probability=0 &
    python3 tests/discord_py_check.py http://127.0.0.1:8080

discord.py parses a body only when its Content-Type is exactly
application/json, so every step here also checks the simulator's headers.
"""

import asyncio
import logging
import sys

import aiohttp
import discord

from checklib import check, contains_all, in_order

CHANNEL = 42


class RateLimitWarnings(logging.Handler):
    """Counts discord.py's "responded with 429. Retrying" warnings: proof that
    it took a 429 for Discord's (Via, retry_after) and waited it out."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):
        if "responded with 429" in record.getMessage():
            self.count += 1


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    discord.http.Route.BASE = f"{base}/api/v10"
    asyncio.run(run())


async def run():
    client = discord.Client(intents=discord.Intents.none())
    await client.login("not-a-token")
    try:
        await checks(client)
    finally:
        await client.close()


# discord.py is asynchronous, so the walks are written here with checklib's checks.
async def ids(iterator):
    return [str(m.id) async for m in iterator]


async def checks(client):
    check(client.user is not None and client.user.bot, "login read /users/@me: the bot user")
    channel = await client.fetch_channel(CHANNEL)
    check(channel.id == CHANNEL and isinstance(channel, discord.TextChannel), "fetch_channel returns a text channel")

    first = []
    for _ in range(120):
        first = await ids(channel.history(limit=100))
        if len(first) >= 100:
            break
        await asyncio.sleep(0.5)
    check(len(first) >= 100, f"the simulator posted ({len(first)} messages)")
    check(in_order(first, True), "history() is newest first")

    # A since_id poll: history(after=cursor) returns everything above it, oldest first.
    cursor = first[0]
    seen = []
    for round_ in range(8):
        await asyncio.sleep(0.5)
        got = await ids(channel.history(limit=None, after=discord.Object(id=int(cursor))))
        check(all(int(i) > int(cursor) for i in got), f"poll {round_ + 1}: every message is above the cursor")
        check(in_order(got, False), f"poll {round_ + 1}: {len(got)} messages oldest first")
        check(not set(got) & set(seen), f"poll {round_ + 1}: nothing seen twice")
        seen.extend(got)
        cursor = got[-1] if got else cursor
    check(len(seen) > 0, f"polling with after= saw new messages ({len(seen)})")

    # Back down over several requests of 100, then up again over the same window.
    top = int(cursor)
    down = await ids(channel.history(limit=250, before=discord.Object(id=top)))
    check(len(down) >= min(250, len(first) + len(seen) - 1), f"history(before=) paged back {len(down)} messages")
    check(in_order(down, True) and all(int(i) < top for i in down), "paged back newest first, below the cursor")
    bottom = int(down[-1])
    up = await ids(channel.history(limit=None, after=discord.Object(id=bottom), before=discord.Object(id=top)))
    check(in_order(up, False), "history(after=, before=) walks up oldest first")
    contains_all(up, down[:-1], "walking up again")

    user = await client.fetch_user(1_000_003)
    check(user.name == "user3", "fetch_user returns the author seen in messages")

    # Spend the rate-limit window from another session, so that discord.py
    # meets a 429 it did not foresee (CI serves with --rate-limit 20/1s).
    warnings = RateLimitWarnings()
    logging.getLogger("discord.http").addHandler(warnings)
    base = discord.http.Route.BASE
    async with aiohttp.ClientSession() as other:
        for _ in range(5):
            for _ in range(25):
                async with other.get(f"{base}/users/@me") as response:
                    await response.read()
            after_429 = await ids(channel.history(limit=5))
            check(len(after_429) == 5, "history() answered after the spent window")
            if warnings.count:
                break
    check(warnings.count > 0, f"discord.py met {warnings.count} 429(s) and waited retry_after")
    authors = {m.author.id: m.author.name async for m in channel.history(limit=50)}
    check(all(name == f"user{i - 1_000_000}" for i, name in authors.items()), "one author per ID in messages")
    print(f"all checks passed ({len(seen)} polled, {len(down)} paged back, {len(up)} walked up)")


if __name__ == "__main__":
    main()
