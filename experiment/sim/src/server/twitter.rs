//! The simulator in Twitter API v1.1's dialect [docs/api-facts.md 2.2]:
//! `GET /1.1/lists/statuses.json` and `/1.1/statuses/home_timeline.json` (the
//! reader's follow set), `/1.1/account/verify_credentials.json`; `since_id` exclusive, `max_id`
//! *inclusive*, `count` default 20, at most 200, newest first, rate limits in
//! `x-rate-limit-*` (epoch seconds) [2.3], errors as `{"errors": [{"code",
//! "message"}]}`.

use super::{
    Allowance, AppState, READER_ID, READER_NAME, Scope, ServedApi, header_value, json_response,
    param, params, parse_id, retry_after, to_json, with_scope,
};
use crate::model::Query;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use since_id::id::Id;
use std::collections::BTreeSet;
use std::sync::Arc;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/1.1/lists/statuses.json", get(twitter_list))
        .route("/1.1/statuses/home_timeline.json", get(twitter_home))
        .route(
            "/1.1/account/verify_credentials.json",
            get(verify_credentials),
        )
}

/// `GET /1.1/account/verify_credentials.json`, which clients call to learn who
/// they are: every token is the reader.
async fn verify_credentials() -> Response {
    let body = json!({
        "id": READER_ID,
        "id_str": READER_ID.to_string(),
        "name": "snowleak reader",
        "screen_name": READER_NAME,
        "protected": false,
        "followers_count": 0,
        "friends_count": 0,
        "statuses_count": 0,
        "created_at": "Mon Jan 01 00:00:00 +0000 2024",
    });
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

async fn twitter_list(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    twitter_timeline(app, raw, None)
}

/// `GET /1.1/statuses/home_timeline.json`: the tweets of the users the reader
/// follows, paged as a list is.
async fn twitter_home(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let home = app.home();
    twitter_timeline(app, raw, Some(home))
}

/// A value written straight into the JSON output through its `Display`
/// (serde's `collect_str`), so a page of 200 tweets does not allocate a string
/// per field.
struct Shown<T: std::fmt::Display>(T);

impl<T: std::fmt::Display> Serialize for Shown<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// A prefix and a number: `user7`, `User 7`, `1000007`.
struct Numbered(&'static str, u64);

impl std::fmt::Display for Numbered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.0, self.1)
    }
}

/// The text of a simulated tweet.
struct StatusText<'a> {
    id: &'a str,
    origin: &'a str,
}

impl std::fmt::Display for StatusText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Status {} from the snowleak simulator ({})",
            self.id, self.origin
        )
    }
}

#[derive(Serialize)]
struct TwitterUser {
    id: u64,
    id_str: Shown<Numbered>,
    name: Shown<Numbered>,
    screen_name: Shown<Numbered>,
}

#[derive(Serialize)]
struct Tweet<'a> {
    created_at: Shown<TwitterTime>,
    /// The exact integer, never a float (serde_json writes u128 digits).
    id: u128,
    id_str: &'a str,
    text: Shown<StatusText<'a>>,
    truncated: bool,
    user: TwitterUser,
}

/// `Wed Oct 10 20:19:24 +0000 2018`, written field by field: chrono's
/// strftime parses its pattern on every call, which was the server's largest
/// cost at 200 tweets a page.
struct TwitterTime(i64);

impl std::fmt::Display for TwitterTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use chrono::{Datelike, Timelike};
        const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let Some(t) = DateTime::<Utc>::from_timestamp_millis(self.0) else {
            return Ok(());
        };
        write!(
            f,
            "{} {} {:02} {:02}:{:02}:{:02} +0000 {}",
            DAYS[t.weekday().num_days_from_monday() as usize],
            MONTHS[t.month0() as usize],
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.year()
        )
    }
}

fn twitter_error(status: StatusCode, code: u32, message: &str, headers: HeaderMap) -> Response {
    let body = json!({"errors": [{"code": code, "message": message}]});
    json_response(status, headers, to_json(&body))
}

fn twitter_rate_headers(a: &Allowance) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("x-rate-limit-limit", header_value(&a.limit.to_string()));
    h.insert(
        "x-rate-limit-remaining",
        header_value(&a.remaining.to_string()),
    );
    h.insert(
        "x-rate-limit-reset",
        header_value(&a.reset_ms.div_euclid(1000).to_string()),
    );
    h
}

/// A timeline of v1.1: the whole list, or a home timeline (its follow set
/// and the scope a recording gives it).
fn twitter_timeline(
    app: AppState,
    raw: Option<String>,
    home: Option<(Arc<BTreeSet<u32>>, Scope)>,
) -> Response {
    let allowance = app.limiter.check(ServedApi::Twitter, (app.clock)());
    let mut headers = twitter_rate_headers(&allowance);
    if !allowance.allowed {
        retry_after(&allowance, &mut headers);
        return twitter_error(
            StatusCode::TOO_MANY_REQUESTS,
            88,
            "Rate limit exceeded",
            headers,
        );
    }
    let params = params(&raw);
    let layout = app.layout();
    let invalid = |name: &str| {
        let message = format!("{name} parameter is invalid.");
        twitter_error(StatusCode::BAD_REQUEST, 44, &message, headers.clone())
    };
    let count = match param(&params, "count").map(|c| c.trim().parse::<u64>()) {
        None => 20,
        Some(Ok(n)) if n >= 1 => n.min(200) as usize,
        Some(_) => return invalid("count"),
    };
    let Ok(since) = parse_id(&layout, param(&params, "since_id")) else {
        return invalid("since_id");
    };
    let Ok(max) = parse_id(&layout, param(&params, "max_id")) else {
        return invalid("max_id");
    };
    // max_id is inclusive: "IDs lower than or equal to" [2.2].
    let query = Query {
        after: since,
        before: max.map(|m| Id(m.0.saturating_add(1))),
        limit: count,
        oldest_first: false,
    };
    let follows = home.as_ref().map(|(f, _)| f.clone());
    let (statuses, layout, _) = app.query(&query, |s| {
        follows.as_ref().is_none_or(|f| f.contains(&s.author))
    });
    let body = app.tweets.page(&statuses, |s| {
        let id_str = layout.format(s.id);
        let author = 1_000_000 + s.author as u64;
        to_json(&Tweet {
            created_at: Shown(TwitterTime(s.posted_at_ms)),
            id: s.id.0,
            id_str: &id_str,
            text: Shown(StatusText {
                id: &id_str,
                origin: &s.origin,
            }),
            truncated: false,
            user: TwitterUser {
                id: author,
                id_str: Shown(Numbered("", author)),
                name: Shown(Numbered("User ", s.author as u64)),
                screen_name: Shown(Numbered("user", s.author as u64)),
            },
        })
    });
    let response = json_response(StatusCode::OK, headers, body);
    match home {
        Some((_, scope)) => with_scope(response, scope),
        None => response,
    }
}
