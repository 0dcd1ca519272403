//! What every API's home file shares, and nothing else: the types of an
//! API's facts ([`Api`]), the dialect enum the dispatch matches on, a
//! request as data, the parsed `--target`, and the URL checks. A leaf: it
//! imports no API file, so the API files import it without a circle.

use serde_json::Value;
use since_id::id::Layout;

/// What this tool knows of one API that is a value rather than code; each
/// API's home file has one (`API`).
#[derive(Clone, Copy, Debug)]
pub struct Api {
    /// `--target KIND:...`.
    pub kind: &'static str,
    /// The forms of `--target`, for errors and `--help`.
    pub specs: &'static [&'static str],
    /// The environment variable the token is read from.
    pub token_env: &'static str,
    pub auth: Auth,
    /// The largest page the API serves.
    pub max_limit: usize,
    pub item: ItemFields,
    /// Where the API reports its budget (None: only `Retry-After` on a 429).
    pub rate_headers: Option<RateHeaders>,
    /// Reads the SPEC of `--target KIND:SPEC`.
    pub parse_spec: fn(&str) -> Result<TargetSpec, String>,
}

/// An API dialect: which API, and which of its timelines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// Twitter API v1.1 `GET lists/statuses` (`api::twitter`).
    TwitterV1 { list_id: String },
    /// Mastodon `GET /api/v1/timelines/...` (`api::mastodon`).
    Mastodon { timeline: String },
    /// Misskey `POST /api/notes/...-timeline` (`api::misskey`).
    Misskey { endpoint: String },
    /// X API v2 `GET /2/users/{id}/tweets` or `GET /2/tweets/search/recent` (`api::x`).
    X { endpoint: XEndpoint },
    /// Discord `GET /channels/{id}/messages` (`api::discord`).
    Discord { channel_id: String },
}

/// How a dialect carries its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: SCHEME TOKEN`.
    Header { scheme: &'static str },
    /// A field of the JSON body.
    BodyField(&'static str),
}

/// Where an item's fields are in one entry of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemFields {
    /// The ID, a string.
    pub id: &'static str,
    /// Where to read the ID as an exact integer when `id` is absent.
    pub integer_id: Option<&'static str>,
    pub created_at: &'static str,
    /// A JSON pointer.
    pub author: &'static str,
}

/// A request to send, independent of the HTTP library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    pub post: bool,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub json_body: Option<Value>,
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

/// The first 60 bytes of a body, on one line, for an error message.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(60)]).replace(['\n', '\r'], " ");
    if body.len() > 60 {
        format!("{text}...")
    } else {
        text
    }
}

/// A parsed `--target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSpec {
    Simulator,
    Mastodon { base: String },
    X { endpoint: XEndpoint },
    TwitterV1 { base: String },
    Misskey { base: String },
    Discord { channel_id: String },
}

/// The options that refine a real target.
#[derive(Clone, Debug, Default)]
pub struct TargetOptions {
    pub timeline: Option<String>,
    pub list_id: Option<String>,
    pub base_url: Option<String>,
    pub layout: Option<String>,
}

/// A real target, ready to be polled.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub base: String,
    pub dialect: Dialect,
    /// None: detect it from the first IDs seen (Misskey without `--layout`).
    pub layout: Option<Layout>,
}

/// `https://HOST[:PORT][/PREFIX]`, without a trailing slash.
pub fn base_url(spec: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(spec).map_err(|e| format!("'{spec}' is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("'{spec}' is not an http(s) URL"));
    }
    if url.query().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "'{spec}' must not carry a query or credentials (tokens come from the environment)"
        ));
    }
    Ok(spec.trim_end_matches('/').to_string())
}

/// `--base-url` if given (checked), else the API's `default`.
pub fn base_or(opts: &TargetOptions, default: &str) -> Result<String, String> {
    opts.base_url
        .as_deref()
        .map(base_url)
        .transpose()
        .map(|b| b.unwrap_or_else(|| default.to_string()))
}

/// `--base-url` is an error for an API whose `--target` holds the URL.
pub fn url_in_target(opts: &TargetOptions, kind: &str) -> Result<(), String> {
    refuse(
        "--base-url",
        opts.base_url.is_some(),
        &format!("{kind} (the URL is in --target)"),
    )
}

/// The error for `flag`, `given` to a `kind` it does not apply to.
pub fn refuse(flag: &str, given: bool, kind: &str) -> Result<(), String> {
    if given {
        Err(format!("{flag} does not apply to {kind} targets"))
    } else {
        Ok(())
    }
}

/// The two X v2 timelines that take `since_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XEndpoint {
    UserTweets { user_id: String },
    SearchRecent { query: String },
}

/// The headers one API reports its budget in. A reset is read as epoch
/// seconds if it is a number, else as an RFC 3339 time; a reset-after is
/// seconds from now and wins over the reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateHeaders {
    pub limit: &'static str,
    pub remaining: &'static str,
    pub reset: &'static str,
    pub reset_after: Option<&'static str>,
}
