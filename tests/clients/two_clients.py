#!/usr/bin/env python3
"""Two clients polling at once, with two credentials: the naive Mastodon.py
loop with the judge's token, and the loop k behind with the token in
SNOWLEAK_SECOND_TOKEN (named `second` by the judge's `--client`). Each
writes its own output: OUT_FILE.command and OUT_FILE.second. Run by
`experiment judge`; see run_judged.py."""

import os
import subprocess
import sys

from judgedlib import args

HERE = os.path.dirname(os.path.abspath(__file__))
out, rounds = args()
second = {**os.environ, "SNOWLEAK_TOKEN": os.environ["SNOWLEAK_SECOND_TOKEN"]}
loops = [
    subprocess.Popen([sys.executable, os.path.join(HERE, "mastodon_since_id.py"), f"{out}.command", str(rounds)]),
    subprocess.Popen([sys.executable, os.path.join(HERE, "mastodon_k_behind.py"), f"{out}.second", str(rounds)],
                     env=second),
]
sys.exit(max(loop.wait() for loop in loops))
