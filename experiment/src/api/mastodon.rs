//! Mastodon's client side [docs/api-facts.md 1]: `GET /api/v1/timelines/...`
//! with `since_id` and `max_id` (both exclusive) and `limit` <= 40, a bearer
//! token in `MASTODON_ACCESS_TOKEN`, statuses as a JSON array, rate limits in
//! `X-RateLimit-*` with an ISO 8601 reset [1.5], and `--target
//! mastodon:https://HOST` with `--timeline`.

use super::common::{
    Api, Auth, Dialect, HttpRequest, ItemFields, RateHeaders, Resolved, TargetOptions, TargetSpec,
    base_url, url_in_target,
};
use since_id::id::Layout;
use since_id::poller::PageRequest;

/// Mastodon.
pub const API: Api = Api {
    kind: "mastodon",
    specs: &["mastodon:https://HOST"],
    token_env: "MASTODON_ACCESS_TOKEN",
    auth: Auth::Header { scheme: "Bearer" },
    // The timelines' largest `limit` [1.1].
    max_limit: 40,
    // A status's fields [1.4].
    item: ItemFields {
        id: "id",
        integer_id: None,
        created_at: "created_at",
        author: "/account/acct",
    },
    // The reset is an ISO 8601 time [1.5].
    rate_headers: Some(RateHeaders {
        limit: "x-ratelimit-limit",
        remaining: "x-ratelimit-remaining",
        reset: "x-ratelimit-reset",
        reset_after: None,
    }),
    // `mastodon:https://HOST`.
    parse_spec: |spec| {
        Ok(TargetSpec::Mastodon {
            base: base_url(spec)?,
        })
    },
};
/// The `--timeline` values, besides `tag:NAME` and `list:ID`.
const TIMELINES: [&str; 4] = ["public", "local", "remote", "home"];

/// The request for a page of `timeline`.
pub fn build(timeline: &str, layout: &Layout, req: &PageRequest, limit: usize) -> HttpRequest {
    // since_id returns the *newest* `limit` statuses above it: with more new
    // statuses than a page, the middle is silently dropped [docs/api-facts.md 1.2]. The
    // poller sees the full page and pages back with max_id (exclusive) until
    // a page is not full, which fills that middle in.
    let (path, mut query) = timeline_path(timeline);
    query.push(("limit".into(), limit.to_string()));
    if let Some(since) = req.since {
        query.push(("since_id".into(), layout.format(since)));
    }
    if let Some(before) = req.before {
        query.push(("max_id".into(), layout.format(before)));
    }
    HttpRequest {
        post: false,
        path,
        query,
        json_body: None,
    }
}

/// Whether the timeline holds local statuses only.
pub fn local_only(timeline: &str) -> bool {
    timeline == "local"
}

fn timeline_path(timeline: &str) -> (String, Vec<(String, String)>) {
    let flag = |k: &str| vec![(k.to_string(), "true".to_string())];
    match timeline {
        "local" => ("/api/v1/timelines/public".into(), flag("local")),
        "remote" => ("/api/v1/timelines/public".into(), flag("remote")),
        "home" => ("/api/v1/timelines/home".into(), vec![]),
        other => {
            if let Some(tag) = other.strip_prefix("tag:") {
                (format!("/api/v1/timelines/tag/{tag}"), vec![])
            } else if let Some(list) = other.strip_prefix("list:") {
                (format!("/api/v1/timelines/list/{list}"), vec![])
            } else {
                ("/api/v1/timelines/public".into(), vec![])
            }
        }
    }
}

/// The dialect for `--target mastodon:HOST` and its options.
pub fn resolve(
    host: &str,
    opts: &TargetOptions,
    layout: Option<Layout>,
) -> Result<Resolved, String> {
    let timeline = opts.timeline.clone().unwrap_or_else(|| "public".into());
    let named = TIMELINES.contains(&timeline.as_str());
    let tagged = timeline
        .strip_prefix("tag:")
        .or(timeline.strip_prefix("list:"))
        .is_some_and(|rest| !rest.is_empty() && !rest.contains(['/', '?', '#', '&']));
    if !named && !tagged {
        return Err(format!(
            "bad --timeline '{timeline}' for mastodon: expected public, local, remote, home, tag:NAME or list:ID"
        ));
    }
    url_in_target(opts, "mastodon")?;
    Ok(Resolved {
        base: host.to_string(),
        dialect: Dialect::Mastodon { timeline },
        layout: Some(layout.unwrap_or_else(|| "mastodon".parse().expect("known layout"))),
    })
}
