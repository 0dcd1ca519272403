//! The simulator in X API v2's dialect [apis.md 2.3]:
//! `GET /2/users/{id}/tweets` and `GET /2/tweets/search/recent`.
//!
//! - `since_id` and `until_id` are both exclusive; "`since_id` must be less
//!   than `until_id`" (else 400).
//! - `max_results`: 5-100 for user tweets, 10-100 for search, default 10;
//!   outside the range, 400 with X's problem JSON.
//! - Newest first; `{"data": [...], "meta": {"newest_id", "oldest_id",
//!   "result_count", "next_token"}}`; an empty result has no `data`.
//! - `next_token` (passed back as `pagination_token`, or `next_token` for
//!   search) continues below the page's oldest ID.
//! - `created_at` and `author_id` only when asked for in `tweet.fields`
//!   (the default fields are `id`, `text`, `edit_history_tweet_ids`).
//! - `x-rate-limit-limit/-remaining/-reset` (epoch seconds); 429 when spent.
//!
//! Every user ID and every search query sees the whole simulated timeline.
//! Not modelled: recent search's default `end_time` of now - 30 s.

use super::model::Query;
use super::server::{
    Allowance, AppState, Dialect, json_response, param, params, parse_id, retry_after, to_json,
};
use crate::id::{Id, Layout};
use crate::time::rfc3339_ms;
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/2/users/{id}/tweets", get(user_tweets))
        .route("/2/tweets/search/recent", get(search_recent))
}

fn rate_headers(a: &Allowance) -> HeaderMap {
    let mut h = HeaderMap::new();
    let value = |n: i64| super::server::header_value(&n.to_string());
    h.insert("x-rate-limit-limit", value(a.limit as i64));
    h.insert("x-rate-limit-remaining", value(a.remaining as i64));
    h.insert("x-rate-limit-reset", value(a.reset_ms.div_euclid(1000)));
    h
}

fn invalid(message: &str, headers: HeaderMap) -> Response {
    let body = json!({
        "errors": [{"message": message}],
        "title": "Invalid Request",
        "detail": "One or more parameters to your request was invalid.",
        "type": "https://api.twitter.com/2/problems/invalid-request",
    });
    json_response(StatusCode::BAD_REQUEST, headers, to_json(&body))
}

async fn user_tweets(
    State(app): State<AppState>,
    Path(_user): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    timeline(app, raw, 5, "pagination_token")
}

async fn search_recent(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let p = params(&raw);
    if param(&p, "query").is_none_or(|q| q.trim().is_empty()) {
        let allowance = app.limiter.check(Dialect::X, (app.clock)());
        return invalid(
            "The `query` query parameter can not be empty",
            rate_headers(&allowance),
        );
    }
    timeline(app, raw, 10, "next_token")
}

/// `p` + the ID the next page starts below.
fn next_token(layout: &Layout, oldest: Id) -> String {
    format!("p{}", layout.format(oldest))
}

fn timeline(app: AppState, raw: Option<String>, min: u64, token_param: &str) -> Response {
    let allowance = app.limiter.check(Dialect::X, (app.clock)());
    let mut headers = rate_headers(&allowance);
    if !allowance.allowed {
        retry_after(&allowance, &mut headers);
        let body = json!({"title": "Too Many Requests", "detail": "Too Many Requests",
                          "type": "about:blank", "status": 429});
        return json_response(StatusCode::TOO_MANY_REQUESTS, headers, to_json(&body));
    }
    let p = params(&raw);
    let layout = app.layout();
    let limit = match param(&p, "max_results") {
        None => 10,
        Some(v) => match v.parse::<u64>() {
            Ok(n) if (min..=100).contains(&n) => n as usize,
            _ => {
                let message = format!(
                    "The `max_results` query parameter value [{v}] is not between {min} and 100"
                );
                return invalid(&message, headers);
            }
        },
    };
    let cursor = |name: &str| parse_id(&layout, param(&p, name));
    let (since, until) = match (cursor("since_id"), cursor("until_id")) {
        (Ok(s), Ok(u)) => (s, u),
        _ => return invalid("since_id and until_id must be IDs", headers),
    };
    if let (Some(s), Some(u)) = (since, until)
        && s >= u
    {
        return invalid("since_id must be less than until_id", headers);
    }
    let token = match param(&p, token_param).or(param(&p, "pagination_token")) {
        None => None,
        Some(t) => match t.strip_prefix('p').map(|id| layout.parse(id)) {
            Some(Ok(id)) => Some(id),
            _ => return invalid("The pagination token is invalid", headers),
        },
    };
    let before = match (until, token) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let fields = param(&p, "tweet.fields").unwrap_or("");
    let with = |f: &str| fields.split(',').any(|x| x.trim() == f);
    let query = Query {
        after: since,
        before,
        limit,
        oldest_first: false,
    };
    let (statuses, layout, _) = app.query(&query, |_| true);
    let data: Vec<Value> = statuses
        .iter()
        .map(|s| {
            let id = layout.format(s.id);
            let mut tweet = json!({
                "id": id,
                "text": format!("Post {id} from the snowleak simulator ({})", s.origin),
                "edit_history_tweet_ids": [id],
            });
            if with("created_at") {
                tweet["created_at"] = json!(rfc3339_ms(s.posted_at_ms));
            }
            if with("author_id") {
                tweet["author_id"] = json!((1_000_000 + s.author as u64).to_string());
            }
            tweet
        })
        .collect();
    let body = match (statuses.first(), statuses.last()) {
        (Some(newest), Some(oldest)) => {
            let mut meta = json!({
                "newest_id": layout.format(newest.id),
                "oldest_id": layout.format(oldest.id),
                "result_count": data.len(),
            });
            if data.len() == limit {
                meta["next_token"] = json!(next_token(&layout, oldest.id));
            }
            json!({"data": data, "meta": meta})
        }
        _ => json!({"meta": {"result_count": 0}}),
    };
    json_response(StatusCode::OK, headers, to_json(&body))
}

#[cfg(test)]
mod tests {
    use crate::id::Id;
    use crate::sim::server::{RateLimits, RunningServer, test_server};
    use serde_json::Value;

    const NOW: i64 = 1_700_000_000_000;

    /// A server holding tweets with IDs 1..=n (twitter layout), fixed clock.
    async fn server(profile: &str, n: u128, limits: RateLimits) -> RunningServer {
        test_server(profile, (1..=n).map(Id), NOW - 1000, NOW, limits).await
    }

    async fn get(server: &RunningServer, path: &str) -> (u16, reqwest::header::HeaderMap, Value) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let r = reqwest::get(server.url(path)).await.unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        (status, headers, r.json().await.unwrap())
    }

    fn ids(body: &Value) -> Vec<&str> {
        body["data"]
            .as_array()
            .map(|a| a.iter().map(|t| t["id"].as_str().unwrap()).collect())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn since_until_exclusive_newest_first_with_meta_and_tokens() {
        let s = server("twitter", 30, RateLimits::default()).await;
        let (status, h, body) = get(
            &s,
            "/2/users/9/tweets?since_id=3&until_id=9&max_results=5&tweet.fields=created_at,author_id",
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(ids(&body), ["8", "7", "6", "5", "4"]);
        assert_eq!(body["meta"]["newest_id"], "8");
        assert_eq!(body["meta"]["oldest_id"], "4");
        assert_eq!(body["meta"]["result_count"], 5);
        assert_eq!(body["data"][0]["author_id"], "1000003");
        assert!(body["data"][0]["created_at"].is_string());
        assert!(h.contains_key("x-rate-limit-reset"));
        // The token continues below the oldest; the page without fields is bare.
        let token = body["meta"]["next_token"].as_str().unwrap().to_string();
        let (_, _, next) = get(
            &s,
            &format!("/2/users/9/tweets?since_id=2&max_results=5&pagination_token={token}"),
        )
        .await;
        assert_eq!(ids(&next), ["3"]);
        assert!(next["meta"].get("next_token").is_none());
        assert!(next["data"][0].get("created_at").is_none());
        // Empty: no data, result_count 0.
        let (_, _, empty) = get(&s, "/2/users/9/tweets?since_id=30").await;
        assert_eq!(empty, serde_json::json!({"meta": {"result_count": 0}}));
    }

    #[tokio::test]
    async fn bad_parameters_are_400() {
        let s = server("twitter", 3, RateLimits::default()).await;
        for path in [
            "/2/users/9/tweets?max_results=4",
            "/2/users/9/tweets?max_results=101",
            "/2/tweets/search/recent?query=a&max_results=5",
            "/2/tweets/search/recent",
            "/2/users/9/tweets?since_id=5&until_id=5",
            "/2/users/9/tweets?since_id=x",
            "/2/users/9/tweets?pagination_token=zzz",
        ] {
            let (status, _, body) = get(&s, path).await;
            assert_eq!(status, 400, "{path}");
            assert!(body["errors"].is_array(), "{path}");
        }
        let (status, _, body) = get(&s, "/2/tweets/search/recent?query=a&max_results=10").await;
        assert_eq!((status, ids(&body)), (200, vec!["3", "2", "1"]));
    }

    #[tokio::test]
    async fn spent_limit_is_429_with_epoch_reset() {
        let s = server("twitter", 1, "1/15m".parse().unwrap()).await;
        assert_eq!(get(&s, "/2/users/9/tweets").await.0, 200);
        let (status, h, body) = get(&s, "/2/users/9/tweets").await;
        assert_eq!(status, 429);
        assert_eq!(body["status"], 429);
        assert_eq!(h["x-rate-limit-remaining"], "0");
        assert!(h.contains_key("retry-after"));
    }
}
