"""Sends a published program's HTTPS requests for a real API host to the
simulator at SNOWLEAK_BASE_URL instead, for programs that have no base-URL
option of their own. Nothing else of the request changes: its path, query,
headers (an OAuth 1.0a signature over the real host stays as signed) and body
go to the simulator as the program made them.

Python imports a module named `sitecustomize` at start-up from sys.path
(https://docs.python.org/3/library/site.html), so putting this folder on
PYTHONPATH is the whole redirect. Hooks are placed on the transport layer of
requests (HTTPAdapter.send) and httpx (HTTPTransport / AsyncHTTPTransport),
below every session, retry and signing layer of the program.
"""

import os
import urllib.parse

# The hosts of the APIs the simulator speaks (X/Twitter, Mastodon instances a
# program hard-codes, Discord).
HOSTS = {"api.twitter.com", "api.x.com", "discord.com", "discordapp.com"}
BASE = os.environ.get("SNOWLEAK_BASE_URL", "")


def _rewritten(url):
    parts = urllib.parse.urlsplit(url)
    if not BASE or parts.hostname not in HOSTS:
        return url
    base = urllib.parse.urlsplit(BASE)
    return urllib.parse.urlunsplit((base.scheme, base.netloc, parts.path, parts.query, parts.fragment))


def _patch_requests():
    try:
        from requests.adapters import HTTPAdapter
    except ImportError:
        return
    send = HTTPAdapter.send

    def redirected_send(self, request, *args, **kwargs):
        request.url = _rewritten(request.url)
        return send(self, request, *args, **kwargs)

    HTTPAdapter.send = redirected_send


def _patch_httpx():
    try:
        import httpx
    except ImportError:
        return

    def moved(request):
        url = _rewritten(str(request.url))
        if url != str(request.url):
            request.url = httpx.URL(url)
            request.headers["Host"] = request.url.netloc.decode()

    sync, async_ = httpx.HTTPTransport.handle_request, httpx.AsyncHTTPTransport.handle_async_request

    def handle_request(self, request):
        moved(request)
        return sync(self, request)

    async def handle_async_request(self, request):
        moved(request)
        return await async_(self, request)

    httpx.HTTPTransport.handle_request = handle_request
    httpx.AsyncHTTPTransport.handle_async_request = handle_async_request


if BASE:
    _patch_requests()
    _patch_httpx()
