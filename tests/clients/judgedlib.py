"""What the judged client programs share: where the judge's server is, and
the client's own record of what it was served (one JSON line per request:
its send time in ms and the IDs served), which the independent check reads.
"""

import json
import os
import sys
import time


def server():
    """The base URL and the token `experiment judge` gives the command."""
    return os.environ["SNOWLEAK_BASE_URL"], os.environ["SNOWLEAK_TOKEN"]


class Served:
    """The client's own output: every request's send time and the IDs it got."""

    def __init__(self, path):
        self.out = open(path, "w")

    def request(self, fetch):
        sent = int(time.time() * 1000)
        ids = [str(i) for i in fetch()]
        self.out.write(json.dumps({"sent": sent, "ids": ids}) + "\n")
        self.out.flush()
        return ids

    async def request_async(self, fetch):
        sent = int(time.time() * 1000)
        ids = [str(i) for i in await fetch()]
        self.out.write(json.dumps({"sent": sent, "ids": ids}) + "\n")
        self.out.flush()
        return ids


def args():
    """OUT_FILE ROUNDS from the command line."""
    return sys.argv[1], int(sys.argv[2])
