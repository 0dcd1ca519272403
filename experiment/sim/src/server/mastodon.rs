//! The simulator in Mastodon's dialect [docs/api-facts.md 1]:
//! `GET /api/v1/timelines/public` (`local`, `remote`), `/local` (= public
//! with `local=true`) and `/tag/{tag}` (every status carries the tag, so it
//! equals public) [1.1-1.4], `/home` (the reader's follow set) and
//! `/api/v1/accounts/verify_credentials` (every token is the reader), one
//! account's statuses `/api/v1/accounts/{id}/statuses`, and the account
//! look-ups a client makes to find an ID (`/api/v1/accounts/lookup`,
//! `/api/v1/accounts/{id}`): `max_id`/`since_id` exclusive, `min_id` pages
//! forward and wins over `since_id`, `limit` default 20, at most 40, a `Link`
//! header on non-empty pages, rate limits in `X-RateLimit-*` with an ISO 8601
//! reset [1.5]. Plus `/api/v1/instance` and `/api/v2/instance` (whole, with
//! `configuration` and `api_versions`) so that client libraries accept the
//! server, `/api/v1/notifications` and `/api/v1/preferences`, which bots
//! read before the home timeline, and NodeInfo, which tells Mastodon from
//! Misskey. The PostgreSQL backend (`targets/postgres/http.rs`) serves its statuses through
//! the same documents and paging rules.

use super::{
    Allowance, AppState, READER_ID, READER_NAME, Scope, ServedApi, account_author, account_id,
    encode, header_value, host, json_response, param, params, retry_after, to_json, with_scope,
    with_served,
};
use crate::model::{Query, SimStatus};
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use since_id::id::Layout;
use since_id::time::rfc3339_ms;
use std::collections::BTreeSet;
use std::sync::Arc;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(PUBLIC_TIMELINE, get(mastodon_public))
        .route("/api/v1/timelines/local", get(mastodon_local))
        .route(HOME_TIMELINE, get(mastodon_home))
        .route(
            "/api/v1/accounts/verify_credentials",
            get(verify_credentials),
        )
        .route("/api/v1/accounts/lookup", get(account_lookup))
        .route("/api/v1/accounts/{id}", get(account_by_id))
        .route("/api/v1/accounts/{id}/statuses", get(account_statuses))
        .route("/api/v1/timelines/tag/{tag}", get(mastodon_tag))
        .route("/api/v1/notifications", get(notifications))
        .route("/api/v1/preferences", get(preferences))
        // Mastodon.py asks with a trailing slash.
        .route("/api/v1/instance", get(mastodon_instance_v1))
        .route("/api/v1/instance/", get(mastodon_instance_v1))
        .route("/api/v2/instance", get(mastodon_instance_v2))
        .route("/api/v2/instance/", get(mastodon_instance_v2))
        .route("/.well-known/nodeinfo", get(nodeinfo_links))
        .route("/nodeinfo/2.0", get(nodeinfo))
}

/// The 404 of an unknown path: Api::BaseController's `rescue_from
/// ActiveRecord::RecordNotFound` (mastodon/mastodon
/// `app/controllers/api/base_controller.rb`).
pub(super) fn not_found() -> Response {
    mastodon_error(StatusCode::NOT_FOUND, "Record not found", HeaderMap::new())
}

const MASTODON_FALSE: &[&str] = &["0", "f", "false", "off", "F", "FALSE", "OFF", ""];

fn truthy(value: Option<&str>) -> bool {
    value.is_some_and(|v| !MASTODON_FALSE.contains(&v))
}

/// Ruby's `to_i`: leading whitespace, an optional sign, digits; anything else is 0.
fn ruby_to_i(text: &str) -> i64 {
    let t = text.trim_start();
    let (sign, digits) = match t.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, t.strip_prefix('+').unwrap_or(t)),
    };
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse::<i64>().map_or(0, |n| sign * n)
}

/// The version the simulator (and the PostgreSQL backend) claims.
pub const VERSION: &str = "4.3.0";
/// The page size without `limit`, and the largest (`DEFAULT_STATUSES_LIMIT * 2`) [1.1].
const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 2 * DEFAULT_LIMIT;

/// A timeline request's page, as Mastodon reads its parameters [1.1, 1.2]:
/// `limit` is `[params[:limit].to_i.abs, DEFAULT_STATUSES_LIMIT * 2].min`;
/// `max_id` and `since_id` are exclusive; with `min_id`, `since_id` is
/// ignored and the page is the oldest `limit` above `min_id`, listed newest
/// first. The PostgreSQL backend (`targets/postgres/http.rs`) reads its IDs as `i64`.
pub struct Paging<I> {
    pub limit: usize,
    /// The exclusive lower bound: `min_id`, else `since_id`.
    pub after: Option<I>,
    /// The exclusive upper bound, `max_id`.
    pub before: Option<I>,
    /// `min_id` was given: read upwards from it, then reverse.
    pub oldest_first: bool,
}

impl<I> Paging<I> {
    /// `id(name, value)` reads a cursor (None: as if absent); its error is the 400's message.
    pub fn parse(
        params: &[(String, String)],
        id: impl Fn(&str, &str) -> Result<Option<I>, String>,
    ) -> Result<Paging<I>, String> {
        let limit = param(params, "limit").map_or(DEFAULT_LIMIT, |l| {
            ruby_to_i(l).unsigned_abs().min(MAX_LIMIT as u64) as usize
        });
        let cursor = |name: &str| match param(params, name) {
            Some(value) => id(name, value),
            None => Ok(None),
        };
        let (before, since_id, min_id) =
            (cursor("max_id")?, cursor("since_id")?, cursor("min_id")?);
        let oldest_first = min_id.is_some();
        Ok(Paging {
            limit,
            after: if oldest_first { min_id } else { since_id },
            before,
            oldest_first,
        })
    }
}

/// The `Link` header of a non-empty page [1.3]: `next` pages down from its
/// oldest status, `prev` up from its newest, carrying `local`, `remote`,
/// `limit` and `only_media`.
pub fn link_header(
    host: &str,
    path: &str,
    params: &[(String, String)],
    newest: &str,
    oldest: &str,
) -> axum::http::HeaderValue {
    let carried: String = params
        .iter()
        .filter(|(k, _)| ["local", "remote", "limit", "only_media"].contains(&k.as_str()))
        .map(|(k, v)| format!("{}={}&", encode(k), encode(v)))
        .collect();
    let base = format!("http://{host}{path}?{carried}");
    header_value(&format!(
        "<{base}max_id={oldest}>; rel=\"next\", <{base}min_id={newest}>; rel=\"prev\""
    ))
}

/// The public timeline's path.
pub const PUBLIC_TIMELINE: &str = "/api/v1/timelines/public";

/// Mastodon's routes over another store (the PostgreSQL backend's): `public`
/// serves the public timeline, and the v1 instance and NodeInfo documents
/// name the server `title`, with `users` accounts.
pub fn backend_routes<S: Clone + Send + Sync + 'static>(
    public: axum::routing::MethodRouter<S>,
    title: &'static str,
    description: &'static str,
    users: u64,
) -> Router<S> {
    let instance = get(move || async move {
        let body = instance_v1_document("127.0.0.1", title, description, json!({}), users);
        json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
    });
    let nodeinfo = get(move || async move {
        let body = nodeinfo_document("mastodon", VERSION, users, title);
        json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
    });
    Router::new()
        .route(PUBLIC_TIMELINE, public)
        .route("/api/v1/instance", instance.clone())
        .route("/api/v1/instance/", instance)
        .route("/.well-known/nodeinfo", get(nodeinfo_links))
        .route("/nodeinfo/2.0", nodeinfo)
}

/// A status stored in a database (the PostgreSQL backend's): a local
/// author's public post, the whole Status entity as the simulator's [1.4].
pub fn stored_status(id: &str, created_at_ms: i64, account: &str, text: &str) -> Value {
    let host = "127.0.0.1";
    let user = format!("user{account}");
    let url = format!("http://{host}/@{user}");
    let who = Who {
        id: account.parse().unwrap_or(0),
        username: &user,
        acct: &user,
        display_name: &user,
        url: &url,
        bot: true,
    };
    let uri = format!("http://{host}/users/{user}/statuses/{id}");
    status_document(
        id,
        created_at_ms,
        &uri,
        &format!("<p>{text}</p>"),
        account_document(&who, host, 1),
        host,
    )
}

fn mastodon_rate_headers(a: &Allowance) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("x-ratelimit-limit", header_value(&a.limit.to_string()));
    h.insert(
        "x-ratelimit-remaining",
        header_value(&a.remaining.to_string()),
    );
    // `(request_time + reset_period_offset).iso8601(6)` [1.5].
    let reset = DateTime::<Utc>::from_timestamp_millis(a.reset_ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_default();
    h.insert("x-ratelimit-reset", header_value(&reset));
    h
}

fn mastodon_error(status: StatusCode, message: &str, headers: HeaderMap) -> Response {
    json_response(status, headers, to_json(&json!({"error": message})))
}

/// Which statuses a timeline serves: by origin (public, local, remote), the
/// authors the reader follows (home), or one account's (an author's
/// statuses of one origin: local `userN` and `userN@remote.example` are two
/// accounts).
#[derive(Clone)]
enum Origins {
    All,
    Local,
    Remote,
    Home(Arc<BTreeSet<u32>>, Scope),
    Account { remote: bool, author: u32 },
}

impl Origins {
    /// `local=true` or `remote=true` (local wins).
    fn of(params: &[(String, String)]) -> Origins {
        if truthy(param(params, "local")) {
            Origins::Local
        } else if truthy(param(params, "remote")) {
            Origins::Remote
        } else {
            Origins::All
        }
    }

    /// The statuses served, for a recording; `only_media` serves none (the
    /// simulated statuses have no media).
    fn scope(&self, only_media: bool) -> Scope {
        match (only_media, self) {
            (true, _) => Scope::None,
            (false, Origins::All) => Scope::All,
            (false, Origins::Local) => Scope::Local,
            (false, Origins::Remote) => Scope::Remote,
            (false, Origins::Home(_, scope)) => scope.clone(),
            (false, Origins::Account { remote, author }) => Scope::Account {
                remote: *remote,
                author: i64::from(*author),
            },
        }
    }

    fn keeps(&self, s: &SimStatus) -> bool {
        match self {
            Origins::All => true,
            Origins::Local => s.is_local(),
            Origins::Remote => !s.is_local(),
            Origins::Home(follows, _) => follows.contains(&s.author),
            Origins::Account { remote, author } => s.is_local() != *remote && s.author == *author,
        }
    }
}

fn mastodon_account(s: &SimStatus, host: &str) -> Value {
    author_account(s.author, !s.is_local(), host)
}

/// The account of author `author`, local (`userN`, ID `1000000 + N`) or
/// remote (`userN@remote.example`, `2000000 + N`: [`account_id`]).
fn author_account(author: u32, remote: bool, host: &str) -> Value {
    let username = format!("user{author}");
    let (acct, url) = if !remote {
        (username.clone(), format!("http://{host}/@{username}"))
    } else {
        (
            format!("{username}@remote.example"),
            format!("https://remote.example/@{username}"),
        )
    };
    let name = format!("User {author}");
    let who = Who {
        id: account_id(author, remote),
        username: &username,
        acct: &acct,
        display_name: &name,
        url: &url,
        bot: true,
    };
    account_document(&who, host, 1)
}

/// What tells one account from another in Mastodon's Account entity.
struct Who<'a> {
    id: u64,
    username: &'a str,
    acct: &'a str,
    display_name: &'a str,
    url: &'a str,
    bot: bool,
}

/// Mastodon's Account entity (docs.joinmastodon.org, entities/Account): every
/// attribute not marked optional, and `noindex`, `indexable`,
/// `hide_collections` and `roles`, which 4.3 sends for local accounts.
fn account_document(who: &Who, host: &str, statuses: u64) -> Value {
    json!({
        "id": who.id.to_string(),
        "username": who.username,
        "acct": who.acct,
        "display_name": who.display_name,
        "locked": false,
        "bot": who.bot,
        "discoverable": who.bot,
        "group": false,
        "created_at": "2024-01-01T00:00:00.000Z",
        "note": "",
        "url": who.url,
        "uri": who.url,
        "avatar": format!("http://{host}/avatars/original/missing.png"),
        "avatar_static": format!("http://{host}/avatars/original/missing.png"),
        "header": format!("http://{host}/headers/original/missing.png"),
        "header_static": format!("http://{host}/headers/original/missing.png"),
        "followers_count": 0,
        "following_count": 0,
        "statuses_count": statuses,
        "last_status_at": null,
        "noindex": false,
        "indexable": false,
        "hide_collections": false,
        "emojis": [],
        "fields": [],
        "roles": [],
    })
}

fn mastodon_status(s: &SimStatus, layout: &Layout, host: &str) -> Value {
    let id = layout.format(s.id);
    let account = mastodon_account(s, host);
    let user = format!("user{}", s.author);
    let uri = if s.is_local() {
        format!("http://{host}/users/{user}/statuses/{id}")
    } else {
        format!(
            "https://remote.example/users/{user}/statuses/{}",
            s.posted_at_ms
        )
    };
    let content = format!(
        "<p>Status {id} from the snowleak simulator ({}) #snowleak</p>",
        s.origin
    );
    // Remote statuses carry their `published` time, which is not ID order [1.6].
    status_document(&id, s.posted_at_ms, &uri, &content, account, host)
}

/// Mastodon's Status entity (docs.joinmastodon.org, entities/Status): every
/// attribute not marked optional, for a public post that replies to,
/// reblogs, mentions and attaches nothing, tagged `#snowleak`.
fn status_document(
    id: &str,
    created_at_ms: i64,
    uri: &str,
    content: &str,
    account: Value,
    host: &str,
) -> Value {
    json!({
        "id": id,
        "created_at": rfc3339_ms(created_at_ms),
        "in_reply_to_id": null,
        "in_reply_to_account_id": null,
        "sensitive": false,
        "spoiler_text": "",
        "visibility": "public",
        "language": "en",
        "uri": uri,
        "url": uri,
        "replies_count": 0,
        "reblogs_count": 0,
        "favourites_count": 0,
        "edited_at": null,
        "content": content,
        "reblog": null,
        "application": null,
        "account": account,
        "media_attachments": [],
        "mentions": [],
        "tags": [{"name": "snowleak", "url": format!("http://{host}/tags/snowleak")}],
        "emojis": [],
        "card": null,
        "poll": null,
    })
}

async fn mastodon_public(
    State(app): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let params = params(&raw);
    let origins = Origins::of(&params);
    mastodon_timeline(app, headers, PUBLIC_TIMELINE, params, origins)
}

async fn mastodon_local(
    State(app): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    mastodon_timeline(
        app,
        headers,
        "/api/v1/timelines/local",
        params(&raw),
        Origins::Local,
    )
}

async fn mastodon_tag(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(tag): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let path = format!("/api/v1/timelines/tag/{}", encode(&tag));
    let params = params(&raw);
    let origins = Origins::of(&params);
    if !tag.eq_ignore_ascii_case("snowleak") {
        // Only #snowleak exists; other tags are empty timelines.
        let allowance = app.limiter.check(ServedApi::Mastodon, (app.clock)());
        let empty = json_response(
            StatusCode::OK,
            mastodon_rate_headers(&allowance),
            b"[]".to_vec(),
        );
        return with_scope(empty, Scope::None);
    }
    mastodon_timeline(app, headers, &path, params, origins)
}

/// The rate limiter's answer to a Mastodon request: its rate-limit
/// headers, or the 429 that refuses it.
fn mastodon_allowed(app: &AppState) -> Result<HeaderMap, Box<Response>> {
    let allowance = app.limiter.check(ServedApi::Mastodon, (app.clock)());
    let mut headers = mastodon_rate_headers(&allowance);
    if !allowance.allowed {
        retry_after(&allowance, &mut headers);
        return Err(Box::new(mastodon_error(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many requests",
            headers,
        )));
    }
    Ok(headers)
}

fn mastodon_timeline(
    app: AppState,
    request_headers: HeaderMap,
    path: &str,
    params: Vec<(String, String)>,
    origins: Origins,
) -> Response {
    let mut headers = match mastodon_allowed(&app) {
        Ok(headers) => headers,
        Err(refused) => return *refused,
    };
    let layout = app.layout();
    let paging = Paging::parse(&params, |_, v| {
        layout.parse(v).map(Some).map_err(|e| e.to_string())
    });
    let paging = match paging {
        Ok(paging) => paging,
        Err(e) => return mastodon_error(StatusCode::BAD_REQUEST, &e, headers),
    };
    let only_media = truthy(param(&params, "only_media"));
    let query = Query {
        after: paging.after,
        before: paging.before,
        limit: paging.limit,
        oldest_first: paging.oldest_first,
    };
    let scope = origins.scope(only_media);
    let keep = move |s: &SimStatus| !only_media && origins.keeps(s);
    let (mut statuses, layout, _) = app.query(&query, keep);
    if query.oldest_first {
        statuses.reverse();
    }
    let host = host(&request_headers);
    if let (Some(first), Some(last)) = (statuses.first(), statuses.last()) {
        let link = link_header(
            &host,
            path,
            &params,
            &layout.format(first.id),
            &layout.format(last.id),
        );
        headers.insert(header::LINK, link);
    }
    let body: Vec<Value> = statuses
        .iter()
        .map(|s| mastodon_status(s, &layout, &host))
        .collect();
    let response = json_response(StatusCode::OK, headers, to_json(&body));
    with_scope(with_served(response, &statuses), scope)
}

/// The home timeline's path: the statuses of the accounts the reader follows.
pub const HOME_TIMELINE: &str = "/api/v1/timelines/home";

async fn mastodon_home(
    State(app): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let (follows, scope) = app.home();
    let origins = Origins::Home(follows, scope);
    mastodon_timeline(app, headers, HOME_TIMELINE, params(&raw), origins)
}

/// `GET /api/v1/accounts/verify_credentials`, which clients call to learn
/// who they are (Mastodon's CredentialAccount: an Account with `source`):
/// every token is the reader.
async fn verify_credentials(headers: HeaderMap) -> Response {
    let mut body = reader_account(&host(&headers));
    body["source"] = json!({"privacy": "public", "sensitive": false, "language": "en", "note": "", "fields": []});
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

/// The reader's Account: who every token logs in as; it posts nothing.
fn reader_account(host: &str) -> Value {
    let url = format!("http://{host}/@{READER_NAME}");
    let who = Who {
        id: READER_ID,
        username: READER_NAME,
        acct: READER_NAME,
        display_name: "Reader",
        url: &url,
        bot: false,
    };
    account_document(&who, host, 0)
}

/// An account the server knows: the reader, or an author's (local or remote).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Account {
    Reader,
    Author { author: u32, remote: bool },
}

impl Account {
    /// By ID, as Mastodon writes it (digits, no sign or padding).
    fn by_id(text: &str, authors: u32) -> Option<Account> {
        let id: u64 = text
            .parse()
            .ok()
            .filter(|id: &u64| id.to_string() == text)?;
        if id == READER_ID {
            return Some(Account::Reader);
        }
        let (author, remote) = account_author(id, authors)?;
        Some(Account::Author { author, remote })
    }

    /// By `acct`: `snowleak`, `userN` or `userN@remote.example` (a leading
    /// `@` and this server's own domain allowed; case-insensitive).
    fn by_acct(acct: &str, host: &str, authors: u32) -> Option<Account> {
        let acct = acct.trim_start_matches('@').to_ascii_lowercase();
        let (user, domain) = match acct.split_once('@') {
            Some((user, domain)) => (user.to_string(), Some(domain.to_string())),
            None => (acct, None),
        };
        let remote = match domain.as_deref() {
            None => false,
            Some("remote.example") => true,
            Some(d) if d == host.to_ascii_lowercase() => false,
            Some(_) => return None,
        };
        if user == READER_NAME && !remote {
            return Some(Account::Reader);
        }
        let author: u32 = user.strip_prefix("user")?.parse().ok()?;
        (author < authors && user == format!("user{author}"))
            .then_some(Account::Author { author, remote })
    }

    fn document(self, host: &str) -> Value {
        match self {
            Account::Reader => reader_account(host),
            Account::Author { author, remote } => author_account(author, remote, host),
        }
    }
}

/// `GET /api/v1/accounts/lookup?acct=...` (docs.joinmastodon.org,
/// methods/accounts, "lookup"): the Account, or 404.
async fn account_lookup(
    State(app): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let host = host(&headers);
    let authors = app.with_config(|c| c.authors);
    let params = params(&raw);
    match param(&params, "acct").and_then(|a| Account::by_acct(a, &host, authors)) {
        Some(account) => json_response(
            StatusCode::OK,
            HeaderMap::new(),
            to_json(&account.document(&host)),
        ),
        None => not_found(),
    }
}

/// `GET /api/v1/accounts/{id}`: the Account, or 404.
async fn account_by_id(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let authors = app.with_config(|c| c.authors);
    match Account::by_id(&id, authors) {
        Some(account) => json_response(
            StatusCode::OK,
            HeaderMap::new(),
            to_json(&account.document(&host(&headers))),
        ),
        None => not_found(),
    }
}

/// `GET /api/v1/accounts/{id}/statuses` (docs.joinmastodon.org,
/// methods/accounts, "statuses"): that account's statuses, paged as a
/// timeline is, with its `Link` header; a recording gives it the scope of
/// that account alone. The simulated statuses are public and pin, reply
/// to, reblog and attach nothing: `exclude_replies` and `exclude_reblogs`
/// change nothing, `pinned=true` and `only_media` serve none, `tagged`
/// serves all for `snowleak` (every status carries it) and none for another
/// tag. The reader posts nothing; an unknown account is 404.
async fn account_statuses(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let authors = app.with_config(|c| c.authors);
    let Some(account) = Account::by_id(&id, authors) else {
        return not_found();
    };
    let params = params(&raw);
    let path = format!("/api/v1/accounts/{id}/statuses");
    let other_tag = param(&params, "tagged").is_some_and(|t| !t.eq_ignore_ascii_case("snowleak"));
    match account {
        Account::Author { author, remote } if !truthy(param(&params, "pinned")) && !other_tag => {
            let origins = Origins::Account { remote, author };
            mastodon_timeline(app, headers, &path, params, origins)
        }
        _ => {
            let allowance = app.limiter.check(ServedApi::Mastodon, (app.clock)());
            let empty = json_response(
                StatusCode::OK,
                mastodon_rate_headers(&allowance),
                b"[]".to_vec(),
            );
            with_scope(empty, Scope::None)
        }
    }
}

fn instance_fields(host: &str) -> (String, Value) {
    let title = "snowleak simulator".to_string();
    let urls =
        json!({"streaming": format!("ws://{host}"), "streaming_api": format!("ws://{host}")});
    (title, urls)
}

async fn mastodon_instance_v1(headers: HeaderMap) -> Response {
    let host = host(&headers);
    let (title, urls) = instance_fields(&host);
    let body = instance_v1_document(
        &host,
        &title,
        "A leaky timeline for since_id experiments",
        urls,
        0,
    );
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

/// `configuration`'s limits, as a default Mastodon 4.3 has them (the
/// example of docs.joinmastodon.org, entities/Instance; v1 and v2 share
/// them): clients read them before they post, and some refuse a server
/// without them.
fn configuration_limits() -> Value {
    json!({
        "accounts": {"max_featured_tags": 10, "max_pinned_statuses": 5},
        "statuses": {"max_characters": 500, "max_media_attachments": 4, "characters_reserved_per_url": 23},
        "media_attachments": {
            "supported_mime_types": [
                "image/jpeg", "image/png", "image/gif", "image/heic", "image/heif", "image/webp",
                "image/avif", "video/webm", "video/mp4", "video/quicktime", "video/ogg",
                "audio/wave", "audio/wav", "audio/x-wav", "audio/x-pn-wave", "audio/vnd.wave",
                "audio/ogg", "audio/vorbis", "audio/mpeg", "audio/mp3", "audio/webm",
                "audio/flac", "audio/aac", "audio/m4a", "audio/x-m4a", "audio/mp4",
                "audio/3gpp", "video/x-ms-asf",
            ],
            "image_size_limit": 16_777_216,
            "image_matrix_limit": 33_177_600,
            "video_size_limit": 103_809_024,
            "video_frame_rate_limit": 120,
            "video_matrix_limit": 8_294_400,
        },
        "polls": {
            "max_options": 4,
            "max_characters_per_option": 50,
            "min_expiration": 300,
            "max_expiration": 2_629_746,
        },
    })
}

/// Mastodon's v1 instance entity (docs.joinmastodon.org, entities/V1_Instance):
/// every attribute, `configuration` whole; also served by the PostgreSQL
/// backend ([`backend_routes`]).
fn instance_v1_document(
    host: &str,
    title: &str,
    description: &str,
    urls: Value,
    users: u64,
) -> Value {
    json!({
        "uri": host,
        "title": title,
        "short_description": description,
        "description": description,
        "email": "",
        "version": VERSION,
        "urls": urls,
        "stats": {"user_count": users, "status_count": 0, "domain_count": 1},
        "thumbnail": null,
        "languages": ["en"],
        "registrations": false,
        "approval_required": false,
        "invites_enabled": false,
        "configuration": configuration_limits(),
        "contact_account": null,
        "rules": [],
    })
}

/// The API version `/api/v2/instance` reports in `api_versions.mastodon`
/// for [`VERSION`]: "API changes will come with a version number" from
/// 4.3.0, which is 2 (docs.joinmastodon.org, entities/Instance,
/// `api_versions`; mastodon/mastodon `lib/mastodon/version.rb`, `api_versions`).
const API_VERSION: u32 = 2;

/// Mastodon's v2 instance entity (docs.joinmastodon.org, entities/Instance):
/// every attribute of 4.3, `configuration` and `api_versions` included.
async fn mastodon_instance_v2(headers: HeaderMap) -> Response {
    let host = host(&headers);
    let (title, urls) = instance_fields(&host);
    let mut configuration = configuration_limits();
    configuration["urls"] = json!({"streaming": urls["streaming"]});
    // A P-256 public key made for the simulator (a VAPID key is one, base64url):
    // a client may decode it; nothing is ever pushed.
    configuration["vapid"] = json!({"public_key": "BGza0fXWVrRGVPuqzBEePx_VivqzVed_rv9-V3s2_qQah1ihMMbsxXLhm-pj4TgAEmBhQWXZj7XdLCDJ7XkYZlo="});
    configuration["translation"] = json!({"enabled": false});
    let body = json!({
        "domain": host,
        "title": title,
        "version": VERSION,
        "source_url": "https://github.com/mastodon/mastodon",
        "description": "A leaky timeline for since_id experiments",
        "usage": {"users": {"active_month": 0}},
        "thumbnail": {"url": format!("http://{host}/packs/media/images/preview.png")},
        "icon": [{"src": format!("http://{host}/packs/media/icons/android-chrome-36x36.png"), "size": "36x36"}],
        "languages": ["en"],
        "configuration": configuration,
        "registrations": {"enabled": false, "approval_required": false, "message": null, "url": null},
        "api_versions": {"mastodon": API_VERSION},
        "contact": {"email": "", "account": null},
        "rules": [],
    });
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

/// `GET /api/v1/preferences` (docs.joinmastodon.org, methods/preferences;
/// entities/Preferences): the reader's defaults, Mastodon's own.
async fn preferences() -> Response {
    let body = json!({
        "posting:default:visibility": "public",
        "posting:default:sensitive": false,
        "posting:default:language": null,
        "reading:expand:media": "default",
        "reading:expand:spoilers": false,
    });
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

/// The reader's notifications: one `follow` from each of the first
/// [`FOLLOWERS`] authors it follows, notification `n` (IDs 1 up, oldest
/// first) from the `n`-th, a minute apart from 2024-01-01. Bots read them
/// before their home timeline, and a plausible non-empty list, paged and
/// linked as Mastodon pages it, exercises what they parse. Nothing new ever
/// arrives: these are not a timeline the recording judges.
const FOLLOWERS: usize = 3;

/// `GET /api/v1/notifications` (docs.joinmastodon.org, methods/notifications;
/// entities/Notification): `max_id`, `since_id`, `min_id` (exclusive; `min_id`
/// wins over `since_id` and pages forward), `limit` 40 (at most 80),
/// `types[]`, `exclude_types[]`, `account_id`; a `Link` header on a non-empty
/// page (mastodon/mastodon `app/controllers/api/v1/notifications_controller.rb`:
/// `DEFAULT_NOTIFICATIONS_LIMIT = 40`, `limit_param`, `insert_pagination_headers`).
async fn notifications(
    State(app): State<AppState>,
    request_headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let mut headers = match mastodon_allowed(&app) {
        Ok(headers) => headers,
        Err(refused) => return *refused,
    };
    let params = params(&raw);
    let number = |name: &str| param(&params, name).map(|v| ruby_to_i(v).max(0) as u64);
    let limit =
        param(&params, "limit").map_or(40, |l| ruby_to_i(l).unsigned_abs().min(80)) as usize;
    let listed = |name: &str| -> Vec<&str> {
        params
            .iter()
            .filter(|(k, _)| k == name || k == &format!("{name}[]"))
            .map(|(_, v)| v.as_str())
            .collect()
    };
    let (types, excluded) = (listed("types"), listed("exclude_types"));
    let wanted = |t: &str| (types.is_empty() || types.contains(&t)) && !excluded.contains(&t);
    let (min_id, since_id, max_id) = (number("min_id"), number("since_id"), number("max_id"));
    let account = param(&params, "account_id");
    let host = host(&request_headers);
    let (follows, _) = app.home();
    let mut page: Vec<(u64, u32)> = follows
        .iter()
        .take(FOLLOWERS)
        .enumerate()
        .map(|(i, &author)| (i as u64 + 1, author))
        .filter(|&(id, author)| {
            wanted("follow")
                && account.is_none_or(|a| a == (1_000_000 + u64::from(author)).to_string())
                && min_id.or(since_id).is_none_or(|after| id > after)
                && max_id.is_none_or(|before| id < before)
        })
        .collect();
    // Newest first; from `min_id`, the oldest `limit` above it.
    page.reverse();
    if min_id.is_some() {
        let skip = page.len().saturating_sub(limit);
        page.drain(..skip);
    } else {
        page.truncate(limit);
    }
    if let (Some(newest), Some(oldest)) = (page.first(), page.last()) {
        let path = "/api/v1/notifications";
        let base = format!("http://{host}{path}?limit={limit}&");
        let link = format!(
            "<{base}max_id={}>; rel=\"next\", <{base}min_id={}>; rel=\"prev\"",
            oldest.0, newest.0
        );
        headers.insert(header::LINK, header_value(&link));
    }
    let body: Vec<Value> = page
        .iter()
        .map(|&(id, author)| {
            let username = format!("user{author}");
            let url = format!("http://{host}/@{username}");
            let name = format!("User {author}");
            let who = Who {
                id: 1_000_000 + u64::from(author),
                username: &username,
                acct: &username,
                display_name: &name,
                url: &url,
                bot: true,
            };
            json!({
                "id": id.to_string(),
                "type": "follow",
                "group_key": format!("ungrouped-{id}"),
                "created_at": rfc3339_ms(NOTIFIED_FROM_MS + id as i64 * 60_000),
                "account": account_document(&who, &host, 1),
            })
        })
        .collect();
    json_response(StatusCode::OK, headers, to_json(&body))
}

/// 2024-01-01T00:00:00Z: the notifications are a minute apart from here.
const NOTIFIED_FROM_MS: i64 = 1_704_067_200_000;

/// The software a profile's server runs, for NodeInfo: Misskey for the
/// misskey profile, Mastodon for the others.
fn software(app: &AppState) -> (&'static str, &'static str) {
    if app.with_config(|c| c.profile == "misskey") {
        ("misskey", super::misskey::VERSION)
    } else {
        ("mastodon", VERSION)
    }
}

/// `GET /.well-known/nodeinfo`: where the schema-2.0 document is
/// (<https://nodeinfo.diaspora.software/protocol.html>). Also served by the
/// PostgreSQL backend ([`backend_routes`]).
async fn nodeinfo_links(headers: HeaderMap) -> Response {
    let host = host(&headers);
    let body = json!({"links": [{
        "rel": "http://nodeinfo.diaspora.software/ns/schema/2.0",
        "href": format!("http://{host}/nodeinfo/2.0"),
    }]});
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

/// The NodeInfo 2.0 document (<https://nodeinfo.diaspora.software/schema.html>):
/// clients read `software.name` to tell Mastodon from Misskey.
fn nodeinfo_document(name: &str, version: &str, users: u64, node: &str) -> Value {
    json!({
        "version": "2.0",
        "software": {"name": name, "version": version},
        "protocols": ["activitypub"],
        "services": {"outbound": [], "inbound": []},
        "usage": {
            "users": {"total": users, "activeMonth": users, "activeHalfyear": users},
            "localPosts": 0,
        },
        "openRegistrations": false,
        "metadata": {"nodeName": node},
    })
}

/// `GET /nodeinfo/2.0`.
async fn nodeinfo(State(app): State<AppState>) -> Response {
    let (name, version) = software(&app);
    let authors = app.with_config(|c| c.authors);
    let body = nodeinfo_document(name, version, authors as u64, "snowleak simulator");
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}
