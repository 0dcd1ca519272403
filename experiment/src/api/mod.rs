//! Targets: what is polled, and how each API's dialect turns a
//! [`PageRequest`] into an HTTP request and a response body into [`Item`]s.
//!
//! Dialects are pure (build a request description, parse bytes); the one
//! async function [`HttpTarget::fetch`] is the thin shell that sends it with
//! reqwest. The embedded simulator is reached through exactly this client in
//! real time, the same way a real API is.

use crate::id::{Id, Layout};
use crate::poller::{Item, PageRequest};
use serde_json::Value;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(test)]
mod loopback_tests;
mod pace;
pub mod spec;

pub use pace::{Pacer, RateInfo, rate_info};

/// The largest response body accepted; a bigger one is an error, not an allocation.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// An API dialect: its endpoint, its paging parameters and its JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// Twitter API v1.1 `GET lists/statuses`: `since_id` exclusive, `max_id` inclusive, `count` <= 200.
    TwitterV1 { list_id: String },
    /// Mastodon `GET /api/v1/timelines/...`: `since_id`, `max_id` (both exclusive), `limit` <= 40.
    Mastodon { timeline: String },
    /// Misskey `POST /api/notes/...-timeline`: `sinceId`, `untilId`, `limit` <= 100.
    Misskey { endpoint: String },
    /// X API v2 `GET /2/users/{id}/tweets` or `GET /2/tweets/search/recent`:
    /// `since_id` and `until_id` (both exclusive), `max_results` 5 (search: 10) to 100.
    X { endpoint: XEndpoint },
    /// Discord `GET /channels/{id}/messages`: `before` *or* `after`, `limit` 1-100.
    Discord { channel_id: String },
}

/// The two X v2 timelines that take `since_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XEndpoint {
    UserTweets { user_id: String },
    SearchRecent { query: String },
}

/// How a dialect carries its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer TOKEN` (Mastodon, X, Twitter).
    Bearer,
    /// `Authorization: Bot TOKEN` (Discord).
    Bot,
    /// The JSON body field `i` (Misskey).
    BodyField,
}

/// A request to send, independent of the HTTP library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    pub post: bool,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub json_body: Option<Value>,
}

impl Dialect {
    /// The largest page the API serves.
    pub fn max_limit(&self) -> usize {
        match self {
            Dialect::TwitterV1 { .. } => 200,
            Dialect::Mastodon { .. } => 40,
            Dialect::Misskey { .. } | Dialect::X { .. } | Dialect::Discord { .. } => 100,
        }
    }

    /// The smallest page the API accepts (X refuses `max_results` below 5, or 10 for search).
    pub fn min_limit(&self) -> usize {
        match self {
            Dialect::X {
                endpoint: XEndpoint::UserTweets { .. },
            } => 5,
            Dialect::X {
                endpoint: XEndpoint::SearchRecent { .. },
            } => 10,
            _ => 1,
        }
    }

    /// The page size actually asked for, for a poller that wants `limit`.
    pub fn page_limit(&self, limit: usize) -> usize {
        limit.clamp(self.min_limit(), self.max_limit())
    }

    /// How the token travels.
    pub fn auth(&self) -> Auth {
        match self {
            Dialect::Misskey { .. } => Auth::BodyField,
            Dialect::Discord { .. } => Auth::Bot,
            _ => Auth::Bearer,
        }
    }

    /// The environment variable the token is read from.
    pub fn token_env(&self) -> &'static str {
        match self {
            Dialect::TwitterV1 { .. } | Dialect::X { .. } => "X_BEARER_TOKEN",
            Dialect::Mastodon { .. } => "MASTODON_ACCESS_TOKEN",
            Dialect::Misskey { .. } => "MISSKEY_TOKEN",
            Dialect::Discord { .. } => "DISCORD_BOT_TOKEN",
        }
    }

    pub fn build(&self, layout: &Layout, req: &PageRequest) -> HttpRequest {
        let limit = self.page_limit(req.limit).to_string();
        match self {
            Dialect::TwitterV1 { list_id } => {
                let mut query = vec![
                    ("list_id".to_string(), list_id.clone()),
                    ("count".into(), limit),
                ];
                if let Some(since) = req.since {
                    query.push(("since_id".into(), layout.format(since)));
                }
                if let Some(before) = req.before {
                    // max_id is inclusive: ask for everything up to the ID just below.
                    query.push(("max_id".into(), layout.format(before.pred())));
                }
                HttpRequest {
                    post: false,
                    path: "/1.1/lists/statuses.json".into(),
                    query,
                    json_body: None,
                }
            }
            Dialect::Mastodon { timeline } => {
                // since_id returns the *newest* `limit` statuses above it: with more new
                // statuses than a page, the middle is silently dropped [docs/api-facts.md 1.2]. The
                // poller sees the full page and pages back with max_id (exclusive) until
                // a page is not full, which fills that middle in.
                let (path, mut query) = mastodon_timeline(timeline);
                query.push(("limit".into(), limit));
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
            Dialect::Misskey { endpoint } => {
                let mut body = serde_json::Map::new();
                body.insert("limit".into(), Value::from(self.page_limit(req.limit)));
                if let Some(since) = req.since {
                    body.insert("sinceId".into(), Value::from(layout.format(since)));
                }
                // sinceId alone returns the *oldest* notes after the cursor; with an
                // untilId Misskey returns the newest first, as the poller expects.
                let until = req.before.unwrap_or(layout.max_id());
                body.insert("untilId".into(), Value::from(layout.format(until)));
                HttpRequest {
                    post: true,
                    path: format!("/api/notes/{endpoint}"),
                    query: vec![],
                    json_body: Some(Value::Object(body)),
                }
            }
            Dialect::X { endpoint } => {
                let (path, mut query) = match endpoint {
                    XEndpoint::UserTweets { user_id } => {
                        (format!("/2/users/{user_id}/tweets"), vec![])
                    }
                    XEndpoint::SearchRecent { query } => (
                        "/2/tweets/search/recent".to_string(),
                        vec![("query".to_string(), query.clone())],
                    ),
                };
                query.push(("max_results".into(), limit));
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
            Dialect::Discord { channel_id } => {
                // `before`, `after` and `around` are mutually exclusive, and `after`
                // returns the messages *immediately after* the cursor (the oldest
                // ones), not the newest [docs/api-facts.md 4]. A full `after` page would cut
                // the window at the top, where back-paging cannot reach. So every
                // request asks for the newest page below `before` (none on page 0),
                // and the items at or below `since` are dropped locally
                // (`Dialect::parse_page`): the page is "full" only if all of it is
                // above the cursor, and then the poller pages back with `before`,
                // exactly as with Mastodon's since_id. The price is bytes (old
                // messages are sent again each tick), not requests.
                let mut query = vec![("limit".to_string(), limit)];
                if let Some(before) = req.before {
                    query.push(("before".into(), layout.format(before)));
                }
                HttpRequest {
                    post: false,
                    path: format!("/channels/{channel_id}/messages"),
                    query,
                    json_body: None,
                }
            }
        }
    }

    /// Reads the response to `req` into items, in the order the API gave them,
    /// keeping only items inside the request's window (`since < id < before`)
    /// for dialects that cannot express it (Discord).
    pub fn parse_page(
        &self,
        layout: &Layout,
        req: &PageRequest,
        body: &[u8],
    ) -> Result<Vec<Item>, String> {
        // More items than asked for is a protocol violation. The page is refused
        // whole (a failed request, cursor unchanged) rather than cut to the limit:
        // which `limit` items a lying server meant is unknowable, and keeping any
        // of them would move the cursor on a page we cannot trust. An item
        // repeated within a page is counted once (a repeat is a duplicate, not a
        // violation). The raw count comes first, from a pass that allocates
        // nothing per item, so a page far over the limit never becomes a tree
        // of values.
        let asked = self.page_limit(req.limit);
        let count = self.count_entries(body);
        let too_many = |n: usize| {
            format!("response has {n} items, more than the page limit of {asked} asked for")
        };
        if count > 2 * asked {
            return Err(too_many(count));
        }
        let mut items = self.parse(layout, body)?;
        if count > asked {
            let distinct = items
                .iter()
                .map(|i| i.id)
                .collect::<std::collections::HashSet<_>>();
            if distinct.len() > asked {
                return Err(too_many(distinct.len()));
            }
        }
        if matches!(self, Dialect::Discord { .. }) {
            items.retain(|item| {
                req.since.is_none_or(|s| item.id > s) && req.before.is_none_or(|b| item.id < b)
            });
        }
        Ok(items)
    }

    /// How many entries the body's timeline array has (0 for anything else: the
    /// full parse reports what is wrong with it). Entries are skipped, not kept.
    fn count_entries(&self, body: &[u8]) -> usize {
        use serde::de::IgnoredAny;
        #[derive(serde::Deserialize)]
        struct XPage {
            data: Option<Vec<IgnoredAny>>,
        }
        if matches!(self, Dialect::X { .. }) {
            serde_json::from_slice::<XPage>(body)
                .ok()
                .and_then(|page| page.data)
                .map_or(0, |data| data.len())
        } else {
            serde_json::from_slice::<Vec<IgnoredAny>>(body).map_or(0, |entries| entries.len())
        }
    }

    /// Reads a response body into items, in the order the API gave them.
    pub fn parse(&self, layout: &Layout, body: &[u8]) -> Result<Vec<Item>, String> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| format!("response is not JSON: {e}"))?;
        let entries = match (self, value) {
            (_, Value::Array(entries)) if !matches!(self, Dialect::X { .. }) => entries,
            (Dialect::X { .. }, Value::Object(mut map)) => match map.remove("data") {
                Some(Value::Array(entries)) => entries,
                Some(_) => return Err("X response: `data` is not an array".into()),
                // An empty result has no `data`, only `meta.result_count: 0`.
                None if map.get("meta").is_some() && map.get("errors").is_none() => vec![],
                None => {
                    return Err(format!(
                        "X response without data: {}",
                        excerpt(&serde_json::to_vec(&map).unwrap_or_default())
                    ));
                }
            },
            (Dialect::X { .. }, _) => {
                return Err(format!("response is not a JSON object: {}", excerpt(body)));
            }
            _ => return Err(format!("response is not a JSON array: {}", excerpt(body))),
        };
        entries
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                self.parse_item(layout, entry)
                    .map_err(|e| format!("item {i}: {e}"))
            })
            .collect()
    }

    fn parse_item(&self, layout: &Layout, entry: &Value) -> Result<Item, String> {
        let (id_field, created_field, author) = match self {
            Dialect::TwitterV1 { .. } => {
                ("id_str", "created_at", entry.pointer("/user/screen_name"))
            }
            Dialect::Mastodon { .. } => ("id", "created_at", entry.pointer("/account/acct")),
            Dialect::Misskey { .. } => ("id", "createdAt", entry.pointer("/user/username")),
            Dialect::X { .. } => ("id", "created_at", entry.get("author_id")),
            Dialect::Discord { .. } => ("id", "timestamp", entry.pointer("/author/username")),
        };
        let id_text = match entry.get(id_field) {
            Some(Value::String(s)) => s.clone(),
            // Twitter's `id` is a JSON number; it is exact only when read as u64.
            None if id_field == "id_str" => match entry.get("id") {
                Some(Value::Number(n)) if n.as_u64().is_some() => n.to_string(),
                _ => return Err("no id_str and no integer id".into()),
            },
            Some(other) => return Err(format!("{id_field} is not a string: {other}")),
            None => return Err(format!("no {id_field}")),
        };
        let id: Id = layout.parse(&id_text).map_err(|e| e.to_string())?;
        Ok(Item {
            id,
            id_text,
            created_at: entry
                .get(created_field)
                .and_then(Value::as_str)
                .map(str::to_string),
            author: author.and_then(Value::as_str).map(str::to_string),
        })
    }

    /// The request as a human reads it, token redacted: for `--dry-run`.
    pub fn describe(&self, base: &str, layout: &Layout, req: &PageRequest, token: bool) -> String {
        let http = self.build(layout, req);
        let method = if http.post { "POST" } else { "GET" };
        let mut out = format!("{method} {}", full_url(base, &http));
        if token && self.auth() != Auth::BodyField {
            let scheme = if self.auth() == Auth::Bot {
                "Bot"
            } else {
                "Bearer"
            };
            out.push_str(&format!("\n  Authorization: {scheme} <redacted>"));
        }
        if let Some(mut body) = http.json_body {
            if let (true, Value::Object(map)) = (token, &mut body) {
                map.insert("i".into(), Value::from("<redacted>"));
            }
            out.push_str(&format!("\n  body: {body}"));
        }
        out
    }
}

/// `base` + the request's path and query, percent-encoded as it is sent
/// (`base` is used as given, so a placeholder such as `http://127.0.0.1:PORT` works).
pub fn full_url(base: &str, http: &HttpRequest) -> String {
    let base = base.trim_end_matches('/');
    match reqwest::Url::parse(&format!("http://placeholder{}", http.path)) {
        Ok(mut url) => {
            if !http.query.is_empty() {
                url.query_pairs_mut().extend_pairs(&http.query);
            }
            let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
            format!("{base}{}{query}", url.path())
        }
        Err(_) => format!("{base}{}", http.path),
    }
}

/// Which Misskey layout IDs like these are, from their shape alone [docs/api-facts.md 3.3]:
/// 10 base36 characters = `aid`, 16 = `aidx`, 24 hex digits starting 8-f =
/// `meid` (0-7 would be `objectid`, unsupported), 26 Crockford base32 = `ulid`.
/// Every ID must agree; anything else is an error naming `--layout`.
pub fn detect_misskey_layout<S: AsRef<str>>(ids: &[S]) -> Result<Layout, String> {
    fn shape(id: &str) -> Option<&'static str> {
        let base36 = |c: char| c.is_ascii_digit() || c.is_ascii_lowercase();
        let hex = |c: char| c.is_ascii_hexdigit() && !c.is_ascii_uppercase();
        let crockford = |c: char| {
            let c = c.to_ascii_uppercase();
            c.is_ascii_digit() || (c.is_ascii_uppercase() && !"ILOU".contains(c))
        };
        match id.len() {
            10 if id.chars().all(base36) => Some("misskey-aid"),
            16 if id.chars().all(base36) => Some("misskey-aidx"),
            24 if id.chars().all(hex) && id.starts_with(|c: char| "89abcdef".contains(c)) => {
                Some("misskey-meid")
            }
            26 if id.chars().all(crockford)
                && id.starts_with(|c: char| ('0'..='7').contains(&c)) =>
            {
                Some("ulid")
            }
            _ => None,
        }
    }
    let mut found: Option<&'static str> = None;
    for id in ids {
        let id = id.as_ref();
        let Some(name) = shape(id) else {
            return Err(format!(
                "cannot tell the ID layout of '{id}' (aid, aidx, meid and ulid are known): pass --layout"
            ));
        };
        if found.is_some_and(|f| f != name) {
            return Err(format!(
                "IDs of two layouts ({} and {name}): pass --layout",
                found.unwrap_or_default()
            ));
        }
        found = Some(name);
    }
    let name =
        found.ok_or("no IDs to detect the layout from (the timeline is empty): pass --layout")?;
    name.parse::<Layout>().map_err(|e| e.to_string())
}

fn mastodon_timeline(timeline: &str) -> (String, Vec<(String, String)>) {
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

fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(60)]).replace(['\n', '\r'], " ");
    if body.len() > 60 {
        format!("{text}...")
    } else {
        text
    }
}

/// A secret token: read from the environment or a file, never printed.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    pub fn new(secret: String) -> Token {
        Token(secret.trim().to_string())
    }

    /// The token from `--token-file` if given, else from the environment
    /// variable `env` (empty counts as unset). Never from the command line.
    pub fn load(env: &str, file: Option<&std::path::Path>) -> Result<Option<Token>, String> {
        let secret = match file {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?,
            None => std::env::var(env).unwrap_or_default(),
        };
        let token = Token::new(secret);
        Ok((!token.0.is_empty()).then_some(token))
    }

    /// The secret, for a client that needs it by value (a database password).
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl Token {
    /// `text` with every occurrence of the token replaced by `<redacted>`: a
    /// server may echo it (`{"error": "Bearer <token>"}`), and nothing stored or
    /// printed may carry it. `Bearer`/`Bot` forms are covered, as they contain it.
    pub fn redact(&self, text: &str) -> String {
        if self.0.is_empty() || !text.contains(&self.0) {
            return text.to_string();
        }
        text.replace(&self.0, "<redacted>")
    }
}

/// [`Token::redact`] when there is a token.
fn redact(token: Option<&Token>, text: String) -> String {
    match token {
        Some(token) => token.redact(&text),
        None => text,
    }
}

/// The error for a 3xx answer: redirects are never followed (see [`http_client`]).
fn redirect_error(status: u16, headers: &reqwest::header::HeaderMap) -> String {
    let location = headers
        .get(reqwest::header::LOCATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_else(|| "no Location".into());
    format!("HTTP {status}: redirect to {location} not followed (redirects are never followed)")
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// What one HTTP request came to.
#[derive(Clone, Debug, PartialEq)]
pub struct Fetched {
    pub http_status: Option<u16>,
    pub bytes: Option<u64>,
    pub result: Result<Vec<Item>, String>,
    /// The server asked us to wait this long before the next request (429, Retry-After, rate-limit reset).
    pub retry_after_ms: Option<u64>,
}

/// A dialect spoken over HTTP to a base URL. Clones share one [`Pacer`]: all
/// the pollers of a run spend one rate-limit budget.
#[derive(Clone)]
pub struct HttpTarget {
    client: reqwest::Client,
    base: String,
    dialect: Dialect,
    layout: Layout,
    token: Option<Token>,
    pacer: Arc<Mutex<Pacer>>,
    max_body: usize,
}

/// Builds the HTTP client: rustls with the ring provider and Mozilla's roots
/// (from `webpki-root-certs`), so that no system CA store is needed; gzip and
/// brotli; a timeout; a User-Agent naming the tool. Certificates are always
/// verified: there is deliberately no option to turn that off.
pub fn http_client(timeout: Duration) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let roots = webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .filter_map(|der| reqwest::Certificate::from_der(der).ok());
    reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .timeout(timeout)
        .connect_timeout(timeout)
        // No redirect is followed: a redirect off the target's origin would carry
        // Misskey's body token (`i`, re-sent on 307/308) and a `Referer` to another
        // host, and record that host's data as the target's. Timeline APIs answer in
        // place, so a 3xx is recorded as a failed request naming its location
        // ([`HttpTarget::fetch`]).
        .redirect(reqwest::redirect::Policy::none())
        .referer(false)
        .tls_certs_only(roots)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// The User-Agent of every request.
pub const USER_AGENT: &str = concat!("snowleak-experiment/", env!("CARGO_PKG_VERSION"));

impl HttpTarget {
    pub fn new(
        client: reqwest::Client,
        base: &str,
        dialect: Dialect,
        layout: Layout,
        token: Option<Token>,
    ) -> HttpTarget {
        HttpTarget {
            client,
            base: base.trim_end_matches('/').to_string(),
            dialect,
            layout,
            token,
            pacer: Arc::new(Mutex::new(Pacer::default())),
            max_body: MAX_BODY_BYTES,
        }
    }

    /// A smaller body cap (tests).
    pub fn with_max_body(mut self, bytes: usize) -> HttpTarget {
        self.max_body = bytes;
        self
    }

    pub fn dialect(&self) -> &Dialect {
        &self.dialect
    }

    /// Waits for this request's turn in the shared rate-limit budget; returns
    /// how long it waited (recorded as `requests.wait_ms`).
    pub async fn pace(&self) -> u64 {
        let now = crate::clock::now_ms();
        let at = lock(&self.pacer).reserve(now);
        let wait = (at - now).max(0) as u64;
        if wait > 0 {
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        wait
    }

    /// Sends `req` and reads the answer. Whatever the server says, the token is
    /// redacted from everything that comes back (errors, authors, timestamps).
    pub async fn fetch(&self, req: &PageRequest) -> Fetched {
        let mut fetched = self.fetch_raw(req).await;
        if let Some(token) = &self.token {
            match &mut fetched.result {
                Err(error) => *error = token.redact(error),
                Ok(items) => {
                    for item in items {
                        for text in [&mut item.created_at, &mut item.author]
                            .into_iter()
                            .flatten()
                        {
                            *text = token.redact(text);
                        }
                        item.id_text = token.redact(&item.id_text);
                    }
                }
            }
        }
        fetched
    }

    async fn fetch_raw(&self, req: &PageRequest) -> Fetched {
        let http = self.dialect.build(&self.layout, req);
        let url = format!("{}{}", self.base, http.path);
        let mut builder = if http.post {
            self.client.post(&url)
        } else {
            self.client.get(&url)
        };
        builder = builder.query(&http.query);
        let mut json_body = http.json_body;
        match (&self.token, self.dialect.auth(), &mut json_body) {
            (Some(token), Auth::BodyField, Some(Value::Object(map))) => {
                // Misskey takes its token as the body field `i`.
                map.insert("i".into(), Value::from(token.0.clone()));
            }
            (Some(token), Auth::Bot, _) => {
                builder =
                    builder.header(reqwest::header::AUTHORIZATION, format!("Bot {}", token.0));
            }
            (Some(token), _, _) => builder = builder.bearer_auth(&token.0),
            (None, _, _) => {}
        }
        if let Some(body) = json_body {
            builder = builder.json(&body);
        }
        let failed = |status: Option<u16>, e: String, retry: Option<u64>| Fetched {
            http_status: status,
            bytes: None,
            result: Err(e),
            retry_after_ms: retry,
        };
        let mut response = match builder.send().await {
            Ok(r) => r,
            Err(e) => return failed(None, describe_reqwest_error(&e), None),
        };
        let status = response.status().as_u16();
        let now = crate::clock::now_ms();
        let info = rate_info(response.headers(), now);
        let retry_after_ms = retry_after_ms(response.headers(), now);
        let retry = if status == 429 {
            retry_after_ms.or(Some(1000))
        } else {
            retry_after_ms
        };
        lock(&self.pacer).update(&info, retry.map(|ms| now.saturating_add(ms as i64)));
        if (300..400).contains(&status) {
            return failed(
                Some(status),
                redirect_error(status, response.headers()),
                retry,
            );
        }
        let body = match read_capped(&mut response, self.max_body).await {
            Ok(body) => body,
            Err(e) => return failed(Some(status), e, None),
        };
        let bytes = Some(body.len() as u64);
        if !(200..300).contains(&status) {
            let mut error = format!("HTTP {status}: {}", excerpt(&body));
            if (status == 401 || status == 403) && self.token.is_none() {
                error.push_str(&format!(
                    " (no token was sent: this timeline may need one; set {} or pass --token-file)",
                    self.dialect.token_env()
                ));
            }
            return Fetched {
                http_status: Some(status),
                bytes,
                result: Err(error),
                retry_after_ms: retry,
            };
        }
        let result = self.dialect.parse_page(&self.layout, req, &body);
        // A spent rate limit (remaining 0) is obeyed before the server has to refuse us.
        Fetched {
            http_status: Some(status),
            bytes,
            result,
            retry_after_ms,
        }
    }
}

/// Sends `probe` (a Misskey timeline request without cursors) and detects the
/// ID layout from the notes it returns ([`detect_misskey_layout`]).
pub async fn probe_layout(
    client: &reqwest::Client,
    base: &str,
    probe: &HttpRequest,
    token: Option<&Token>,
) -> Result<Layout, String> {
    let mut body = probe
        .json_body
        .clone()
        .unwrap_or(Value::Object(Default::default()));
    if let (Some(token), Value::Object(map)) = (token, &mut body) {
        map.insert("i".into(), Value::from(token.0.clone()));
    }
    let url = format!("{}{}", base.trim_end_matches('/'), probe.path);
    let mut response = client
        .post(&url)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("layout probe: {}", describe_reqwest_error(&e)))?;
    let status = response.status().as_u16();
    if (300..400).contains(&status) {
        let error = redirect_error(status, response.headers());
        return Err(redact(token, format!("layout probe: {error}")));
    }
    let bytes = read_capped(&mut response, MAX_BODY_BYTES)
        .await
        .map_err(|e| format!("layout probe: {e}"))?;
    if !(200..300).contains(&status) {
        let error = format!("layout probe: HTTP {status}: {}", excerpt(&bytes));
        return Err(redact(token, error));
    }
    let notes: Vec<Value> = serde_json::from_slice(&bytes).map_err(|_| {
        redact(
            token,
            format!("layout probe: not a JSON array: {}", excerpt(&bytes)),
        )
    })?;
    let ids: Vec<&str> = notes
        .iter()
        .filter_map(|n| n.get("id").and_then(Value::as_str))
        .collect();
    detect_misskey_layout(&ids).map_err(|e| redact(token, e))
}

/// Reads a response body of at most `max` bytes; a longer one is an error, not an allocation.
async fn read_capped(response: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| describe_reqwest_error(&e))?
    {
        if body.len() + chunk.len() > max {
            return Err(format!("response body over {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn describe_reqwest_error(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "body failed"
    } else {
        "request failed"
    };
    // Walk the sources for the root cause, without the URL (it may carry a query we'd rather not log).
    let mut cause = String::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    if cause.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {cause}")
    }
}

/// How long the server asks us to wait: `Retry-After` (seconds), or a rate-limit
/// reset in any of the dialects' forms when the remaining budget is zero:
/// Twitter's and Discord's epoch seconds, Discord's `Reset-After` seconds,
/// Mastodon's ISO 8601 time.
pub fn retry_after_ms(headers: &reqwest::header::HeaderMap, now_ms: i64) -> Option<u64> {
    let retry_after = headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok());
    if let Some(secs) = retry_after {
        return Some(((secs.max(0.0) * 1000.0) as u64).min(MAX_SERVER_WAIT_MS));
    }
    let info = rate_info(headers, now_ms);
    if info.remaining != Some(0) {
        return None;
    }
    Some((info.reset_at_ms?.saturating_sub(now_ms).max(0) as u64).min(MAX_SERVER_WAIT_MS))
}

/// The longest wait a server's answer is taken to ask for (a day), so that
/// `Retry-After: 1e300` stays in range of the clock's arithmetic. The run's
/// end cuts every wait anyway (`run::poll_loop`).
pub const MAX_SERVER_WAIT_MS: u64 = 24 * 3600 * 1000;

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    fn twitter() -> Dialect {
        Dialect::TwitterV1 {
            list_id: "1".into(),
        }
    }

    fn fixture(path: &str) -> Vec<u8> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn texts(items: &[Item]) -> Vec<(&str, Option<&str>, Option<&str>)> {
        items
            .iter()
            .map(|i| {
                (
                    i.id_text.as_str(),
                    i.created_at.as_deref(),
                    i.author.as_deref(),
                )
            })
            .collect()
    }

    #[test]
    fn fixtures_parse() {
        let mastodon = Dialect::Mastodon {
            timeline: "public".into(),
        };
        let m: Layout = "mastodon".parse().unwrap();
        let items = mastodon
            .parse(&m, &fixture("mastodon/public_limit2.json"))
            .unwrap();
        assert_eq!(
            texts(&items),
            vec![
                ("103206804533200177", Some("2019-11-26T23:27:31.000Z"), None),
                ("103206804086086361", Some("2019-11-26T23:27:32.000Z"), None)
            ]
        );
        // The docs' own example is out of created_at order: ID time 23:27:40.186.
        assert_eq!(m.ts_ms(items[0].id), 1_574_810_860_186);

        let x = Dialect::X {
            endpoint: XEndpoint::UserTweets {
                user_id: "2244994945".into(),
            },
        };
        let t = Layout::twitter();
        let items = x.parse(&t, &fixture("x/timeline.json")).unwrap();
        assert_eq!(items[0].id_text, "1524796546306478083");
        assert_eq!(items[1].id, Id(1_524_468_552_404_668_416));
        assert_eq!(x.parse(&t, &fixture("x/empty.json")).unwrap(), vec![]);

        let d = Dialect::Discord {
            channel_id: "290926798999357250".into(),
        };
        let items = d
            .parse(
                &"discord".parse().unwrap(),
                &fixture("discord/messages.json"),
            )
            .unwrap();
        assert_eq!(
            texts(&items),
            vec![(
                "334385199974967042",
                Some("2017-07-11T17:27:07.299000+00:00"),
                Some("Mason")
            )]
        );

        let items = twitter()
            .parse(&t, &fixture("twitter-v1/lists_statuses.json"))
            .unwrap();
        assert_eq!(
            texts(&items),
            vec![(
                "1050118621198921728",
                Some("Wed Oct 10 20:19:24 +0000 2018"),
                Some("TwitterAPI")
            )]
        );
        // created_at has whole seconds; the ID says 20:19:24.211.
        assert_eq!(t.ts_ms(items[0].id), 1_539_202_764_211);

        let body = fixture("misskey/local_timeline.json");
        let notes: Vec<Value> = serde_json::from_slice(&body).unwrap();
        let ids: Vec<&str> = notes.iter().map(|n| n["id"].as_str().unwrap()).collect();
        let layout = detect_misskey_layout(&ids).unwrap();
        assert_eq!(layout.name(), "misskey-aidx");
        let items = Dialect::Misskey {
            endpoint: "local-timeline".into(),
        }
        .parse(&layout, &body)
        .unwrap();
        assert_eq!(
            texts(&items),
            vec![(
                "9v6hsao08sdi0003",
                Some("2024-07-01T12:00:00.000Z"),
                Some("example")
            )]
        );
        assert_eq!(layout.ts_ms(items[0].id), 1_719_835_200_000);
    }

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

    #[test]
    fn discord_never_combines_after_and_before_and_filters_the_window_locally() {
        let l: Layout = "discord".parse().unwrap();
        let d = Dialect::Discord {
            channel_id: "7".into(),
        };
        let page0 = PageRequest {
            since: Some(Id(100)),
            before: None,
            limit: 50,
        };
        let http = d.build(&l, &page0);
        assert_eq!(http.path, "/channels/7/messages");
        assert_eq!(http.query, vec![("limit".to_string(), "50".to_string())]);
        let back = PageRequest {
            before: Some(Id(300)),
            ..page0.clone()
        };
        let http = d.build(&l, &back);
        assert_eq!(
            http.query,
            vec![
                ("limit".to_string(), "50".to_string()),
                ("before".to_string(), "300".to_string())
            ]
        );
        let body = br#"[{"id":"301"},{"id":"250"},{"id":"101"},{"id":"100"},{"id":"99"}]"#;
        let ids = |items: Vec<Item>| items.into_iter().map(|i| i.id.0).collect::<Vec<_>>();
        assert_eq!(
            ids(d.parse_page(&l, &page0, body).unwrap()),
            vec![301, 250, 101]
        );
        assert_eq!(ids(d.parse_page(&l, &back, body).unwrap()), vec![250, 101]);
        // Other dialects trust the server's window.
        let m = Dialect::Mastodon {
            timeline: "public".into(),
        };
        assert_eq!(ids(m.parse_page(&l, &page0, body).unwrap()).len(), 5);
    }

    #[test]
    fn misskey_layouts_are_detected_from_the_id_shape() {
        let name = |ids: &[&str]| detect_misskey_layout(ids).map(|l| l.name().to_string());
        assert_eq!(name(&["9v6hsao0ab"]), Ok("misskey-aid".into()));
        assert_eq!(
            name(&["9v6hsao08sdi0003", "9v6hsao08sdi0004"]),
            Ok("misskey-aidx".into())
        );
        assert_eq!(
            name(&["8190a2b3c4d5e6f708192a3b"]),
            Ok("misskey-meid".into())
        );
        assert_eq!(name(&["01ARZ3NDEKTSV4RRFFQ69G5FAV"]), Ok("ulid".into()));
        for bad in [
            &["0190a2b3c4d5e6f708192a3b"][..], // objectid: unsupported
            &["g190a2b3c4d5e6f708192a3b"],     // meidg: unsupported
            &["9v6hsao0ab", "9v6hsao08sdi0003"],
            &["short"],
            &[],
        ] {
            let e = name(bad).unwrap_err();
            assert!(e.contains("--layout"), "{e}");
        }
    }

    #[test]
    fn dry_run_descriptions_redact_the_token() {
        let l: Layout = "misskey-aidx".parse().unwrap();
        let req = PageRequest {
            since: None,
            before: None,
            limit: 100,
        };
        let mk = Dialect::Misskey {
            endpoint: "timeline".into(),
        };
        let text = mk.describe("https://misskey.example", &l, &req, true);
        assert_eq!(
            text,
            "POST https://misskey.example/api/notes/timeline\n  body: {\"i\":\"<redacted>\",\"limit\":100,\"untilId\":\"zzzzzzzzzzzzzzzz\"}"
        );
        let x = Dialect::X {
            endpoint: XEndpoint::SearchRecent {
                query: "a b".into(),
            },
        };
        let text = x.describe("https://api.x.com", &Layout::twitter(), &req, true);
        assert_eq!(
            text,
            "GET https://api.x.com/2/tweets/search/recent?query=a+b&max_results=100&tweet.fields=created_at%2Cauthor_id\n  Authorization: Bearer <redacted>"
        );
        let d = Dialect::Discord {
            channel_id: "1".into(),
        };
        let text = d.describe(
            "https://discord.com/api/v10",
            &Layout::twitter(),
            &req,
            true,
        );
        assert!(text.ends_with("Authorization: Bot <redacted>"), "{text}");
        assert!(
            !d.describe(
                "https://discord.com/api/v10",
                &Layout::twitter(),
                &req,
                false
            )
            .contains("Authorization")
        );
    }

    #[test]
    fn twitter_max_id_is_inclusive() {
        let l = Layout::twitter();
        let req = PageRequest {
            since: Some(Id(10)),
            before: Some(Id(20)),
            limit: 500,
        };
        let http = twitter().build(&l, &req);
        assert!(http.query.contains(&("since_id".into(), "10".into())));
        assert!(http.query.contains(&("max_id".into(), "19".into())));
        assert!(
            http.query.contains(&("count".into(), "200".into())),
            "count capped at 200"
        );
    }

    #[test]
    fn misskey_always_sends_until_id_for_newest_first() {
        let l: Layout = "misskey-aidx".parse().unwrap();
        let req = PageRequest {
            since: Some(Id(5)),
            before: None,
            limit: 100,
        };
        let http = Dialect::Misskey {
            endpoint: "local-timeline".into(),
        }
        .build(&l, &req);
        let body = http.json_body.unwrap();
        assert_eq!(body["sinceId"], "0000000000000005");
        assert_eq!(body["untilId"], "zzzzzzzzzzzzzzzz");
        assert!(http.post);
    }

    #[test]
    fn parses_twitter_ids_exactly() {
        let l = Layout::twitter();
        let body = br#"[{"id": 18446744073709551615, "id_str": "18446744073709551615", "created_at": "x", "user": {"screen_name": "a"}},
                        {"id": 1600000000000000001}]"#;
        let items = twitter().parse(&l, body).unwrap();
        assert_eq!(items[0].id, Id(u64::MAX as u128));
        assert_eq!(items[0].author.as_deref(), Some("a"));
        assert_eq!(items[1].id_text, "1600000000000000001");
    }

    #[test]
    fn bad_bodies_are_errors() {
        let l = Layout::twitter();
        for body in [
            &b"<html>502</html>"[..],
            b"",
            b"{\"errors\":[]}",
            b"[{\"text\":\"no id\"}]",
            b"[{\"id_str\":\"-5\"}]",
            b"[{\"id_str\":\"99999999999999999999\"}]",
            b"[{\"id\":1.5}]",
        ] {
            assert!(
                twitter().parse(&l, body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn rate_limit_headers_in_each_dialect() {
        let now = 1_700_000_000_000;
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after_ms(&h, now), Some(3000));
        let mut h = HeaderMap::new();
        h.insert("x-rate-limit-remaining", HeaderValue::from_static("0"));
        h.insert("x-rate-limit-reset", HeaderValue::from_static("1700000005"));
        assert_eq!(retry_after_ms(&h, now), Some(5000));
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        h.insert(
            "x-ratelimit-reset",
            HeaderValue::from_static("2023-11-14T22:13:22.000000Z"),
        );
        assert_eq!(retry_after_ms(&h, now), Some(2000));
        h.insert("x-ratelimit-remaining", HeaderValue::from_static("7"));
        assert_eq!(retry_after_ms(&h, now), None);
        // Discord: Reset-After seconds (with decimals) when the bucket is spent.
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        h.insert(
            "x-ratelimit-reset",
            HeaderValue::from_static("1700000009.000"),
        );
        h.insert("x-ratelimit-reset-after", HeaderValue::from_static("0.75"));
        assert_eq!(retry_after_ms(&h, now), Some(750));
        // Absurd values stay in range.
        for absurd in ["99999999", "1e300", "inf"] {
            let mut h = HeaderMap::new();
            h.insert("retry-after", HeaderValue::from_static(absurd));
            assert_eq!(
                retry_after_ms(&h, now),
                Some(MAX_SERVER_WAIT_MS),
                "{absurd}"
            );
        }
    }
}
