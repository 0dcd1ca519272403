#!/usr/bin/env python3
"""A naive discord.py loop: history(after=the newest message seen), every
0.2 s, in one channel, without the gateway (login reads /users/@me; the rest
is REST). discord.py pages `after` oldest first until the channel is read.
Run by `experiment judge`; see run_judged.py."""

import asyncio

import discord

from judgedlib import Served, args, server

CHANNEL = 42


async def main():
    base, token = server()
    out, rounds = args()
    discord.http.Route.BASE = f"{base}/api/v10"
    client = discord.Client(intents=discord.Intents.none())
    await client.login(token)
    try:
        channel = await client.fetch_channel(CHANNEL)
        served = Served(out)
        since = None
        for _ in range(rounds):
            after = discord.Object(id=since) if since else None

            async def fetch():
                return [m.id async for m in channel.history(limit=None if since else 100, after=after)]

            page = await served.request_async(fetch)
            if page:
                since = max(int(i) for i in page)
            await asyncio.sleep(0.2)
    finally:
        await client.close()


asyncio.run(main())
