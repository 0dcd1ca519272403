//! The HTTP shell: the one place requests are sent (reqwest over rustls), the
//! token kept out of argv, logs and records, and the server's "wait" read
//! from its answer. What to send and how to read the answer is the dialect's
//! ([`Dialect`]), and each API's home file says it.

use super::common::{Auth, Dialect, excerpt};
use super::pace::{Pacer, rate_info};
use crate::drive::Fetched;
use crate::sim::sync::lock;
use serde_json::Value;
use since_id::id::Layout;
use since_id::poller::PageRequest;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest response body accepted; a bigger one is an error, not an allocation.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

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
pub(super) fn redact(token: Option<&Token>, text: String) -> String {
    match token {
        Some(token) => token.redact(&text),
        None => text,
    }
}

/// The error for a 3xx answer: redirects are never followed (see [`http_client`]).
pub(super) fn redirect_error(status: u16, headers: &reqwest::header::HeaderMap) -> String {
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
            (Some(token), Auth::BodyField(field), Some(Value::Object(map))) => {
                map.insert(field.into(), Value::from(token.0.clone()));
            }
            (Some(token), Auth::Header { scheme }, _) => {
                let value = format!("{scheme} {}", token.0);
                builder = match reqwest::header::HeaderValue::from_str(&value) {
                    Ok(mut value) => {
                        // Kept out of any Debug output of the request.
                        value.set_sensitive(true);
                        builder.header(reqwest::header::AUTHORIZATION, value)
                    }
                    // Not a header value: the send fails and says so.
                    Err(_) => builder.header(reqwest::header::AUTHORIZATION, value),
                };
            }
            (Some(_), Auth::BodyField(_), _) | (None, _, _) => {}
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

/// Reads a response body of at most `max` bytes; a longer one is an error, not an allocation.
pub(super) async fn read_capped(
    response: &mut reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, String> {
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

pub(super) fn describe_reqwest_error(e: &reqwest::Error) -> String {
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

/// How long the server asks us to wait: `Retry-After` (seconds, RFC 9110
/// section 10.2.3), or the rate-limit reset when the remaining budget is zero,
/// in whichever API's headers carry it ([`rate_info`]; each API's home file
/// names its headers).
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

impl crate::drive::PollTarget for HttpTarget {
    fn pace(&self) -> impl std::future::Future<Output = u64> + Send {
        HttpTarget::pace(self)
    }

    fn fetch(&self, req: &PageRequest) -> impl std::future::Future<Output = Fetched> + Send {
        HttpTarget::fetch(self, req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

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
