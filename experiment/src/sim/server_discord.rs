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
