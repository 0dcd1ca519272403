//! X API v2's client side [docs/api-facts.md 2.3]: `GET /2/users/{id}/tweets`
//! or `GET /2/tweets/search/recent` with `since_id` and `until_id` (both
//! exclusive) and `max_results` 5 (search: 10) to 100, a bearer token in
//! `X_BEARER_TOKEN`, posts under `data` in a JSON object (absent when empty),
//! Twitter's `x-rate-limit-*` headers, and `--target x:users/ID/tweets` or
//! `x:search?query=...` against `https://api.x.com` (or `--base-url`).

use super::common::{
    Api, Auth, Dialect, HttpRequest, ItemFields, Resolved, TargetOptions, TargetSpec, XEndpoint,
    base_or, excerpt, refuse,
};
use serde_json::Value;
use since_id::id::Layout;
use since_id::poller::PageRequest;

/// X API v2.
pub const API: Api = Api {
    kind: "x",
    specs: &["x:users/ID/tweets", "x:search?query=..."],
    token_env: "X_BEARER_TOKEN",
    auth: Auth::Header { scheme: "Bearer" },
    // The largest `max_results`.
    max_limit: 100,
    // A post's fields, with `tweet.fields=created_at,author_id`.
    item: ItemFields {
        id: "id",
        integer_id: None,
        created_at: "created_at",
        author: "/author_id",
    },
    // The same headers as v1.1's.
    rate_headers: Some(super::twitter::RATE_HEADERS),
    parse_spec,
};
/// The default base URL of X's API v2 (`--base-url` overrides it).
pub const BASE: &str = "https://api.x.com";

/// The smallest `max_results` X accepts: 5, or 10 for search.
pub fn min_limit(endpoint: &XEndpoint) -> usize {
    match endpoint {
        XEndpoint::UserTweets { .. } => 5,
        XEndpoint::SearchRecent { .. } => 10,
    }
}

/// The request for a page of `endpoint`.
pub fn build(
    endpoint: &XEndpoint,
    layout: &Layout,
    req: &PageRequest,
    limit: usize,
) -> HttpRequest {
    let (path, mut query) = match endpoint {
        XEndpoint::UserTweets { user_id } => (format!("/2/users/{user_id}/tweets"), vec![]),
        XEndpoint::SearchRecent { query } => (
            "/2/tweets/search/recent".to_string(),
            vec![("query".to_string(), query.clone())],
        ),
    };
    query.push(("max_results".into(), limit.to_string()));
    query.push(("tweet.fields".into(), "created_at,author_id".into()));
    if let Some(since) = req.since {
        query.push(("since_id".into(), layout.format(since)));
    }
    // until_id is exclusive, exactly our `before`. Paging back with it
    // instead of `pagination_token` keeps each request self-contained
    // (X's recipe keeps since_id fixed and follows next_token, which
    // walks the same window downwards).
    if let Some(before) = req.before {
        query.push(("until_id".into(), layout.format(before)));
    }
    HttpRequest {
        post: false,
        path,
        query,
        json_body: None,
    }
}

/// How many posts `data` holds, without building them (0 if it does not parse).
pub fn count_entries(body: &[u8]) -> usize {
    use serde::de::IgnoredAny;
    #[derive(serde::Deserialize)]
    struct XPage {
        data: Option<Vec<IgnoredAny>>,
    }
    serde_json::from_slice::<XPage>(body)
        .ok()
        .and_then(|page| page.data)
        .map_or(0, |data| data.len())
}

/// The posts of a response: its `data` array.
pub fn entries(value: Value, body: &[u8]) -> Result<Vec<Value>, String> {
    match value {
        Value::Object(mut map) => match map.remove("data") {
            Some(Value::Array(entries)) => Ok(entries),
            Some(_) => Err("X response: `data` is not an array".into()),
            // An empty result has no `data`, only `meta.result_count: 0`.
            None if map.get("meta").is_some() && map.get("errors").is_none() => Ok(vec![]),
            None => Err(format!(
                "X response without data: {}",
                excerpt(&serde_json::to_vec(&map).unwrap_or_default())
            )),
        },
        _ => Err(format!("response is not a JSON object: {}", excerpt(body))),
    }
}

/// `x:users/ID/tweets` or `x:search?query=...`.
fn parse_spec(spec: &str) -> Result<TargetSpec, String> {
    if let Some(user) = spec
        .strip_prefix("users/")
        .and_then(|s| s.strip_suffix("/tweets"))
    {
        if user.is_empty() || !user.bytes().all(|b| b.is_ascii_digit()) {
            return Err("an X user ID is decimal".into());
        }
        return Ok(TargetSpec::X {
            endpoint: XEndpoint::UserTweets {
                user_id: user.to_string(),
            },
        });
    }
    if let Some(qs) = spec.strip_prefix("search?") {
        let url = reqwest::Url::parse(&format!("http://x/?{qs}"))
            .map_err(|_| "the search query string does not parse")?;
        let query = url
            .query_pairs()
            .find(|(k, _)| k == "query")
            .map(|(_, v)| v.into_owned())
            .filter(|q| !q.trim().is_empty())
            .ok_or("search needs query=...")?;
        return Ok(TargetSpec::X {
            endpoint: XEndpoint::SearchRecent { query },
        });
    }
    Err("X targets are users/ID/tweets or search?query=...".into())
}

/// The dialect for `--target x:...` and its options.
pub fn resolve(
    endpoint: &XEndpoint,
    opts: &TargetOptions,
    layout: Option<Layout>,
) -> Result<Resolved, String> {
    refuse("--timeline", opts.timeline.is_some(), "x")?;
    Ok(Resolved {
        base: base_or(opts, BASE)?,
        dialect: Dialect::X {
            endpoint: endpoint.clone(),
        },
        layout: Some(layout.unwrap_or_else(Layout::twitter)),
    })
}

#[cfg(test)]
mod tests {
    use super::XEndpoint;
    use crate::api::Dialect;
    use since_id::id::{Id, Layout};
    use since_id::poller::PageRequest;

    #[test]
    fn x_requests_use_exclusive_until_id_and_clamp_max_results() {
        let t = Layout::twitter();
        let search = Dialect::X {
            endpoint: XEndpoint::SearchRecent {
                query: "from:a -is:retweet".into(),
            },
        };
        let req = PageRequest {
            since: Some(Id(10)),
            before: Some(Id(20)),
            limit: 3,
        };
        let http = search.build(&t, &req);
        assert_eq!(http.path, "/2/tweets/search/recent");
        for pair in [
            ("query", "from:a -is:retweet"),
            ("max_results", "10"),
            ("since_id", "10"),
            ("until_id", "20"),
            ("tweet.fields", "created_at,author_id"),
        ] {
            assert!(
                http.query.contains(&(pair.0.into(), pair.1.into())),
                "{pair:?}"
            );
        }
        let user = Dialect::X {
            endpoint: XEndpoint::UserTweets {
                user_id: "42".into(),
            },
        };
        let http = user.build(
            &t,
            &PageRequest {
                since: None,
                before: None,
                limit: 500,
            },
        );
        assert_eq!(http.path, "/2/users/42/tweets");
        assert!(http.query.contains(&("max_results".into(), "100".into())));
        assert!(
            !http
                .query
                .iter()
                .any(|(k, _)| k == "since_id" || k == "until_id")
        );
        assert_eq!(user.page_limit(1), 5);
        // Errors without data are errors; a non-object is an error.
        assert!(
            user.parse(&t, br#"{"errors":[{"title":"Not Found Error"}]}"#)
                .is_err()
        );
        assert!(user.parse(&t, b"[]").is_err());
    }
}
