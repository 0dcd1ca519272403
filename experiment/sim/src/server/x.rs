//! The simulator in X API v2's dialect [docs/api-facts.md 2.3]: the timelines
//! `GET /2/users/{id}/tweets`, `GET /2/tweets/search/recent` and the reader's
//! home timeline `GET /2/users/1/timelines/reverse_chronological` (its
//! follow set; max_results 1-100), and the user
//! lookups a client makes first (`/2/users/me`, `/2/users/{id}`, `/2/users?ids=`,
//! `/2/users/by/username/{name}`, `/2/users/by?usernames=`).
//!
//! - `since_id` and `until_id` are both exclusive; "`since_id` must be less
//!   than `until_id`" (else 400). `start_time` (inclusive) and `end_time`
//!   (exclusive) bound `created_at`, in RFC 3339; recent search takes at most
//!   one of `start_time` and `since_id`.
//! - `max_results`: 5-100 for user tweets, 10-100 for search, default 10;
//!   outside the range, 400 with X's problem JSON.
//! - Newest first; `{"data": [...], "includes": {"users": [...]}, "meta":
//!   {"newest_id", "oldest_id", "result_count", "next_token",
//!   "previous_token"}}`; an empty result has no `data`. Tokens are passed back
//!   as `pagination_token` (or `next_token` for search): `next_token` continues
//!   below the page's oldest ID, `previous_token` returns the page above its
//!   newest (x-api/fundamentals/pagination).
//! - The default tweet fields are `id`, `text`, `edit_history_tweet_ids`;
//!   `tweet.fields` adds `created_at`, `author_id`, `conversation_id`, `lang`,
//!   `public_metrics`, `possibly_sensitive`, `reply_settings`,
//!   `edit_controls`; `expansions=author_id` adds `author_id` to every post
//!   of `data` (listed in `tweet.fields` or not, as X does) and
//!   `includes.users`, each user the same object as the lookups return
//!   (`user.fields` applies to both); `edit_history_tweet_ids` adds
//!   `includes.tweets` (each post's history: itself). The other expansions
//!   link nothing here (no replies, quotes, media, polls, places, mentions).
//! - Recent search's `end_time` defaults to now minus the profile's
//!   `search_end_lag_ms` (the docs: "now" "(actually 30 seconds before the time
//!   of query)", x-api/posts/search/integrate/paginate).
//! - The time bounds are read as ID bounds: a post is inside them when the
//!   time in its Snowflake ID is, which is its `created_at` (recent search
//!   takes `start_time` or `since_id`, not both: one lower bound either way). So the response is
//!   marked with the ID window they leave ([`Covered`]), and a recording owes
//!   the client only the posts inside it.
//! - `x-rate-limit-limit/-remaining/-reset` (epoch seconds); 429 when spent.
//!
//! Users: the simulated authors are `1000000 + n`, `@user{n}`; the reader
//! (`/2/users/me`) is `1`, `@snowleak`. An author's timeline holds that
//! author's posts; every other user ID (the reader's, or any unknown one) and
//! every search query reads the whole simulated timeline.

use super::{
    Allowance, AppState, Covered, READER_ID, Scope, ServedApi, json_response, param, params,
    parse_id, retry_after, to_json, with_covered, with_scope, with_served,
};
use crate::model::{Query, SimStatus};
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};
use since_id::id::{Id, Layout};
use since_id::time::rfc3339_ms;
use std::collections::BTreeSet;
use std::sync::Arc;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/2/users/{id}/tweets", get(user_tweets))
        .route("/2/tweets/search/recent", get(search_recent))
        .route(
            "/2/users/{id}/timelines/reverse_chronological",
            get(home_timeline),
        )
        .route("/2/users/me", get(user_me))
        .route("/2/users/{id}", get(user_by_id))
        .route("/2/users", get(users_by_ids))
        .route("/2/users/by/username/{username}", get(user_by_username))
        .route("/2/users/by", get(users_by_usernames))
}

fn rate_headers(a: &Allowance) -> HeaderMap {
    let mut h = HeaderMap::new();
    let value = |n: i64| super::header_value(&n.to_string());
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

/// Counts the request; on a spent limit, the 429 to send.
/// (The refusal is boxed: a `Response` is large.)
fn admit(app: &AppState) -> Result<(HeaderMap, i64), Box<Response>> {
    let allowance = app.limiter.check(ServedApi::X, (app.clock)());
    let mut headers = rate_headers(&allowance);
    if allowance.allowed {
        return Ok((headers, allowance.now_ms));
    }
    retry_after(&allowance, &mut headers);
    let body = json!({"title": "Too Many Requests", "detail": "Too Many Requests",
                      "type": "about:blank", "status": 429});
    Err(Box::new(json_response(
        StatusCode::TOO_MANY_REQUESTS,
        headers,
        to_json(&body),
    )))
}

/// The 404 of an unknown path under `/2/`, in X's problem shape.
pub(super) fn not_found() -> Response {
    let body = json!({"title": "Not Found Error", "detail": "Sorry, that page does not exist.",
                      "type": "about:blank", "status": 404});
    json_response(StatusCode::NOT_FOUND, HeaderMap::new(), to_json(&body))
}

// ---------------------------------------------------------------- users

/// Author `n` is user `AUTHOR_BASE + n` (the same numbering as the other dialects).
const AUTHOR_BASE: u64 = 1_000_000;

/// A user the server knows: the reader or an author.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum User {
    Reader,
    Author(u32),
}

impl User {
    fn by_id(text: &str, authors: u32) -> Option<User> {
        let id: u64 = text.parse().ok()?;
        if id == READER_ID && text == "1" {
            return Some(User::Reader);
        }
        let n = id.checked_sub(AUTHOR_BASE)?;
        (n < authors as u64 && text == id.to_string()).then_some(User::Author(n as u32))
    }

    /// Usernames are case-insensitive.
    fn by_username(name: &str, authors: u32) -> Option<User> {
        let name = name.to_ascii_lowercase();
        if name == "snowleak" {
            return Some(User::Reader);
        }
        let n: u32 = name.strip_prefix("user")?.parse().ok()?;
        (n < authors && name == format!("user{n}")).then_some(User::Author(n))
    }

    /// The user object: always the same for the same user; `user.fields` adds
    /// `created_at`, `description`, `protected`, `verified`, `verified_type`,
    /// `profile_image_url`, `public_metrics`, `url` (docs.x.com,
    /// x-api/fundamentals/data-dictionary, "User"; `location`, `entities`,
    /// `pinned_tweet_id` and `withheld` are absent, as for a user without them).
    fn render(self, fields: &Fields) -> Value {
        let (id, username, name) = match self {
            User::Reader => (
                READER_ID,
                super::READER_NAME.to_string(),
                "snowleak reader".to_string(),
            ),
            User::Author(n) => (
                AUTHOR_BASE + n as u64,
                format!("user{n}"),
                format!("User {n}"),
            ),
        };
        let mut user = json!({"id": id.to_string(), "name": name, "username": username});
        let extra = [
            ("created_at", json!("2024-01-01T00:00:00.000Z")),
            ("description", json!("")),
            ("protected", json!(false)),
            ("verified", json!(false)),
            ("verified_type", json!("none")),
            (
                "profile_image_url",
                json!(
                    "https://abs.twimg.com/sticky/default_profile_images/default_profile_normal.png"
                ),
            ),
            ("url", json!("")),
            (
                "public_metrics",
                json!({"followers_count": 0, "following_count": 0, "tweet_count": 0, "listed_count": 0}),
            ),
        ];
        for (name, value) in extra {
            if fields.has(name) {
                user[name] = value;
            }
        }
        user
    }
}

/// A comma-separated field list (`tweet.fields`, `user.fields`, `expansions`).
struct Fields(Vec<String>);

impl Fields {
    fn of(params: &[(String, String)], key: &str) -> Fields {
        Fields(
            param(params, key)
                .unwrap_or("")
                .split(',')
                .map(|f| f.trim().to_string())
                .filter(|f| !f.is_empty())
                .collect(),
        )
    }

    fn has(&self, name: &str) -> bool {
        self.0.iter().any(|f| f == name)
    }
}

/// X answers a lookup of a missing user with 200 and an `errors` entry.
fn missing_user(value: &str, parameter: &str) -> Value {
    json!({
        "value": value,
        "detail": format!("Could not find user with {parameter}: [{value}]."),
        "title": "Not Found Error",
        "resource_type": "user",
        "parameter": parameter,
        "resource_id": value,
        "type": "https://api.twitter.com/2/problems/resource-not-found",
    })
}

/// One lookup or many: `single` renders `{"data": {...}}`, else `{"data": [...]}`;
/// missing users go to `errors`.
fn lookup(
    app: AppState,
    raw: Option<String>,
    wanted: Vec<String>,
    parameter: &str,
    single: bool,
) -> Response {
    let (headers, _) = match admit(&app) {
        Ok(h) => h,
        Err(refused) => return *refused,
    };
    let p = params(&raw);
    let fields = Fields::of(&p, "user.fields");
    let authors = app.with_config(|c| c.authors);
    if wanted.is_empty() || wanted.len() > 100 {
        let message = format!("The `{parameter}s` query parameter must hold 1 to 100 values");
        return invalid(&message, headers);
    }
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for value in &wanted {
        let user = match parameter {
            "id" => User::by_id(value, authors),
            _ => User::by_username(value, authors),
        };
        match user {
            Some(u) => found.push(u.render(&fields)),
            None => errors.push(missing_user(value, parameter)),
        }
    }
    let mut body = json!({});
    if single {
        if let Some(user) = found.pop() {
            body["data"] = user;
        }
    } else if !found.is_empty() {
        body["data"] = Value::Array(found);
    }
    if !errors.is_empty() {
        body["errors"] = Value::Array(errors);
    }
    json_response(StatusCode::OK, headers, to_json(&body))
}

fn list_param(raw: &Option<String>, key: &str) -> Vec<String> {
    param(&params(raw), key)
        .unwrap_or("")
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

async fn user_me(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    lookup(app, raw, vec![READER_ID.to_string()], "id", true)
}

async fn user_by_id(
    State(app): State<AppState>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    lookup(app, raw, vec![id], "id", true)
}

async fn users_by_ids(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let ids = list_param(&raw, "ids");
    lookup(app, raw, ids, "id", false)
}

async fn user_by_username(
    State(app): State<AppState>,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    lookup(app, raw, vec![name], "username", true)
}

async fn users_by_usernames(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let names = list_param(&raw, "usernames");
    lookup(app, raw, names, "username", false)
}

// ---------------------------------------------------------------- timelines

async fn user_tweets(
    State(app): State<AppState>,
    Path(user): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let authors = app.with_config(|c| c.authors);
    let only = match User::by_id(&user, authors) {
        Some(User::Author(n)) => Some(n),
        _ => None,
    };
    timeline(app, raw, Endpoint::User { only })
}

/// `GET /2/users/{id}/timelines/reverse_chronological`: the reader's home
/// timeline (X API v2 reference, "Reverse chronological home timeline"),
/// paged like a user's posts; only the reader has one.
async fn home_timeline(
    State(app): State<AppState>,
    Path(user): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let authors = app.with_config(|c| c.authors);
    if User::by_id(&user, authors) != Some(User::Reader) {
        let body = json!({"title": "Forbidden", "type": "about:blank", "status": 403,
                          "detail": "You can only read your own home timeline."});
        return json_response(StatusCode::FORBIDDEN, HeaderMap::new(), to_json(&body));
    }
    let (follows, scope) = app.home();
    timeline(app, raw, Endpoint::Home(follows, scope))
}

async fn search_recent(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    timeline(app, raw, Endpoint::Search)
}

#[derive(Clone)]
enum Endpoint {
    /// A user's posts (`only` an author), or the whole timeline.
    User {
        only: Option<u32>,
    },
    /// The reader's home timeline: the posts of the users it follows, and
    /// the scope a recording gives it.
    Home(Arc<BTreeSet<u32>>, Scope),
    Search,
}

/// A pagination token: below (`next_token`) or above (`previous_token`) an ID.
#[derive(Clone, Copy)]
enum PageToken {
    Below(Id),
    Above(Id),
}

impl PageToken {
    fn format(self, layout: &Layout) -> String {
        match self {
            PageToken::Below(id) => format!("p{}", layout.format(id)),
            PageToken::Above(id) => format!("n{}", layout.format(id)),
        }
    }

    fn parse(text: &str, layout: &Layout) -> Option<PageToken> {
        let make: fn(Id) -> PageToken = match text.get(..1)? {
            "p" => PageToken::Below,
            "n" => PageToken::Above,
            _ => return None,
        };
        layout.parse(&text[1..]).ok().map(make)
    }
}

/// `start_time`/`end_time`: RFC 3339, as ms.
fn time_param(p: &[(String, String)], name: &str) -> Result<Option<i64>, String> {
    match param(p, name) {
        None => Ok(None),
        Some(v) => chrono::DateTime::parse_from_rfc3339(v)
            .map(|t| Some(t.timestamp_millis()))
            .map_err(|_| {
                format!("Invalid '{name}':'{v}'. '{name}' must be a valid RFC 3339 date.")
            }),
    }
}

fn timeline(app: AppState, raw: Option<String>, endpoint: Endpoint) -> Response {
    let (headers, now) = match admit(&app) {
        Ok(h) => h,
        Err(refused) => return *refused,
    };
    let p = params(&raw);
    let Asked {
        query,
        covered,
        token,
        limit,
    } = match asked(&app, &p, &endpoint, now) {
        Ok(asked) => asked,
        Err(message) => return invalid(&message, headers),
    };
    let scope = match &endpoint {
        Endpoint::User { only: Some(author) } => Some(Scope::Authors([i64::from(*author)].into())),
        Endpoint::Home(_, scope) => Some(scope.clone()),
        Endpoint::User { only: None } | Endpoint::Search => None,
    };
    let keep = move |s: &SimStatus| match &endpoint {
        Endpoint::User { only } => only.is_none_or(|a| s.author == a),
        Endpoint::Home(follows, _) => follows.contains(&s.author),
        Endpoint::Search => true,
    };
    let (mut statuses, layout, _) = app.query(&query, keep);
    if query.oldest_first {
        statuses.reverse();
    }
    let body = page(&statuses, &layout, &p, token, limit);
    let mut response = with_served(
        json_response(StatusCode::OK, headers, to_json(&body)),
        &statuses,
    );
    if covered != Covered::default() {
        response = with_covered(response, covered);
    }
    match scope {
        Some(scope) => with_scope(response, scope),
        None => response,
    }
}

/// What a timeline request asks for, read from its parameters with X's
/// checks. A refusal is the message of the 400 that X answers.
struct Asked {
    query: Query,
    covered: Covered,
    token: Option<PageToken>,
    limit: usize,
}

fn asked(
    app: &AppState,
    p: &[(String, String)],
    endpoint: &Endpoint,
    now: i64,
) -> Result<Asked, String> {
    let (min, token_param) = match *endpoint {
        Endpoint::User { .. } => (5, "pagination_token"),
        Endpoint::Home(..) => (1, "pagination_token"),
        Endpoint::Search => (10, "next_token"),
    };
    if matches!(endpoint, Endpoint::Search) {
        if param(p, "query").is_none_or(|q| q.trim().is_empty()) {
            return Err("The `query` query parameter can not be empty".into());
        }
        if param(p, "start_time").is_some() && param(p, "since_id").is_some() {
            return Err("At most one of start_time, since_id may be provided".into());
        }
    }
    let layout = app.layout();
    let limit = match param(p, "max_results") {
        None => 10,
        Some(v) => match v.parse::<u64>() {
            Ok(n) if (min..=100).contains(&n) => n as usize,
            _ => {
                let message = format!(
                    "The `max_results` query parameter value [{v}] is not between {min} and 100"
                );
                return Err(message);
            }
        },
    };
    let cursor = |name: &str| parse_id(&layout, param(p, name));
    let (since, until) = match (cursor("since_id"), cursor("until_id")) {
        (Ok(s), Ok(u)) => (s, u),
        _ => return Err("since_id and until_id must be IDs".into()),
    };
    if let (Some(s), Some(u)) = (since, until)
        && s >= u
    {
        return Err("since_id must be less than until_id".into());
    }
    let (start, end) = match (time_param(p, "start_time"), time_param(p, "end_time")) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    let end = match endpoint {
        Endpoint::Search => {
            end.or_else(|| Some(now - app.with_config(|c| c.search_end_lag_ms) as i64))
        }
        Endpoint::User { .. } | Endpoint::Home(..) => end,
    };
    let token = match param(p, token_param).or(param(p, "pagination_token")) {
        None => None,
        Some(t) => match PageToken::parse(t, &layout) {
            Some(token) => Some(token),
            None => return Err("The pagination token is invalid".into()),
        },
    };
    // The time bounds as IDs: `start_time` (inclusive) keeps the IDs from
    // the first of its ms, `end_time` (exclusive) those below the first of its ms.
    let covered = Covered {
        after: start.and_then(|t| layout.min_id_at(t).0.checked_sub(1).map(Id)),
        before: end.map(|t| layout.min_id_at(t)),
    };
    let lowest = |a: Option<Id>, b: Option<Id>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let after = since.max(covered.after);
    let before = lowest(until, covered.before);
    // Above a token: the oldest `limit` above it, listed newest first.
    let query = match token {
        Some(PageToken::Above(id)) => Query {
            after: Some(after.map_or(id, |s| s.max(id))),
            before,
            limit,
            oldest_first: true,
        },
        Some(PageToken::Below(id)) => Query {
            after,
            before: lowest(before, Some(id)),
            limit,
            oldest_first: false,
        },
        None => Query {
            after,
            before,
            limit,
            oldest_first: false,
        },
    };
    Ok(Asked {
        query,
        covered,
        token,
        limit,
    })
}

/// The body of a page: its posts, `meta` with the tokens to the pages
/// beside it, and `includes`.
fn page(
    statuses: &[SimStatus],
    layout: &Layout,
    p: &[(String, String)],
    token: Option<PageToken>,
    limit: usize,
) -> Value {
    let tweet_fields = Fields::of(p, "tweet.fields");
    let expansions = Fields::of(p, "expansions");
    let data: Vec<Value> = statuses
        .iter()
        .map(|s| tweet(s, layout, &tweet_fields, &expansions))
        .collect();
    match (statuses.first(), statuses.last()) {
        (Some(newest), Some(oldest)) => {
            let mut meta = json!({
                "newest_id": layout.format(newest.id),
                "oldest_id": layout.format(oldest.id),
                "result_count": data.len(),
            });
            let full = data.len() == limit;
            // Below a page reached from above, there is at least the page it came from.
            let (next, previous) = match token {
                None => (full, false),
                Some(PageToken::Below(_)) => (full, true),
                Some(PageToken::Above(_)) => (true, full),
            };
            if next {
                meta["next_token"] = json!(PageToken::Below(oldest.id).format(layout));
            }
            if previous {
                meta["previous_token"] = json!(PageToken::Above(newest.id).format(layout));
            }
            let mut body = json!({"data": data, "meta": meta});
            let includes = includes(&data, statuses, &expansions, &Fields::of(p, "user.fields"));
            if !includes.is_empty() {
                body["includes"] = Value::Object(includes);
            }
            body
        }
        _ => json!({"meta": {"result_count": 0}}),
    }
}

/// A page's `includes`: the objects its expansions link to, each once
/// (docs.x.com, x-api/fundamentals/expansions). The simulated posts quote,
/// reply to, mention and attach nothing, so of the post expansions only
/// `author_id` (the authors, `users`) and `edit_history_tweet_ids` (each
/// post's history: the post itself, as it was never edited: `tweets`) link
/// to objects; the others add neither a field nor an object, as on X for a
/// post without them.
fn includes(
    data: &[Value],
    statuses: &[SimStatus],
    expansions: &Fields,
    user_fields: &Fields,
) -> serde_json::Map<String, Value> {
    let mut includes = serde_json::Map::new();
    if expansions.has("author_id") {
        includes.insert(
            "users".into(),
            Value::Array(page_authors(statuses, user_fields)),
        );
    }
    if expansions.has("edit_history_tweet_ids") {
        includes.insert("tweets".into(), Value::Array(data.to_vec()));
    }
    includes
}

/// The authors of a page, each once, in order of first appearance.
fn page_authors(statuses: &[SimStatus], fields: &Fields) -> Vec<Value> {
    let mut seen = Vec::new();
    for s in statuses {
        if !seen.contains(&s.author) {
            seen.push(s.author);
        }
    }
    seen.into_iter()
        .map(|n| User::Author(n).render(fields))
        .collect()
}

/// A post: the default fields, those `tweet.fields` asks for, and the field
/// each expansion asked for links through, listed or not ("The author_id in
/// data links to the user object in includes": docs.x.com,
/// x-api/fundamentals/expansions; X adds it to every post of `data`).
///
/// Its `created_at` is the time in its ID, as X's own: Tweetypie takes
/// `createdAt = SnowflakeId(tweetId).time` (github.com/twitter/the-algorithm,
/// tweetypie/server/src/main/scala/com/twitter/tweetypie/handler/TweetBuilder.scala),
/// which is also what `start_time`/`end_time` bound here.
fn tweet(s: &SimStatus, layout: &Layout, fields: &Fields, expansions: &Fields) -> Value {
    let id = layout.format(s.id);
    let created_ms = layout.ts_ms(s.id);
    let mut tweet = json!({
        "id": id,
        "text": format!("Post {id} from the snowleak simulator ({})", s.origin),
        "edit_history_tweet_ids": [id],
    });
    let extra = [
        ("created_at", json!(rfc3339_ms(created_ms))),
        (
            "author_id",
            json!((AUTHOR_BASE + s.author as u64).to_string()),
        ),
        // Every simulated post starts its own conversation.
        ("conversation_id", json!(id)),
        ("lang", json!("en")),
        (
            "public_metrics",
            json!({"retweet_count": 0, "reply_count": 0, "like_count": 0, "quote_count": 0,
                   "bookmark_count": 0, "impression_count": 0}),
        ),
        ("possibly_sensitive", json!(false)),
        ("reply_settings", json!("everyone")),
        // "Posts can be edited up to 5 times within 30 minutes" (x-api/posts/timelines/integrate).
        (
            "edit_controls",
            json!({"edits_remaining": 5, "is_edit_eligible": true,
                   "editable_until": rfc3339_ms(created_ms + 30 * 60_000)}),
        ),
    ];
    for (name, value) in extra {
        if fields.has(name) || (name == "author_id" && expansions.has("author_id")) {
            tweet[name] = value;
        }
    }
    tweet
}

#[cfg(test)]
mod tests {
    use crate::server::{RateLimits, RunningServer, test_server};
    use serde_json::Value;
    use since_id::id::Id;

    const NOW: i64 = 1_700_000_000_000;

    /// A server holding tweets with IDs 1..=n (twitter layout), fixed clock.
    async fn server(profile: &str, n: u128, limits: RateLimits) -> RunningServer {
        test_server(profile, (1..=n).map(Id), NOW - 60_000, NOW, limits).await
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
