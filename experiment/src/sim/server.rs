//! The simulator over HTTP, in five dialects (three in this file), each as
//! `docs/api-facts.md` describes the real API (section numbers in brackets):
//!
//! - Twitter v1.1 `GET /1.1/lists/statuses.json` [2.2]: `since_id` exclusive,
//!   `max_id` *inclusive*, `count` default 20, at most 200, newest first.
//! - Mastodon `GET /api/v1/timelines/public` (`local`, `remote`), `/local`
//!   (= public with `local=true`) and `/tag/{tag}` (every status carries the
//!   tag, so it equals public) [1.1-1.4]: `max_id`/`since_id` exclusive,
//!   `min_id` pages forward and wins over `since_id`, `limit` default 20, at
//!   most 40, a `Link` header on non-empty pages. Plus `/api/v1/instance` and
//!   `/api/v2/instance` so that client libraries accept the server.
//! - Misskey `POST /api/notes/local-timeline` and `/global-timeline` [3.1-3.2]:
//!   `sinceId` alone returns the oldest notes after it in ascending order.
//! - X API v2 and Discord, in their own files (`server_x.rs`,
//!   `server_discord.rs`), merged into the router here.
//!
//! Every handler reads the clock (injectable for tests), advances the shared
//! [`Simulator`] to it, runs a dialect-free [`Query`] and renders it. The lock
//! is held only for the advance and the query. Rate limits are counted per
//! dialect in fixed windows and reported in each API's own headers [1.5, 2.3].

use super::model::{Query, SimStatus, Simulator};
use crate::id::{Id, Layout};
use crate::time::{format_duration_ms, parse_duration_ms, rfc3339_ms};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};

/// A source of "now" in ms since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Requests allowed per window, per dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimits {
    pub per_window: u32,
    pub window_ms: u64,
}

impl Default for RateLimits {
    /// Generous: a million requests per 5 minutes, so default runs are never limited.
    fn default() -> RateLimits {
        RateLimits {
            per_window: 1_000_000,
            window_ms: 300_000,
        }
    }
}

impl FromStr for RateLimits {
    type Err = String;

    /// `N/WINDOW`, e.g. `300/5m` (Mastodon's documented limit) or `900/15m`.
    fn from_str(text: &str) -> Result<RateLimits, String> {
        let bad = || format!("bad rate limit '{text}': expected N/WINDOW such as 300/5m");
        let (n, window) = text.split_once('/').ok_or_else(bad)?;
        let per_window: u32 = n.trim().parse().map_err(|_| bad())?;
        let window_ms = parse_duration_ms(window).map_err(|_| bad())?;
        if per_window == 0 || window_ms == 0 {
            return Err(bad());
        }
        Ok(RateLimits {
            per_window,
            window_ms,
        })
    }
}

impl std::fmt::Display for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}",
            self.per_window,
            format_duration_ms(self.window_ms)
        )
    }
}

/// Each dialect has its own rate-limit window.
#[derive(Clone, Copy)]
pub(super) enum Dialect {
    Twitter,
    Mastodon,
    Misskey,
    X,
    Discord,
}

/// A fixed window counter.
#[derive(Default)]
struct Window {
    start_ms: i64,
    used: u32,
}

/// What the limiter says about one request.
pub(super) struct Allowance {
    pub(super) allowed: bool,
    pub(super) limit: u32,
    pub(super) remaining: u32,
    pub(super) reset_ms: i64,
    pub(super) now_ms: i64,
}

pub(super) struct Limiter {
    limits: RateLimits,
    windows: [Mutex<Window>; 5],
}

impl Limiter {
    pub(super) fn check(&self, dialect: Dialect, now_ms: i64) -> Allowance {
        let window_ms = self.limits.window_ms.clamp(1, i64::MAX as u64) as i64;
        let start = now_ms.div_euclid(window_ms) * window_ms;
        let mut w = lock(&self.windows[dialect as usize]);
        if w.start_ms != start {
            *w = Window {
                start_ms: start,
                used: 0,
            };
        }
        let allowed = w.used < self.limits.per_window;
        if allowed {
            w.used += 1;
        }
        Allowance {
            allowed,
            limit: self.limits.per_window,
            remaining: self.limits.per_window - w.used,
            reset_ms: start.saturating_add(window_ms),
            now_ms,
        }
    }
}

#[derive(Clone)]
pub(super) struct AppState {
    sim: Arc<Mutex<Simulator>>,
    pub(super) clock: Clock,
    pub(super) limiter: Arc<Limiter>,
    tweets: Arc<RenderCache>,
}

/// Rendered JSON of statuses, by ID. A status never changes once posted, and
/// pollers fetch the same statuses again and again (a compensated poller on
/// purpose), so each is rendered once, as real servers cache rendered statuses.
#[derive(Default)]
struct RenderCache {
    rendered: Mutex<HashMap<Id, Arc<[u8]>>>,
}

impl RenderCache {
    /// More than this and the cache starts over: memory stays bounded.
    const MAX_ENTRIES: usize = 100_000;

    /// A JSON array of the statuses, each rendered by `render` unless cached.
    fn page(&self, statuses: &[SimStatus], render: impl Fn(&SimStatus) -> Vec<u8>) -> Vec<u8> {
        let mut parts: Vec<Arc<[u8]>> = Vec::with_capacity(statuses.len());
        {
            let cache = lock(&self.rendered);
            for s in statuses {
                parts.push(
                    cache
                        .get(&s.id)
                        .cloned()
                        .unwrap_or_else(|| Arc::from(&[][..])),
                );
            }
        }
        let mut fresh = Vec::new();
        for (part, s) in parts.iter_mut().zip(statuses) {
            if part.is_empty() {
                *part = Arc::from(render(s));
                fresh.push((s.id, part.clone()));
            }
        }
        if !fresh.is_empty() {
            let mut cache = lock(&self.rendered);
            if cache.len() + fresh.len() > Self::MAX_ENTRIES {
                cache.clear();
            }
            cache.extend(fresh);
        }
        let mut body = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
        body.push(b'[');
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(part);
        }
        body.push(b']');
        body
    }
}

/// A poisoned lock still holds a usable value (the model never panics midway
/// on valid input); serving on beats failing every later request.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AppState {
    /// Advances the simulator to now and runs a query; returns the statuses,
    /// the layout and the time.
    pub(super) fn query(
        &self,
        q: &Query,
        keep: impl Fn(&SimStatus) -> bool,
    ) -> (Vec<SimStatus>, Layout, i64) {
        let now = (self.clock)();
        let mut sim = lock(&self.sim);
        sim.advance(now);
        (sim.query_filtered(q, keep), sim.layout().clone(), now)
    }

    pub(super) fn layout(&self) -> Layout {
        lock(&self.sim).layout().clone()
    }

    /// Reads the simulator's configuration (profile name, authors, lags).
    pub(super) fn with_config<T>(&self, f: impl FnOnce(&super::SimConfig) -> T) -> T {
        f(lock(&self.sim).config())
    }
}

/// The dialect a client speaks to the simulator for a profile's layout (the
/// embedded target's): Mastodon's public timeline, Misskey's local timeline,
/// or a Twitter v1.1 list.
pub fn client_dialect(layout: &Layout) -> crate::api::Dialect {
    use crate::api::Dialect;
    match layout.name() {
        "mastodon" => Dialect::Mastodon {
            timeline: "public".into(),
        },
        name if name.starts_with("misskey") => Dialect::Misskey {
            endpoint: "local-timeline".into(),
        },
        _ => Dialect::TwitterV1 {
            list_id: "1".into(),
        },
    }
}

/// The router, reading the wall clock.
pub fn router(state: Arc<Mutex<Simulator>>, limits: RateLimits) -> Router {
    router_with_clock(state, limits, Arc::new(crate::clock::now_ms))
}

/// The router with an injected clock (tests run it in fixed time).
pub fn router_with_clock(state: Arc<Mutex<Simulator>>, limits: RateLimits, clock: Clock) -> Router {
    let app = AppState {
        sim: state,
        clock,
        limiter: Arc::new(Limiter {
            limits,
            windows: Default::default(),
        }),
        tweets: Arc::default(),
    };
    Router::new()
        .route("/1.1/lists/statuses.json", get(twitter_list))
        .route("/api/v1/timelines/public", get(mastodon_public))
        .route("/api/v1/timelines/local", get(mastodon_local))
        .route("/api/v1/timelines/tag/{tag}", get(mastodon_tag))
        // Mastodon.py asks with a trailing slash.
        .route("/api/v1/instance", get(mastodon_instance_v1))
        .route("/api/v1/instance/", get(mastodon_instance_v1))
        .route("/api/v2/instance", get(mastodon_instance_v2))
        .route("/api/v2/instance/", get(mastodon_instance_v2))
        .route("/.well-known/nodeinfo", get(nodeinfo_links))
        .route("/nodeinfo/2.0", get(nodeinfo))
        .route("/api/notes/local-timeline", post(misskey_local))
        .route("/api/notes/global-timeline", post(misskey_global))
        .route("/api/meta", post(misskey_meta))
        .merge(super::server_x::routes())
        .merge(super::server_discord::routes())
        .fallback(not_found)
        .with_state(app)
}

/// A 404 in the shape of the API the path belongs to, so that a client's error
/// handling (not its JSON parser) sees it.
async fn not_found(uri: axum::http::Uri) -> Response {
    let path = uri.path();
    if path.starts_with("/api/v10/") {
        super::server_discord::not_found()
    } else if path.starts_with("/2/") {
        super::server_x::not_found()
    } else if path.starts_with("/api/v1/")
        || path.starts_with("/api/v2/")
        || !path.starts_with("/api/")
    {
        // Api::BaseController's `rescue_from ActiveRecord::RecordNotFound`
        // (mastodon/mastodon `app/controllers/api/base_controller.rb`).
        mastodon_error(StatusCode::NOT_FOUND, "Record not found", HeaderMap::new())
    } else {
        // Misskey's catch-all under /api
        // (misskey-dev/misskey `packages/backend/src/server/api/ApiServerService.ts`).
        misskey_error(
            StatusCode::NOT_FOUND,
            "UNKNOWN_API_ENDPOINT",
            "Unknown API endpoint.",
            "2ca3b769-540a-4f08-9dd5-b5a825b6d0f1",
            HeaderMap::new(),
        )
    }
}

/// A server on `profile`'s layout, in fixed time `now`, holding exactly `ids`
/// (visible at `now`, posted at `posted_at_ms`): the fixture of the dialect tests.
#[cfg(test)]
pub(super) async fn test_server(
    profile: &str,
    ids: impl IntoIterator<Item = Id>,
    posted_at_ms: i64,
    now: i64,
    limits: RateLimits,
) -> RunningServer {
    let mut config = super::SimConfig::profile(profile).unwrap();
    config.rate_per_s = 0.0;
    let mut sim = Simulator::new(config, 1, now);
    for id in ids {
        sim.inject(super::SimStatus {
            id,
            id_time_ms: 0,
            posted_at_ms,
            visible_at_ms: now,
            deleted_at_ms: None,
            origin: "local".into(),
            author: 3,
        });
    }
    let app = router_with_clock(Arc::new(Mutex::new(sim)), limits, Arc::new(move || now));
    RunningServer::start(app).await.unwrap()
}

/// The base URLs of each API at `addr`, for printing.
pub fn endpoints(addr: SocketAddr) -> Vec<(&'static str, String)> {
    let base = format!("http://{addr}");
    vec![
        ("twitter", format!("{base}/1.1/lists/statuses.json")),
        ("mastodon", format!("{base}/api/v1/timelines/public")),
        (
            "mastodon local",
            format!("{base}/api/v1/timelines/public?local=true"),
        ),
        (
            "misskey local",
            format!("{base}/api/notes/local-timeline (POST)"),
        ),
        (
            "misskey global",
            format!("{base}/api/notes/global-timeline (POST)"),
        ),
        ("nodeinfo", format!("{base}/.well-known/nodeinfo")),
        ("misskey meta", format!("{base}/api/meta (POST)")),
        ("x v2 user", format!("{base}/2/users/1/tweets")),
        ("x v2 lookup", format!("{base}/2/users/me")),
        (
            "x v2 search",
            format!("{base}/2/tweets/search/recent?query=snowleak"),
        ),
        ("discord", format!("{base}/api/v10/channels/1/messages")),
        ("discord login", format!("{base}/api/v10/users/@me")),
    ]
}

/// Binds a listener (`127.0.0.1:0` picks a free port); a one-line error.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, String> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}

/// How long a connection may take to send a request's headers, and how long
/// it may stay idle between requests, before the server closes it (hyper's
/// header read timeout runs from the moment a connection waits for a request
/// head: <https://docs.rs/hyper/1/hyper/server/conn/http1/struct.Builder.html#method.header_read_timeout>).
/// Without it, idle or half-sent connections pile up until the process runs
/// out of sockets.
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves `app` on `listener` until `shutdown` resolves, closing connections
/// that are idle or send their headers too slowly ([`HEADER_READ_TIMEOUT`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    serve_with_timeout(listener, app, shutdown, HEADER_READ_TIMEOUT).await
}

/// [`serve`] with another header read / idle timeout. HTTP/1.1 only, as the
/// simulator's APIs are; on shutdown, stops accepting and lets open requests finish.
pub async fn serve_with_timeout(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    header_timeout: std::time::Duration,
) -> Result<(), String> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let (close_tx, close_rx) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: let connections close, then retry.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut close = close_rx.clone();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = close.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(close);
        });
    }
    drop(close_rx);
    drop(listener);
    let _ = close_tx.send(());
    close_tx.closed().await;
    Ok(())
}

/// A server running in the background on a loopback port (tests, benches,
/// and the lead's in-process target).
pub struct RunningServer {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), String>>,
}

impl RunningServer {
    /// Binds 127.0.0.1 on a free port and serves `app` there.
    pub async fn start(app: Router) -> Result<RunningServer, String> {
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("no local address: {e}"))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, app, async {
            let _ = stopped.await;
        }));
        Ok(RunningServer {
            addr,
            stop: Some(stop),
            task,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops accepting, finishes open requests, and returns the server's result.
    pub async fn stop(mut self) -> Result<(), String> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task)
            .await
            .map_err(|e| format!("server task failed: {e}"))?
    }
}

// ---------------------------------------------------------------- helpers

/// Query parameters in order; later duplicates win, like Rails and Twitter.
pub(super) fn params(raw: &Option<String>) -> Vec<(String, String)> {
    raw.as_deref()
        .map(|q| {
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn param<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Percent-decoding of a query component (`+` is a space).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(super) fn json_response(status: StatusCode, headers: HeaderMap, body: Vec<u8>) -> Response {
    let mut response = (status, headers, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    response
}

pub(super) fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}").into_bytes())
}

pub(super) fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

fn host(headers: &HeaderMap) -> String {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_string()
}

pub(super) fn retry_after(a: &Allowance, headers: &mut HeaderMap) {
    let seconds = ((a.reset_ms - a.now_ms).max(0) as u64)
        .div_ceil(1000)
        .max(1);
    headers.insert(header::RETRY_AFTER, header_value(&seconds.to_string()));
}

pub(super) fn parse_id(layout: &Layout, value: Option<&str>) -> Result<Option<Id>, String> {
    match value {
        None => Ok(None),
        Some(v) => layout.parse(v).map(Some).map_err(|e| e.to_string()),
    }
}

// ---------------------------------------------------------------- Twitter

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

async fn twitter_list(State(app): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let allowance = app.limiter.check(Dialect::Twitter, (app.clock)());
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
    let (statuses, layout, _) = app.query(&query, |_| true);
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
    json_response(StatusCode::OK, headers, body)
}

// ---------------------------------------------------------------- Mastodon

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

#[derive(Clone, Copy)]
enum Scope {
    All,
    Local,
    Remote,
}

/// The account of a status's author: author `n` is `1000000 + n` here and
/// `2000000 + n` on remote.example, so that one account ID always stands for
/// one account object (local `user7` and remote `user7@remote.example` differ).
fn account_number(s: &SimStatus) -> u64 {
    let base = if s.is_local() { 1_000_000 } else { 2_000_000 };
    base + s.author as u64
}

fn mastodon_account(s: &SimStatus, host: &str) -> Value {
    let username = format!("user{}", s.author);
    let (acct, url) = if s.is_local() {
        (username.clone(), format!("http://{host}/@{username}"))
    } else {
        (
            format!("{username}@remote.example"),
            format!("https://remote.example/@{username}"),
        )
    };
    json!({
        "id": account_number(s).to_string(),
        "username": username,
        "acct": acct,
        "display_name": format!("User {}", s.author),
        "locked": false,
        "bot": true,
        "discoverable": true,
        "group": false,
        "created_at": "2024-01-01T00:00:00.000Z",
        "note": "",
        "url": url,
        "uri": url,
        "avatar": format!("http://{host}/avatars/original/missing.png"),
        "avatar_static": format!("http://{host}/avatars/original/missing.png"),
        "header": format!("http://{host}/headers/original/missing.png"),
        "header_static": format!("http://{host}/headers/original/missing.png"),
        "followers_count": 0,
        "following_count": 0,
        "statuses_count": 1,
        "last_status_at": null,
        "emojis": [],
        "fields": [],
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
    json!({
        "id": id,
        // Remote statuses carry their `published` time, which is not ID order [1.6].
        "created_at": rfc3339_ms(s.posted_at_ms),
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
        "content": format!("<p>Status {id} from the snowleak simulator ({}) #snowleak</p>", s.origin),
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
    let scope = if truthy(param(&params, "local")) {
        Scope::Local
    } else if truthy(param(&params, "remote")) {
        Scope::Remote
    } else {
        Scope::All
    };
    mastodon_timeline(app, headers, "/api/v1/timelines/public", params, scope)
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
        Scope::Local,
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
    let scope = if truthy(param(&params, "local")) {
        Scope::Local
    } else if truthy(param(&params, "remote")) {
        Scope::Remote
    } else {
        Scope::All
    };
    if !tag.eq_ignore_ascii_case("snowleak") {
        // Only #snowleak exists; other tags are empty timelines.
        let allowance = app.limiter.check(Dialect::Mastodon, (app.clock)());
        return json_response(
            StatusCode::OK,
            mastodon_rate_headers(&allowance),
            b"[]".to_vec(),
        );
    }
    mastodon_timeline(app, headers, &path, params, scope)
}

fn mastodon_timeline(
    app: AppState,
    request_headers: HeaderMap,
    path: &str,
    params: Vec<(String, String)>,
    scope: Scope,
) -> Response {
    let allowance = app.limiter.check(Dialect::Mastodon, (app.clock)());
    let mut headers = mastodon_rate_headers(&allowance);
    if !allowance.allowed {
        retry_after(&allowance, &mut headers);
        return mastodon_error(StatusCode::TOO_MANY_REQUESTS, "Too many requests", headers);
    }
    let layout = app.layout();
    // `[params[:limit].to_i.abs, DEFAULT_STATUSES_LIMIT * 2].min` [1.1].
    let limit =
        param(&params, "limit").map_or(20, |l| ruby_to_i(l).unsigned_abs().min(40) as usize);
    let cursor = |name: &str| parse_id(&layout, param(&params, name));
    let (max_id, since_id, min_id) = match (cursor("max_id"), cursor("since_id"), cursor("min_id"))
    {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            return mastodon_error(StatusCode::BAD_REQUEST, &e, headers);
        }
    };
    let only_media = truthy(param(&params, "only_media"));
    // With min_id, since_id is ignored; the oldest `limit` above min_id, reversed [1.2].
    let query = match min_id {
        Some(min) => Query {
            after: Some(min),
            before: max_id,
            limit,
            oldest_first: true,
        },
        None => Query {
            after: since_id,
            before: max_id,
            limit,
            oldest_first: false,
        },
    };
    let keep = move |s: &SimStatus| {
        !only_media
            && match scope {
                Scope::All => true,
                Scope::Local => s.is_local(),
                Scope::Remote => !s.is_local(),
            }
    };
    let (mut statuses, layout, _) = app.query(&query, keep);
    if query.oldest_first {
        statuses.reverse();
    }
    let host = host(&request_headers);
    if let (Some(first), Some(last)) = (statuses.first(), statuses.last()) {
        // Carried over: local, remote, limit, only_media [1.3].
        let carried: String = params
            .iter()
            .filter(|(k, _)| ["local", "remote", "limit", "only_media"].contains(&k.as_str()))
            .map(|(k, v)| format!("{}={}&", encode(k), encode(v)))
            .collect();
        let base = format!("http://{host}{path}?{carried}");
        let link = format!(
            "<{base}max_id={}>; rel=\"next\", <{base}min_id={}>; rel=\"prev\"",
            layout.format(last.id),
            layout.format(first.id)
        );
        headers.insert(header::LINK, header_value(&link));
    }
    let body: Vec<Value> = statuses
        .iter()
        .map(|s| mastodon_status(s, &layout, &host))
        .collect();
    json_response(StatusCode::OK, headers, to_json(&body))
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

/// Mastodon's v1 instance entity (docs.joinmastodon.org, entities/V1_Instance);
/// also served by the PostgreSQL backend (`pg/http.rs`).
pub(crate) fn instance_v1_document(
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
        "version": "4.3.0",
        "urls": urls,
        "stats": {"user_count": users, "status_count": 0, "domain_count": 1},
        "thumbnail": null,
        "languages": ["en"],
        "registrations": false,
        "approval_required": false,
        "invites_enabled": false,
        "configuration": {"statuses": {"max_characters": 500, "max_media_attachments": 4}},
        "contact_account": null,
        "rules": [],
    })
}

async fn mastodon_instance_v2(headers: HeaderMap) -> Response {
    let host = host(&headers);
    let (title, urls) = instance_fields(&host);
    let body = json!({
        "domain": host,
        "title": title,
        "version": "4.3.0",
        "source_url": "https://github.com/mastodon/mastodon",
        "description": "A leaky timeline for since_id experiments",
        "usage": {"users": {"active_month": 0}},
        "thumbnail": {"url": format!("http://{host}/thumbnail.png")},
        "languages": ["en"],
        "configuration": {
            "urls": urls,
            "accounts": {"max_featured_tags": 10},
            "statuses": {"max_characters": 500, "max_media_attachments": 4, "characters_reserved_per_url": 23},
        },
        "registrations": {"enabled": false, "approval_required": false, "message": null},
        "contact": {"email": "", "account": null},
        "rules": [],
    });
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

/// The software a profile's server runs, for NodeInfo: Misskey for the
/// misskey profile, Mastodon for the others.
fn software(app: &AppState) -> (&'static str, &'static str) {
    if app.with_config(|c| c.profile == "misskey") {
        ("misskey", MISSKEY_VERSION)
    } else {
        ("mastodon", "4.3.0")
    }
}

const MISSKEY_VERSION: &str = "2025.4.0";

/// `GET /.well-known/nodeinfo`: where the schema-2.0 document is
/// (<https://nodeinfo.diaspora.software/protocol.html>). Also served by the
/// PostgreSQL backend (`pg/http.rs`).
pub(crate) async fn nodeinfo_links(headers: HeaderMap) -> Response {
    let host = host(&headers);
    let body = json!({"links": [{
        "rel": "http://nodeinfo.diaspora.software/ns/schema/2.0",
        "href": format!("http://{host}/nodeinfo/2.0"),
    }]});
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

/// The NodeInfo 2.0 document (<https://nodeinfo.diaspora.software/schema.html>):
/// clients read `software.name` to tell Mastodon from Misskey.
pub(crate) fn nodeinfo_document(name: &str, version: &str, users: u64, node: &str) -> Value {
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

// ---------------------------------------------------------------- Misskey

/// `POST /api/meta`, which clients post first (Misskey.py's constructor
/// does): the instance's name, version and features, in the shape of
/// Misskey's `MetaDetailed` (misskey-hub.net, for-developers/api, `meta`).
async fn misskey_meta(headers: HeaderMap) -> Response {
    let host = host(&headers);
    let body = json!({
        "maintainerName": null,
        "maintainerEmail": null,
        "version": MISSKEY_VERSION,
        "name": "snowleak simulator",
        "shortName": null,
        "uri": format!("http://{host}"),
        "description": "A leaky timeline for since_id experiments",
        "langs": ["en"],
        "tosUrl": null,
        "repositoryUrl": "https://github.com/misskey-dev/misskey",
        "feedbackUrl": null,
        "disableRegistration": true,
        "emailRequiredForSignup": false,
        "maxNoteTextLength": 3000,
        "iconUrl": null,
        "bannerUrl": null,
        "policies": {"ltlAvailable": true, "gtlAvailable": true},
        "features": {
            "registration": false,
            "emailRequiredForSignup": false,
            "localTimeline": true,
            "globalTimeline": true,
            "miauth": true,
        },
    });
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

fn misskey_error(
    status: StatusCode,
    code: &str,
    message: &str,
    id: &str,
    headers: HeaderMap,
) -> Response {
    let body = json!({"error": {"message": message, "code": code, "id": id, "kind": "client"}});
    json_response(status, headers, to_json(&body))
}

fn misskey_invalid(message: &str) -> Response {
    misskey_error(
        StatusCode::BAD_REQUEST,
        "INVALID_PARAM",
        message,
        "3d81ceae-475f-4600-b2a8-2bc116157532",
        HeaderMap::new(),
    )
}

async fn misskey_local(State(app): State<AppState>, body: Bytes) -> Response {
    misskey_timeline(app, body, true)
}

async fn misskey_global(State(app): State<AppState>, body: Bytes) -> Response {
    misskey_timeline(app, body, false)
}

fn misskey_timeline(app: AppState, body: Bytes, local_only: bool) -> Response {
    let allowance = app.limiter.check(Dialect::Misskey, (app.clock)());
    if !allowance.allowed {
        let mut headers = HeaderMap::new();
        retry_after(&allowance, &mut headers);
        return misskey_error(
            StatusCode::TOO_MANY_REQUESTS,
            "RATE_LIMIT_EXCEEDED",
            "Rate limit exceeded. Please try again later.",
            "d5826d14-3982-4d2e-8011-b9e9f02499ef",
            headers,
        );
    }
    let params: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            _ => return misskey_invalid("Invalid param: the body must be a JSON object."),
        }
    };
    let layout = app.layout();
    let limit = match params.get("limit") {
        None | Some(Value::Null) => 10,
        Some(v) => match v.as_u64() {
            Some(n @ 1..=100) => n as usize,
            _ => return misskey_invalid("Invalid param: limit must be an integer from 1 to 100."),
        },
    };
    // Errors are messages here, turned into a response once (responses are large).
    let id_param = |name: &str| -> Result<Option<Id>, String> {
        match params.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => layout
                .parse(s)
                .map(Some)
                .map_err(|_| format!("Invalid param: {name} must be a misskey:id.")),
            Some(_) => Err(format!("Invalid param: {name} must be a string.")),
        }
    };
    // sinceDate/untilDate become IDs at that time (`idService.gen(date)`) [3.1].
    let date_param = |name: &str| -> Result<Option<Id>, String> {
        match params.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .map(|ms| Some(layout.min_id_at(ms)))
                .ok_or_else(|| format!("Invalid param: {name} must be an integer.")),
        }
    };
    let cursors = (|| {
        Ok::<_, String>((
            id_param("sinceId")?,
            id_param("untilId")?,
            date_param("sinceDate")?,
            date_param("untilDate")?,
        ))
    })();
    let (since, until, since_date, until_date) = match cursors {
        Ok(c) => c,
        Err(message) => return misskey_invalid(&message),
    };
    let since = since.or(since_date.map(|id| id.pred()));
    let until = until.or(until_date);
    let with_files = params.get("withFiles").and_then(Value::as_bool) == Some(true);
    // `sinceId` alone: `id > since ORDER BY id ASC` [3.2].
    let query = Query {
        after: since,
        before: until,
        limit,
        oldest_first: since.is_some() && until.is_none(),
    };
    let keep = move |s: &SimStatus| !with_files && (!local_only || s.is_local());
    let (statuses, layout, _) = app.query(&query, keep);
    let notes: Vec<Value> = statuses.iter().map(|s| misskey_note(s, &layout)).collect();
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&notes))
}

fn misskey_note(s: &SimStatus, layout: &Layout) -> Value {
    let id = layout.format(s.id);
    let user_id = layout.format(Id(account_number(s) as u128));
    let host = if s.is_local() {
        Value::Null
    } else {
        json!("remote.example")
    };
    json!({
        "id": id,
        // Packed from the ID itself (`idService.parse(note.id).date`) [3.2].
        "createdAt": rfc3339_ms(layout.ts_ms(s.id)),
        "userId": user_id,
        "user": {
            "id": user_id,
            "name": format!("User {}", s.author),
            "username": format!("user{}", s.author),
            "host": host,
            "avatarUrl": null,
            "emojis": {},
            "onlineStatus": "unknown",
        },
        "text": format!("Note {id} from the snowleak simulator ({})", s.origin),
        "cw": null,
        "visibility": "public",
        "localOnly": false,
        "renoteCount": 0,
        "repliesCount": 0,
        "reactionCount": 0,
        "reactions": {},
        "reactionEmojis": {},
        "emojis": {},
        "fileIds": [],
        "files": [],
        "replyId": null,
        "renoteId": null,
        "uri": if s.is_local() { Value::Null } else { json!(format!("https://remote.example/notes/{id}")) },
    })
}
