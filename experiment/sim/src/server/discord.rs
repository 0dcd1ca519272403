//! The simulator in Discord's dialect [docs/api-facts.md 4]:
//! `GET /api/v10/channels/{id}/messages`, and what a bot library calls around
//! it: `GET /users/@me` (login), `GET /oauth2/applications/@me`,
//! `GET /channels/{id}` and `GET /users/{id}`; and what a CLI calls to find a
//! channel: `GET /users/@me/guilds`, `/guilds/{id}`, `/guilds/{id}/channels`.
//!
//! - `before`, `after` and `around` are mutually exclusive (here: more than
//!   one is a 400; `around` is not modelled and is a 400 too).
//! - `after` returns the messages immediately after the cursor (the oldest
//!   ones); every response lists messages newest to oldest.
//! - `limit` 1-100, default 50; otherwise 400 "Invalid Form Body".
//! - Rate headers `X-RateLimit-Limit`, `-Remaining`, `-Reset` (epoch seconds
//!   with decimals), `-Reset-After` (seconds), `-Bucket`; a 429 carries
//!   `Retry-After`, `X-RateLimit-Scope` and `{"message", "retry_after",
//!   "global"}` ([docs/api-facts.md 4]).
//! - Every response is `Content-Type: application/json` exactly and carries
//!   `Via: 1.1 google`, as Discord's do: discord.py parses a body as JSON only
//!   for that exact content type, and takes a 429 without `Via` for a
//!   Cloudflare ban (discord.py `http.py`, `json_or_text` and `request`).
//!
//! Every channel ID is a text channel of guild 1 and sees the whole simulated
//! timeline. A message's `timestamp` is its snowflake's time. Author `n` is
//! user `1000000 + n` everywhere; the bot (`@me`) is user 1.

use super::{
    Allowance, AppState, ServedApi, header_value, json_response, param, params, parse_id,
    retry_after, to_json, with_served,
};
use crate::model::Query;
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use since_id::id::Layout;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v10/channels/{id}/messages", get(messages))
        .route("/api/v10/channels/{id}", get(channel))
        .route("/api/v10/users/@me", get(me))
        .route("/api/v10/users/@me/guilds", get(my_guilds))
        .route("/api/v10/guilds/{id}", get(guild))
        .route("/api/v10/guilds/{id}/channels", get(guild_channels))
        .route("/api/v10/users/{id}", get(user))
        .route("/api/v10/oauth2/applications/@me", get(application))
}

/// A Discord response: the exact content type and `Via`.
fn respond(status: StatusCode, headers: HeaderMap, body: &Value) -> Response {
    let mut response = json_response(status, headers, to_json(body));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::VIA, HeaderValue::from_static("1.1 google"));
    response
}

/// The 404 of an unknown path under `/api/v10/`.
pub(super) fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "404: Not Found", 0, HeaderMap::new())
}

/// Discord's error shape: `{"message", "code"}` (developers/topics/opcodes-and-status-codes).
fn error(status: StatusCode, message: &str, code: u32, headers: HeaderMap) -> Response {
    respond(status, headers, &json!({"message": message, "code": code}))
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

/// Counts the request; on a spent limit, the 429 to send.
/// (The refusal is boxed: a `Response` is large.)
fn admit(app: &AppState) -> Result<HeaderMap, Box<Response>> {
    let allowance = app.limiter.check(ServedApi::Discord, (app.clock)());
    let mut headers = rate_headers(&allowance);
    if allowance.allowed {
        return Ok(headers);
    }
    retry_after(&allowance, &mut headers);
    headers.insert("x-ratelimit-scope", header_value("user"));
    let secs = (allowance.reset_ms - allowance.now_ms).max(0) as f64 / 1000.0;
    let body =
        json!({"message": "You are being rate limited.", "retry_after": secs, "global": false});
    Err(Box::new(respond(
        StatusCode::TOO_MANY_REQUESTS,
        headers,
        &body,
    )))
}

fn invalid(message: &str, headers: HeaderMap) -> Response {
    let body = json!({"message": "Invalid Form Body", "code": 50035,
                      "errors": {"_errors": [{"code": "BASE_TYPE_INVALID", "message": message}]}});
    respond(StatusCode::BAD_REQUEST, headers, &body)
}

/// `2017-07-11T17:27:07.299000+00:00`, as Discord writes timestamps.
fn discord_time(unix_ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(unix_ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string())
        .unwrap_or_default()
}

/// The bot: user 1.
const BOT_ID: u64 = 1;
/// Author `n` is user `AUTHOR_BASE + n`.
const AUTHOR_BASE: u64 = 1_000_000;
/// The guild every channel belongs to.
const GUILD_ID: &str = "1";

/// A user object; the same for the same user everywhere (messages, lookups).
fn author_object(n: u32) -> Value {
    json!({
        "id": (AUTHOR_BASE + n as u64).to_string(),
        "username": format!("user{n}"),
        "global_name": format!("User {n}"),
        "discriminator": "0",
        "avatar": null,
        "public_flags": 0,
    })
}

fn bot_object() -> Value {
    json!({
        "id": BOT_ID.to_string(),
        "username": "snowleak",
        "global_name": null,
        "discriminator": "0",
        "avatar": null,
        "bot": true,
        "public_flags": 0,
    })
}

async fn me(State(app): State<AppState>) -> Response {
    match admit(&app) {
        Ok(headers) => {
            let mut user = bot_object();
            user["verified"] = json!(true);
            user["mfa_enabled"] = json!(false);
            user["flags"] = json!(0);
            respond(StatusCode::OK, headers, &user)
        }
        Err(refused) => *refused,
    }
}

async fn user(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    let headers = match admit(&app) {
        Ok(h) => h,
        Err(refused) => return *refused,
    };
    let authors = app.with_config(|c| c.authors) as u64;
    let found = match id.parse::<u64>() {
        Ok(BOT_ID) => Some(bot_object()),
        Ok(n) if (AUTHOR_BASE..AUTHOR_BASE + authors).contains(&n) => {
            Some(author_object((n - AUTHOR_BASE) as u32))
        }
        _ => None,
    };
    match found {
        // Discord's JSON error codes: 10013 Unknown user.
        None => error(StatusCode::NOT_FOUND, "Unknown User", 10013, headers),
        Some(user) => respond(StatusCode::OK, headers, &user),
    }
}

async fn application(State(app): State<AppState>) -> Response {
    let headers = match admit(&app) {
        Ok(h) => h,
        Err(refused) => return *refused,
    };
    let body = json!({
        "id": BOT_ID.to_string(),
        "name": "snowleak",
        "description": "A leaky timeline for since_id experiments",
        "icon": null,
        "bot_public": false,
        "bot_require_code_grant": false,
        "owner": bot_object(),
        "verify_key": "0000000000000000000000000000000000000000000000000000000000000000",
        "flags": 0,
        "team": null,
    });
    respond(StatusCode::OK, headers, &body)
}

async fn channel(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    let headers = match admit(&app) {
        Ok(h) => h,
        Err(refused) => return *refused,
    };
    if id.parse::<u64>().is_err() {
        return invalid(
            &format!("channel_id: Value \"{id}\" is not snowflake."),
            headers,
        );
    }
    respond(StatusCode::OK, headers, &channel_object(&id))
}

/// A text channel of the guild (every channel ID is one).
fn channel_object(id: &str) -> Value {
    json!({
        "id": id,
        "type": 0,
        "guild_id": GUILD_ID,
        "name": "snowleak",
        "position": 0,
        "permission_overwrites": [],
        "nsfw": false,
        "topic": null,
        "last_message_id": null,
        "rate_limit_per_user": 0,
        "parent_id": null,
    })
}

/// The channel `GET /guilds/{id}/channels` lists (any channel ID would do).
const CHANNEL_ID: &str = "2";

/// `GET /users/@me/guilds`, which a CLI or exporter calls to find a channel:
/// the one guild, as a partial guild.
async fn my_guilds(State(app): State<AppState>) -> Response {
    match admit(&app) {
        Ok(headers) => {
            let body = json!([{
                "id": GUILD_ID, "name": "snowleak", "icon": null, "banner": null,
                "owner": false, "permissions": "68608", "features": [],
            }]);
            respond(StatusCode::OK, headers, &body)
        }
        Err(refused) => *refused,
    }
}

/// `GET /guilds/{id}`: the one guild; another ID is Discord's 404 "Unknown Guild".
async fn guild(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    let headers = match admit(&app) {
        Ok(h) => h,
        Err(refused) => return *refused,
    };
    if id != GUILD_ID {
        return unknown_guild(headers);
    }
    let body = json!({
        "id": GUILD_ID, "name": "snowleak", "icon": null, "splash": null,
        "owner_id": BOT_ID.to_string(), "roles": [], "emojis": [], "features": [],
        "verification_level": 0, "default_message_notifications": 0,
        "explicit_content_filter": 0, "mfa_level": 0, "system_channel_id": null,
        "premium_tier": 0, "preferred_locale": "en-US", "nsfw_level": 0,
    });
    respond(StatusCode::OK, headers, &body)
}

/// `GET /guilds/{id}/channels`: the guild's one text channel.
async fn guild_channels(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    let headers = match admit(&app) {
        Ok(h) => h,
        Err(refused) => return *refused,
    };
    if id != GUILD_ID {
        return unknown_guild(headers);
    }
    respond(
        StatusCode::OK,
        headers,
        &json!([channel_object(CHANNEL_ID)]),
    )
}

/// Discord's JSON error code 10004 (Discord developer docs, "JSON Error Codes").
fn unknown_guild(headers: HeaderMap) -> Response {
    respond(
        StatusCode::NOT_FOUND,
        headers,
        &json!({"message": "Unknown Guild", "code": 10004}),
    )
}

async fn messages(
    State(app): State<AppState>,
    Path(channel): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let headers = match admit(&app) {
        Ok(h) => h,
        Err(refused) => return *refused,
    };
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
    with_served(
        respond(StatusCode::OK, headers, &Value::Array(body)),
        &statuses,
    )
}

fn message(
    layout: &Layout,
    channel: &str,
    id: since_id::id::Id,
    author: u32,
    origin: &str,
) -> Value {
    let id_text = layout.format(id);
    json!({
        "id": id_text,
        "type": 0,
        "content": format!("Message {id_text} from the snowleak simulator ({origin})"),
        "channel_id": channel,
        "author": author_object(author),
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
    use crate::server::{RateLimits, RunningServer, test_server};
    use serde_json::Value;
    use since_id::id::Id;

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
