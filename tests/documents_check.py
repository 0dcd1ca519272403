#!/usr/bin/env python3
"""The fields where published programs stopped (issue 33), read through the
client libraries they use (pinned in .ci/run), unmodified:

- X v2 (tweepy.Client): `expansions=author_id` without `author_id` in
  `tweet_fields`: each post's `author_id`, and its author in `includes`;
- Twitter v1.1 (tweepy.API): `verify_credentials().description` and the
  user fields of the tweets, `tweet_mode="extended"`'s `full_text`;
- Mastodon (Mastodon.py): the instance's `configuration.media_attachments`
  and `polls`, v2's `api_versions`, `notifications` (paged with its Link
  header), `preferences`.

    experiment serve --profile twitter --set rate_per_s=20 &
    python3 tests/documents_check.py twitter http://127.0.0.1:8080

DIALECT is twitter or mastodon.
"""

import sys

from checklib import check, wait_for


def twitter(base):
    import tweepy
    from tweepy_check import ToSimulator

    v2 = tweepy.Client(bearer_token="not-a-token", wait_on_rate_limit=True)
    v2.session.mount("https://api.twitter.com", ToSimulator(base))
    wait_for(lambda: v2.get_users_tweets(1, max_results=10).data or [], 10)
    page = v2.get_users_tweets(1, max_results=10, expansions=["author_id"])
    authors = {u.id: u for u in page.includes["users"]}
    check(page.data and all(t.author_id in authors for t in page.data),
          "v2: expansions=author_id alone puts author_id in each post, its author in includes")

    auth = tweepy.OAuth1UserHandler("key", "secret", "token", "token-secret")
    v1 = tweepy.API(auth, wait_on_rate_limit=True)
    v1.session.mount("https://api.twitter.com", ToSimulator(base))
    me = v1.verify_credentials()
    check(me.description == "" and me.listed_count == 0 and me.url is None and me.friends_count > 0,
          "v1.1: verify_credentials' description, url, listed_count, friends_count")
    tweets = v1.list_timeline(list_id=1, count=20, tweet_mode="extended")
    check(tweets and all(t.display_text_range == [0, len(t.full_text)] for t in tweets),
          "v1.1: tweet_mode=extended's full_text and display_text_range")
    check(all(t.source and t.user.followers_count == 0 and t.entities["hashtags"] == [] for t in tweets),
          "v1.1: the tweets' source, entities and users")


def mastodon(base):
    from mastodon import Mastodon

    api = Mastodon(api_base_url=base, access_token="not-a-token", request_timeout=10)
    v1 = api.instance_v1()
    check(v1.configuration.media_attachments.supported_mime_types and v1.configuration.polls.max_options,
          "instance v1: configuration.media_attachments and polls")
    v2 = api.instance_v2()
    check(v2.api_versions.mastodon >= 2, "instance v2: api_versions")
    first = api.notifications(limit=2)
    rest = api.fetch_next(first)
    check(len(first) == 2 and rest and len(first) + len(rest) == 3, "notifications: paged over the Link header")
    check(api.preferences()["posting:default:visibility"] == "public", "preferences")


def main():
    dialect, base = sys.argv[1], sys.argv[2]
    {"twitter": twitter, "mastodon": mastodon}[dialect](base)
    print(f"all checks passed ({dialect})")


if __name__ == "__main__":
    main()
