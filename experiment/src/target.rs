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
use std::time::Duration;

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
            Dialect::Misskey { .. } => 100,
        }
    }

    pub fn build(&self, layout: &Layout, req: &PageRequest) -> HttpRequest {
        let limit = req.limit.min(self.max_limit()).to_string();
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
                body.insert("limit".into(), Value::from(req.limit.min(self.max_limit())));
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
        }
    }

    /// Reads a response body into items, in the order the API gave them.
    pub fn parse(&self, layout: &Layout, body: &[u8]) -> Result<Vec<Item>, String> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| format!("response is not JSON: {e}"))?;
        let Value::Array(entries) = value else {
            return Err(format!("response is not a JSON array: {}", excerpt(body)));
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

/// A dialect spoken over HTTP to a base URL.
#[derive(Clone)]
pub struct HttpTarget {
    client: reqwest::Client,
    base: String,
    dialect: Dialect,
    layout: Layout,
    token: Option<Token>,
}

/// Builds the HTTP client: rustls with the ring provider and Mozilla's roots
/// (from `webpki-root-certs`), so that no system CA store is needed; gzip and
/// brotli; a timeout; a User-Agent naming the tool.
pub fn http_client(timeout: Duration) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let roots = webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .filter_map(|der| reqwest::Certificate::from_der(der).ok());
    reqwest::Client::builder()
        .user_agent(concat!("snowleak-experiment/", env!("CARGO_PKG_VERSION")))
        .timeout(timeout)
        .connect_timeout(timeout)
        .tls_certs_only(roots)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

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
        }
    }

    pub fn dialect(&self) -> &Dialect {
        &self.dialect
    }

    pub async fn fetch(&self, req: &PageRequest) -> Fetched {
        let http = self.dialect.build(&self.layout, req);
        let url = format!("{}{}", self.base, http.path);
        let mut builder = if http.post {
            self.client.post(&url)
        } else {
            self.client.get(&url)
        };
        builder = builder.query(&http.query);
        if let Some(mut body) = http.json_body {
            if let (Some(token), Value::Object(map)) = (&self.token, &mut body) {
                // Misskey takes its token as the body field `i`.
                map.insert("i".into(), Value::from(token.0.clone()));
            }
            builder = builder.json(&body);
        } else if let Some(token) = &self.token {
            builder = builder.bearer_auth(&token.0);
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
        let retry_after_ms = retry_after_ms(response.headers(), crate::clock::now_ms());
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_BODY_BYTES {
                        return failed(
                            Some(status),
                            format!("response body over {MAX_BODY_BYTES} bytes"),
                            None,
                        );
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return failed(Some(status), describe_reqwest_error(&e), None),
            }
        }
        let bytes = Some(body.len() as u64);
        if !(200..300).contains(&status) {
            let retry = if status == 429 {
                retry_after_ms.or(Some(1000))
            } else {
                None
            };
            return Fetched {
                http_status: Some(status),
                bytes,
                result: Err(format!("HTTP {status}: {}", excerpt(&body))),
                retry_after_ms: retry,
            };
        }
        let result = self.dialect.parse(&self.layout, &body);
        // A spent rate limit (remaining 0) is obeyed before the server has to refuse us.
        Fetched {
            http_status: Some(status),
            bytes,
            result,
            retry_after_ms,
        }
    }
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
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(secs) = get("retry-after").and_then(|v| v.parse::<f64>().ok()) {
        return Some((secs.max(0.0) * 1000.0) as u64);
    }
    if get("x-ratelimit-remaining").or(get("x-rate-limit-remaining")) != Some("0") {
        return None;
    }
    if let Some(secs) = get("x-ratelimit-reset-after").and_then(|v| v.parse::<f64>().ok()) {
        return Some((secs.max(0.0) * 1000.0) as u64);
    }
    let reset = get("x-ratelimit-reset").or(get("x-rate-limit-reset"))?;
    let reset_ms = match reset.parse::<f64>() {
        Ok(epoch_secs) => (epoch_secs * 1000.0) as i64,
        Err(_) => chrono::DateTime::parse_from_rfc3339(reset)
            .ok()?
            .timestamp_millis(),
    };
    Some(reset_ms.saturating_sub(now_ms).max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    fn twitter() -> Dialect {
        Dialect::TwitterV1 {
            list_id: "1".into(),
        }
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
    }
}
