//! The simulator over HTTP, in five dialects, each in its own file as
//! `docs/api-facts.md` describes the real API: `twitter.rs` (v1.1),
//! `mastodon.rs` (with the instance and NodeInfo documents), `misskey.rs`,
//! `x.rs` (v2) and `discord.rs`. This file holds what they share: the router
//! that merges their routes, the 404 in the shape of the API a path belongs
//! to, the rate-limit windows, the listener, and the query and JSON helpers.
//!
//! Every handler reads the clock (injectable for tests), advances the shared
//! [`Simulator`] to it, runs a dialect-free [`Query`] and renders it. The lock
//! is held only for the advance and the query. Rate limits are counted per
//! dialect in fixed windows and reported in each API's own headers.

mod discord;
#[cfg(test)]
mod http_tests;
/// Public for the PostgreSQL target, which serves Mastodon's API from a table
/// with the same paging, `Link` header and JSON.
pub mod mastodon;
mod misskey;
#[cfg(test)]
mod strict_tests;
mod twitter;
mod x;

use super::model::{Query, SimStatus, Simulator};
use crate::sync::lock;
use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
pub use rundb::scope::Scope;
use serde::Serialize;
use since_id::id::{Id, Layout};
use since_id::time::{format_duration_ms, parse_duration_ms};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::ops::Range;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

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
pub(super) enum ServedApi {
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
    pub(super) fn check(&self, dialect: ServedApi, now_ms: i64) -> Allowance {
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
    /// Twitter v1.1's tweets under `tweet_mode=extended` (`full_text`).
    extended_tweets: Arc<RenderCache>,
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

    /// A JSON array of the statuses, each rendered by `render` unless
    /// cached, and where each lies in it ([`ServedIds::spans`]).
    fn page(
        &self,
        statuses: &[SimStatus],
        render: impl Fn(&SimStatus) -> Vec<u8>,
    ) -> (Vec<u8>, Vec<Range<usize>>) {
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
        let mut spans = Vec::with_capacity(parts.len());
        body.push(b'[');
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            spans.push(body.len()..body.len() + part.len());
            body.extend_from_slice(part);
        }
        body.push(b']');
        (body, spans)
    }
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

    /// The reader's home timeline: the authors it follows, and the scope a
    /// recording gives a response of it.
    pub(super) fn home(&self) -> (Arc<std::collections::BTreeSet<u32>>, Scope) {
        let follows = lock(&self.sim).follows();
        let scope = Scope::Authors(follows.iter().map(|&a| i64::from(a)).collect());
        (follows, scope)
    }

    /// Reads the simulator's configuration (profile name, authors, lags).
    pub(super) fn with_config<T>(&self, f: impl FnOnce(&super::SimConfig) -> T) -> T {
        f(lock(&self.sim).config())
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
        extended_tweets: Arc::default(),
    };
    Router::new()
        .merge(twitter::routes())
        .merge(mastodon::routes())
        .merge(misskey::routes())
        .merge(x::routes())
        .merge(discord::routes())
        .fallback(not_found)
        .with_state(app)
}

/// A 404 in the shape of the API the path belongs to, so that a client's error
/// handling (not its JSON parser) sees it.
async fn not_found(uri: axum::http::Uri) -> Response {
    let path = uri.path();
    if path.starts_with("/api/v10/") {
        discord::not_found()
    } else if path.starts_with("/2/") {
        x::not_found()
    } else if path.starts_with("/api/v1/")
        || path.starts_with("/api/v2/")
        || !path.starts_with("/api/")
    {
        mastodon::not_found()
    } else {
        misskey::not_found()
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
    let mut config = crate::SimConfig::profile(profile).unwrap();
    config.rate_per_s = 0.0;
    let mut sim = Simulator::new(config, 1, now);
    for id in ids {
        sim.inject(SimStatus {
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

/// The account of a status's author: author `n` is `1000000 + n` here and
/// `2000000 + n` on remote.example, so that one account ID always stands for
/// one account object (local `user7` and remote `user7@remote.example` differ).
/// The reader: the account every credential logs in as (each dialect's
/// `verify_credentials`, `users/@me`, `i`), whose home timeline serves the
/// authors it follows ([`AppState::home`]). Its number is below every author's.
pub(super) const READER_ID: u64 = 1;
pub(super) const READER_NAME: &str = "snowleak";

pub(super) fn account_number(s: &SimStatus) -> u64 {
    account_id(s.author, !s.is_local())
}

/// The account of author `author`, local or remote ([`account_number`]).
pub(super) fn account_id(author: u32, remote: bool) -> u64 {
    let base = if remote { 2_000_000 } else { 1_000_000 };
    base + u64::from(author)
}

/// The author and side (remote or not) of an account ID, if one of the
/// `authors` has it ([`account_id`]'s inverse).
pub(super) fn account_author(id: u64, authors: u32) -> Option<(u32, bool)> {
    let (base, remote) = match id {
        2_000_000.. => (2_000_000, true),
        _ => (1_000_000, false),
    };
    let n = id.checked_sub(base)?;
    (n < u64::from(authors)).then_some((n as u32, remote))
}

/// Query parameters in order; later duplicates win, like Rails and Twitter.
pub fn params(raw: &Option<String>) -> Vec<(String, String)> {
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

/// `response` marked with the statuses its endpoint serves, for `experiment
/// serve --record` (a response extension, never sent): a client is owed only
/// those. A timeline response without one serves every status.
pub(super) fn with_scope(mut response: Response, scope: Scope) -> Response {
    response.extensions_mut().insert(scope);
    response
}

/// The IDs a timeline response could hold at most, when the server bounded
/// them beyond the client's cursors: X's `start_time`/`end_time` and recent
/// search's end lag (the newest `search_end_lag_ms` are not searchable yet),
/// read as ID bounds (`after < id < before`). A recording narrows the
/// request's window to it (`experiment/src/clients.rs`), so a client is owed
/// only what the server could serve it; a response without one was bounded
/// by the client's cursors alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Covered {
    /// The exclusive lower bound, if the server set one.
    pub after: Option<Id>,
    /// The exclusive upper bound, if the server set one.
    pub before: Option<Id>,
}

/// The IDs of the statuses a timeline response's body holds, in the body's
/// order: a response extension, never sent, so that `experiment serve
/// --record` need not read back every page it was just given. Only a status
/// the recording has not seen before needs the body read, and only that
/// status's part of it where the server says where each lies (`spans`). A
/// layer that rewrites the body removes the mark (the faults layer does); a
/// response without one is read from its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedIds {
    pub ids: Arc<[Id]>,
    /// Where each status lies in the body, in `ids`' order, when the body is
    /// a JSON array of the statuses as rendered: the bytes of `spans[i]`
    /// are the element that is `ids[i]`.
    pub spans: Option<Arc<[Range<usize>]>>,
}

/// `response` marked with the statuses its body holds ([`ServedIds`]).
pub(super) fn with_served(response: Response, statuses: &[SimStatus]) -> Response {
    mark_served(response, statuses, None)
}

/// `response`, whose body is the JSON array [`RenderCache::page`] made of
/// `statuses`, marked with them and where each lies ([`ServedIds`]).
pub(super) fn with_served_spans(
    response: Response,
    statuses: &[SimStatus],
    spans: Vec<Range<usize>>,
) -> Response {
    mark_served(response, statuses, Some(spans.into()))
}

fn mark_served(
    mut response: Response,
    statuses: &[SimStatus],
    spans: Option<Arc<[Range<usize>]>>,
) -> Response {
    let ids: Arc<[Id]> = statuses.iter().map(|s| s.id).collect();
    response.extensions_mut().insert(ServedIds { ids, spans });
    response
}

/// `response` marked with the ID window its time bounds left ([`Covered`]),
/// a response extension, never sent.
pub(super) fn with_covered(mut response: Response, covered: Covered) -> Response {
    response.extensions_mut().insert(covered);
    response
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

pub fn host(headers: &HeaderMap) -> String {
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
