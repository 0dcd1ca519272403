"""The published polling programs judged by run_published.py, each as it is
installed from its registry and run by a user: its configuration (written
from the server and token `experiment judge` gives), the command a user runs,
and a reader of what the program itself stored (its own output), which the
independent check compares with the truth.

Each program is pointed at the judge's server with a base-URL option of its
own (its configuration file) or, when it has none, by sitecustomize.py in
this folder (PYTHONPATH), which sends its requests for the real API host to
the server. Nothing else of the program is changed. docs/clients.md has the
endpoint and the cursor of each, with the line of its code.
"""

import glob
import json
import os
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


# The label of own_timelines() for a program that polls one timeline.
ANY = "*"


def _newest(ids):
    return str(max(ids)) if ids else None


def _json_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Program:
    """One published program: NAME is its PyPI package, pinned by pins/NAME.txt."""

    name = ""
    profile = ""
    # Serve options the program needs beside the run's own (see each program).
    serve = []
    # Statuses a second on the busy timeline: one it keeps up with.
    rate = 20
    # Whether it is redirected by sitecustomize.py (no base-URL option).
    redirected = False
    # "loop": the program runs once per call and a user runs it every second
    # (cron, a shell loop); "daemon": it polls by itself.
    mode = "loop"

    def __init__(self, venv, out):
        self.venv, self.out = venv, out

    def bin(self, script):
        return os.path.join(self.venv, "bin", script)

    def configure(self, base_url, token):
        """Writes the program's configuration; returns its extra environment."""
        return {}

    def command(self):
        """The command a user runs (once, in loop mode)."""
        raise NotImplementedError

    def after(self, stdout):
        """What a user's loop does with one run's output (loop mode)."""

    def own_ids(self):
        """The status IDs the program stored: its own output."""
        raise NotImplementedError

    def own_timelines(self):
        """The status IDs the program stored, by the timeline it read them
        from (the judge's poller label: `home`, `tag:NAME`); ANY: one
        timeline, whichever label the judge gives it."""
        return {ANY: self.own_ids()}


class KabiDiscordCli(Program):
    """kabi-discord-cli: `discord dc tail CHANNEL` polls a channel's messages
    with `after` = the last message ID it kept, stores them in SQLite."""

    name, profile, redirected, mode = "kabi-discord-cli", "discord", True, "daemon"
    CHANNEL = "2"  # the simulator's one channel

    def configure(self, base_url, token):
        return {"DISCORD_TOKEN": token, "DB_PATH": os.path.join(self.out, "messages.db")}

    def command(self):
        return [self.bin("discord"), "dc", "tail", self.CHANNEL, "--interval", "1"]

    def own_ids(self):
        path = os.path.join(self.out, "messages.db")
        if not os.path.exists(path):
            return set()
        db = sqlite3.connect(path)
        rows = db.execute("SELECT msg_id FROM messages WHERE channel_id = ?", (self.CHANNEL,))
        return {str(r[0]) for r in rows}


class MastoMailoInator(Program):
    """masto-mailo-inator: `masto-mailo-inator get` reads the home timeline
    (and followed tags) with `min_id` = the last toot ID it stored, writes each
    toot as a mail into a Maildir."""

    name, profile = "masto-mailo-inator", "mastodon"
    # For every toot it stores it makes a new Mastodon.py client, which asks
    # for the instance, and asks verify_credentials (get.py:317,
    # masto_instance().me()): a few toots a second at most, so a home
    # timeline of 2 a second, which it keeps up with.
    rate = 8

    tags = []

    def configure(self, base_url, token):
        home = os.path.join(self.out, "home")
        config = os.path.join(home, ".config", "masto-mailo-inator")
        state = os.path.join(home, ".local", "state", "masto-mailo-inator")
        os.makedirs(config, exist_ok=True)
        os.makedirs(state, exist_ok=True)
        # Mastodon.py's access-token file: the token, then the base URL.
        with open(os.path.join(state, "oauth"), "w") as f:
            f.write(f"{token}\n{base_url}\n")
        with open(os.path.join(config, "config.toml"), "w") as f:
            f.write(f'instance = "{base_url}"\ndir = "{self.out}/Mail"\n'
                    f'followed_tags = {json.dumps(self.tags)}\n')
        return {"HOME": home}

    def command(self):
        return [self.bin("masto-mailo-inator"), "get"]

    def own_ids(self):
        return set().union(*self.own_timelines().values())

    def own_timelines(self):
        # One Maildir a timeline: Mail/home, Mail/tag/NAME; each mail is named
        # toot.READER.AUTHOR.STATUS_ID (get.py, mail_filename).
        def ids(maildir):
            mails = [m for sub in ("new", "cur")
                     for m in glob.glob(os.path.join(self.out, "Mail", maildir, sub, "toot.*"))]
            return {os.path.basename(m).split(".")[3].split(":")[0] for m in mails}
        return {"home": ids("home"), **{f"tag:{t}": ids(os.path.join("tag", t)) for t in self.tags}}


class MastoMailoInatorTag(MastoMailoInator):
    """masto-mailo-inator following the tag #snowleak as well: two timelines
    (home and the tag), each with its own `min_id`, one token."""

    tags = ["snowleak"]


class Toot(Program):
    """toot: `toot timelines home --json --min-id ID` prints one page of the
    home timeline above ID; a user's loop passes the newest ID toot printed."""

    name, profile = "toot", "mastodon"

    def configure(self, base_url, token):
        host = base_url.split("://", 1)[1]
        config = os.path.join(self.out, "config")
        os.makedirs(os.path.join(config, "toot"), exist_ok=True)
        with open(os.path.join(config, "toot", "config.json"), "w") as f:
            json.dump({
                "apps": {host: {"instance": host, "base_url": base_url,
                                "client_id": "snowleak", "client_secret": "snowleak"}},
                "users": {f"snowleak@{host}": {"instance": host, "username": "snowleak",
                                               "access_token": token}},
                "active_user": f"snowleak@{host}",
            }, f)
        return {"XDG_CONFIG_HOME": config}

    def pages(self):
        return os.path.join(self.out, "statuses.jsonl")

    def command(self):
        newest = _newest([int(i) for i in self.own_ids()])
        cursor = ["--min-id", newest] if newest else []
        return [self.bin("toot"), "timelines", "home", "--json", "--limit", "40", *cursor]

    def after(self, stdout):
        # One printed page a line: the user's loop keeps what toot printed.
        with open(self.pages(), "a") as f:
            f.write(json.dumps(json.loads(stdout)) + "\n")

    def own_ids(self):
        return {str(s["id"]) for page in _json_lines(self.pages()) for s in page}


class Twarc2Search(Program):
    """twarc2: `twarc2 search --since-id ID QUERY FILE` archives X API v2
    recent search above ID (all pages); a user's loop passes the newest ID in
    the archive. The simulator's 30 s end lag of recent search is set to 0:
    the judge does not map it to a scope yet (docs/judging.md), so statuses
    of the last 30 s would count as lost."""

    name, profile, redirected = "twarc", "twitter", True
    serve = ["--set", "search_end_lag_ms=0"]

    def archive(self):
        return os.path.join(self.out, "tweets.jsonl")

    def configure(self, base_url, token):
        self.token = token
        return {}

    def command(self):
        newest = _newest([int(i) for i in self.own_ids()])
        cursor = ["--since-id", newest] if newest else []
        return [self.bin("twarc2"), "--bearer-token", self.token, "search", *cursor,
                "snowleak", os.path.join(self.out, "page.jsonl")]

    def after(self, stdout):
        # The page file of one run goes on the archive, as a user's loop does.
        page = os.path.join(self.out, "page.jsonl")
        if os.path.exists(page):
            with open(page) as f, open(self.archive(), "a") as archive:
                archive.write(f.read())
            os.remove(page)

    def own_ids(self):
        return {str(t["id"]) for response in _json_lines(self.archive())
                for t in response.get("data", [])}


class TwarcV1Home(Twarc2Search):
    """twarc (v1 command): `twarc timeline --since_id ID` reads Twitter v1.1's
    home timeline above ID - 1, signed with OAuth 1.0a; a user's loop passes
    the newest ID in its output. Its `twarc` command imports `six`, which
    twarc 2.14.0 does not declare: installed beside it."""

    name, profile, redirected = "twarc", "twitter", True
    serve = []
    extra = ["six==1.17.0"]

    def configure(self, base_url, token):
        self.token = token
        return {}

    def command(self):
        newest = _newest([int(i) for i in self.own_ids()])
        cursor = ["--since_id", newest] if newest else []
        return [self.bin("twarc"), "--consumer_key", "snowleak-consumer-key",
                "--consumer_secret", "snowleak-consumer-secret", "--access_token", self.token,
                "--access_token_secret", "snowleak-token-secret", *cursor,
                "--output", os.path.join(self.out, "page.jsonl"), "timeline"]

    def own_ids(self):
        return {str(t["id_str"]) for t in _json_lines(self.archive())}


class TwitterToSqlite(Program):
    """twitter-to-sqlite: `twitter-to-sqlite home-timeline DB --since` reads
    Twitter v1.1's home timeline above the since_id it stored in DB (table
    since_ids), signed with OAuth 1.0a, tweets into DB."""

    name, profile, redirected = "twitter-to-sqlite", "twitter", True

    def configure(self, base_url, token):
        self.auth = os.path.join(self.out, "auth.json")
        with open(self.auth, "w") as f:
            json.dump({"api_key": "snowleak-consumer-key",
                       "api_secret_key": "snowleak-consumer-secret",
                       "access_token": token, "access_token_secret": "snowleak-token-secret"}, f)
        return {}

    def command(self):
        return [self.bin("twitter-to-sqlite"), "home-timeline",
                os.path.join(self.out, "tweets.db"), "-a", self.auth, "--since"]

    def own_ids(self):
        path = os.path.join(self.out, "tweets.db")
        if not os.path.exists(path):
            return set()
        return {str(r[0]) for r in sqlite3.connect(path).execute("SELECT id FROM tweets")}


# By the name run_published.py and launch.py use.
PROGRAMS = {
    "kabi-discord-cli": KabiDiscordCli,
    "masto-mailo-inator": MastoMailoInator,
    "masto-mailo-inator-tag": MastoMailoInatorTag,
    "toot": Toot,
    "twarc2": Twarc2Search,
    "twarc-v1": TwarcV1Home,
    "twitter-to-sqlite": TwitterToSqlite,
}


def program(name, venv, out):
    return PROGRAMS[name](venv, out)


if __name__ == "__main__":
    sys.exit("import this module: run_published.py and launch.py use it")
