//! The simulator in Discord's dialect [apis.md 4]:
//! `GET /api/v10/channels/{id}/messages`.
//!
//! - `before`, `after` and `around` are mutually exclusive (here: more than
//!   one is a 400; `around` is not modelled and is a 400 too).
//! - `after` returns the messages immediately after the cursor (the oldest
//!   ones); every response lists messages newest to oldest.
//! - `limit` 1-100, default 50; otherwise 400 "Invalid Form Body".
//! - Rate headers `X-RateLimit-Limit`, `-Remaining`, `-Reset` (epoch seconds
//!   with decimals), `-Reset-After` (seconds), `-Bucket`; a 429 carries
//!   `Retry-After` and `{"message", "retry_after", "global"}`.
//!
//! Every channel ID sees the whole simulated timeline. A message's
//! `timestamp` is its snowflake's time.

use super::model::Query;
use super::server::{
    Allowance, AppState, Dialect, header_value, json_response, param, params, parse_id,
    retry_after, to_json,
};
use crate::id::Layout;
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/api/v10/channels/{id}/messages", get(messages))
}

fn rate_headers(a: &Allowance) -> HeaderMap {
    let mut h = HeaderMap::new();
    let reset_after = (a.reset_ms - a.now_ms).max(0) as f64 / 1000.0;
    h.insert("x-ratelimit-limit", header_value(&a.limit.to_string()));
    h.insert(
        "x-ratelimit-remaining",
        header_value(&a.remaining.to_string()),
    );
    h.insert(
        "x-ratelimit-reset",
        header_value(&format!("{:.3}", a.reset_ms as f64 / 1000.0)),
    );
    h.insert(
        "x-ratelimit-reset-after",
        header_value(&format!("{reset_after:.3}")),
    );
    h.insert("x-ratelimit-bucket", header_value("snowleak-messages"));
    h
}

fn invalid(message: &str, headers: HeaderMap) -> Response {
    let body = json!({"message": "Invalid Form Body", "code": 50035,
                      "errors": {"_errors": [{"code": "BASE_TYPE_INVALID", "message": message}]}});
    json_response(StatusCode::BAD_REQUEST, headers, to_json(&body))
}

/// `2017-07-11T17:27:07.299000+00:00`, as Discord writes timestamps.
fn discord_time(unix_ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(unix_ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string())
        .unwrap_or_default()
}

async fn messages(
    State(app): State<AppState>,
    Path(channel): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let allowance = app.limiter.check(Dialect::Discord, (app.clock)());
    let mut headers = rate_headers(&allowance);
    if !allowance.allowed {
        retry_after(&allowance, &mut headers);
        let secs = (allowance.reset_ms - allowance.now_ms).max(0) as f64 / 1000.0;
        let body =
            json!({"message": "You are being rate limited.", "retry_after": secs, "global": false});
        return json_response(StatusCode::TOO_MANY_REQUESTS, headers, to_json(&body));
    }
    let p = params(&raw);
    let layout = app.layout();
    let limit = match param(&p, "limit") {
        None => 50,
        Some(v) => match v.parse::<u64>() {
            Ok(n @ 1..=100) => n as usize,
            _ => return invalid("limit: Value must be between 1 and 100.", headers),
        },
    };
    let given: Vec<&str> = ["before", "after", "around"]
        .into_iter()
        .filter(|k| param(&p, k).is_some())
        .collect();
    if given.len() > 1 {
        return invalid("before, after and around are mutually exclusive", headers);
    }
    if given == ["around"] {
        return invalid("around is not modelled by the simulator", headers);
    }
    let (before, after) = match (
        parse_id(&layout, param(&p, "before")),
        parse_id(&layout, param(&p, "after")),
    ) {
        (Ok(b), Ok(a)) => (b, a),
        _ => return invalid("Value is not snowflake.", headers),
    };
    // `after`: the oldest `limit` above the cursor, listed newest first.
    let query = Query {
        after,
        before,
        limit,
        oldest_first: after.is_some(),
    };
    let (mut statuses, layout, _) = app.query(&query, |_| true);
    if query.oldest_first {
        statuses.reverse();
    }
    let body: Vec<Value> = statuses
        .iter()
        .map(|s| message(&layout, &channel, s.id, s.author, &s.origin))
        .collect();
    json_response(StatusCode::OK, headers, to_json(&body))
}

fn message(layout: &Layout, channel: &str, id: crate::id::Id, author: u32, origin: &str) -> Value {
    let id_text = layout.format(id);
    json!({
        "id": id_text,
        "type": 0,
        "content": format!("Message {id_text} from the snowleak simulator ({origin})"),
        "channel_id": channel,
        "author": {
            "id": (1_000_000 + author as u64).to_string(),
            "username": format!("user{author}"),
            "global_name": format!("User {author}"),
            "discriminator": "0",
            "avatar": null,
        },
        "attachments": [],
        "embeds": [],
        "mentions": [],
        "mention_roles": [],
        "pinned": false,
        "mention_everyone": false,
        "tts": false,
        "timestamp": discord_time(layout.ts_ms(id)),
        "edited_timestamp": null,
        "flags": 0,
        "components": [],
    })
}

#[cfg(test)]
mod tests {
    use crate::id::Id;
    use crate::sim::server::{RateLimits, RunningServer, test_server};
    use serde_json::Value;

    const NOW: i64 = 1_700_000_000_000;

    async fn server(n: u128, limits: RateLimits) -> RunningServer {
        test_server("discord", (1..=n).map(|id| Id(id << 22)), NOW, NOW, limits).await
    }

    async fn get(server: &RunningServer, query: &str) -> (u16, reqwest::header::HeaderMap, Value) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = server.url(&format!("/api/v10/channels/42/messages{query}"));
        let r = reqwest::get(url).await.unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        (status, headers, r.json().await.unwrap())
    }

    /// The n of each message (IDs are n << 22).
    fn ns(body: &Value) -> Vec<u64> {
        body.as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().parse::<u64>().unwrap() >> 22)
            .collect()
    }

    #[tokio::test]
    async fn before_is_newest_below_and_after_is_oldest_above_both_listed_newest_first() {
        let s = server(10, RateLimits::default()).await;
        let (status, h, body) = get(&s, "?limit=3").await;
        assert_eq!((status, ns(&body)), (200, vec![10, 9, 8]));
        assert_eq!(body[0]["channel_id"], "42");
        assert_eq!(body[0]["author"]["username"], "user3");
        assert!(body[0]["timestamp"].as_str().unwrap().ends_with("+00:00"));
        for name in [
            "x-ratelimit-reset",
            "x-ratelimit-reset-after",
            "x-ratelimit-bucket",
        ] {
            assert!(h.contains_key(name), "{name}");
        }
        let (_, _, body) = get(&s, &format!("?limit=3&before={}", 8u64 << 22)).await;
        assert_eq!(ns(&body), [7, 6, 5]);
        let (_, _, body) = get(&s, &format!("?limit=3&after={}", 2u64 << 22)).await;
        assert_eq!(
            ns(&body),
            [5, 4, 3],
            "after: the ones just after the cursor"
        );
        let (_, _, body) = get(&s, "").await;
        assert_eq!(ns(&body).len(), 10, "default limit 50");
    }

    #[tokio::test]
    async fn exclusive_cursors_and_bad_limits_are_400() {
        let s = server(3, RateLimits::default()).await;
        for q in [
            "?before=1&after=2",
            "?around=5",
            "?limit=0",
            "?limit=101",
            "?before=x",
        ] {
            let (status, _, body) = get(&s, q).await;
            assert_eq!(status, 400, "{q}");
            assert_eq!(body["code"], 50035, "{q}");
        }
    }

    #[tokio::test]
    async fn spent_bucket_is_429_with_retry_after() {
        let s = server(1, "1/10s".parse().unwrap()).await;
        assert_eq!(get(&s, "").await.0, 200);
        let (status, h, body) = get(&s, "").await;
        assert_eq!(status, 429);
        assert_eq!(body["global"], false);
        assert!(body["retry_after"].as_f64().unwrap() > 0.0);
        assert_eq!(h["x-ratelimit-remaining"], "0");
        assert!(h.contains_key("retry-after"));
    }
}
