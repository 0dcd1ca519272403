//! Fault injection: the simulator misbehaves the way real servers do, so that
//! the harness can prove that faults are never mistaken for leaks.
//!
//! A [`FaultSpec`] is parsed from `5xx=2%,429=1%,timeout=1%,reset=0.5%,
//! truncate=0.5%,reorder=1%,duplicate=1%,slow=2%:3s`. A [`FaultPlan`] draws
//! one fault (or none) per request from its own seeded stream, so a virtual
//! run with the same seed meets the same faults. The draw and the mangling of
//! a page are pure; [`layer`] applies them to the HTTP server, and the
//! in-process target applies them in virtual time.

use crate::sync::lock;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

/// The largest response body a fault mangles (16 MiB, the harness client's
/// own cap): a bigger one is answered with a 500 instead.
pub const MANGLED_BODY_MAX_BYTES: usize = 16 * 1024 * 1024;

/// What can go wrong with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// 503 with a JSON error body.
    ServerError,
    /// 429 with `Retry-After: 1`.
    RateLimited,
    /// The server hangs past the client's timeout.
    Timeout,
    /// The connection is reset in the middle of the body.
    Reset,
    /// 200 with a body cut in half: malformed JSON.
    Truncate,
    /// 200 with the page out of ID order.
    Reorder,
    /// 200 with one item repeated within the page.
    Duplicate,
    /// 200, late.
    Slow,
}

impl Fault {
    /// Whether the client sees a failed request (no usable page).
    pub fn fails(self) -> bool {
        matches!(
            self,
            Fault::ServerError
                | Fault::RateLimited
                | Fault::Timeout
                | Fault::Reset
                | Fault::Truncate
        )
    }
}

/// Rates (0..=1) of each fault, and how long the slow and hanging ones take.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FaultSpec {
    pub server_error: f64,
    pub rate_limited: f64,
    pub timeout: f64,
    pub reset: f64,
    pub truncate: f64,
    pub reorder: f64,
    pub duplicate: f64,
    pub slow: f64,
    pub slow_ms: u64,
    pub hang_ms: u64,
}

impl FaultSpec {
    fn entries(&self) -> [(Fault, f64); 8] {
        [
            (Fault::ServerError, self.server_error),
            (Fault::RateLimited, self.rate_limited),
            (Fault::Timeout, self.timeout),
            (Fault::Reset, self.reset),
            (Fault::Truncate, self.truncate),
            (Fault::Reorder, self.reorder),
            (Fault::Duplicate, self.duplicate),
            (Fault::Slow, self.slow),
        ]
    }

    pub fn is_empty(&self) -> bool {
        self.entries().iter().all(|(_, rate)| *rate == 0.0)
    }
}

impl FromStr for FaultSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<FaultSpec, String> {
        let expected = "expected NAME=RATE% pairs such as 5xx=2%,429=1%,timeout=1%,reset=0.5%,truncate=0.5%,reorder=1%,duplicate=1%,slow=2%:3s";
        let mut spec = FaultSpec {
            slow_ms: 3000,
            hang_ms: 30_000,
            ..FaultSpec::default()
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bad = || format!("bad fault '{part}': {expected}");
            let (name, value) = part.split_once('=').ok_or_else(bad)?;
            let (rate, duration) = match value.split_once(':') {
                Some((rate, duration)) => (
                    rate,
                    Some(since_id::time::parse_duration_ms(duration).map_err(|_| bad())?),
                ),
                None => (value, None),
            };
            let percent: f64 = rate
                .trim()
                .strip_suffix('%')
                .ok_or_else(bad)?
                .trim()
                .parse()
                .map_err(|_| bad())?;
            if !(0.0..=100.0).contains(&percent) {
                return Err(format!(
                    "bad fault '{part}': the rate must be between 0% and 100%"
                ));
            }
            let rate = percent / 100.0;
            match (name.trim(), duration) {
                ("5xx", None) => spec.server_error = rate,
                ("429", None) => spec.rate_limited = rate,
                ("timeout", d) => {
                    spec.timeout = rate;
                    spec.hang_ms = d.unwrap_or(spec.hang_ms);
                }
                ("reset", None) => spec.reset = rate,
                ("truncate", None) => spec.truncate = rate,
                ("reorder", None) => spec.reorder = rate,
                ("duplicate", None) => spec.duplicate = rate,
                ("slow", d) => {
                    spec.slow = rate;
                    spec.slow_ms = d.unwrap_or(spec.slow_ms);
                }
                _ => return Err(bad()),
            }
        }
        let total: f64 = spec.entries().iter().map(|(_, r)| r).sum();
        if total > 1.0 {
            return Err(format!(
                "bad faults '{text}': the rates add up to more than 100%"
            ));
        }
        Ok(spec)
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            "5xx",
            "429",
            "timeout",
            "reset",
            "truncate",
            "reorder",
            "duplicate",
            "slow",
        ];
        let parts: Vec<String> = self
            .entries()
            .iter()
            .zip(names)
            .filter(|((_, rate), _)| *rate > 0.0)
            .map(|((fault, rate), name)| match fault {
                Fault::Slow => format!("{name}={}%:{}ms", rate * 100.0, self.slow_ms),
                Fault::Timeout => format!("{name}={}%:{}ms", rate * 100.0, self.hang_ms),
                _ => format!("{name}={}%", rate * 100.0),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// A seeded stream of faults, one draw per request.
#[derive(Clone, Debug)]
pub struct FaultPlan {
    spec: FaultSpec,
    rng: ChaCha8Rng,
}

impl FaultPlan {
    /// Faults draw from their own stream, so they never change the timeline itself.
    pub fn new(spec: FaultSpec, seed: u64) -> FaultPlan {
        FaultPlan {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0xFA17_FA17_FA17_FA17),
        }
    }

    pub fn spec(&self) -> &FaultSpec {
        &self.spec
    }

    /// The fault of the next request, if any, and a number for where to mangle.
    pub fn draw(&mut self) -> (Option<Fault>, u64) {
        let roll: f64 = self.rng.random();
        let salt: u64 = self.rng.random();
        let mut acc = 0.0;
        for (fault, rate) in self.spec.entries() {
            acc += rate;
            if roll < acc {
                return (Some(fault), salt);
            }
        }
        (None, salt)
    }
}

/// Puts a page out of order (rotates it) or repeats one of its items.
pub fn mangle_list<T: Clone>(fault: Fault, items: &mut Vec<T>, salt: u64) {
    if items.len() < 2 && fault == Fault::Reorder {
        return;
    }
    match fault {
        Fault::Reorder => {
            let k = 1 + (salt as usize) % (items.len() - 1);
            items.rotate_left(k);
        }
        Fault::Duplicate if !items.is_empty() => {
            let i = (salt as usize) % items.len();
            let copy = items[i].clone();
            items.insert(i, copy);
        }
        _ => {}
    }
}

/// Applies [`mangle_list`] to a JSON page (an array, or an object's `data` array as in X v2).
pub fn mangle_json(fault: Fault, body: &[u8], salt: u64) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(body).ok()?;
    let list = match &mut value {
        Value::Array(items) => items,
        Value::Object(map) => match map.get_mut("data") {
            Some(Value::Array(items)) => items,
            _ => return None,
        },
        _ => return None,
    };
    mangle_list(fault, list, salt);
    serde_json::to_vec(&value).ok()
}

/// The plan shared by the server's requests.
pub type SharedPlan = Arc<Mutex<FaultPlan>>;

/// Wraps a router so that every request may meet a fault.
pub fn layer(router: axum::Router, plan: FaultPlan) -> axum::Router {
    let shared: SharedPlan = Arc::new(Mutex::new(plan));
    router.layer(axum::middleware::from_fn_with_state(shared, inject))
}

async fn inject(State(plan): State<SharedPlan>, request: Request, next: Next) -> Response {
    let (fault, salt, spec) = {
        let mut plan = lock(&plan);
        let (fault, salt) = plan.draw();
        (fault, salt, plan.spec().clone())
    };
    let error = |status: StatusCode, message: &str| {
        let body = serde_json::json!({ "error": message }).to_string();
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    };
    match fault {
        None => next.run(request).await,
        Some(Fault::ServerError) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "injected fault: server error",
        ),
        Some(Fault::RateLimited) => {
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                "injected fault: rate limited",
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        Some(Fault::Timeout) => {
            tokio::time::sleep(std::time::Duration::from_millis(spec.hang_ms)).await;
            next.run(request).await
        }
        Some(Fault::Slow) => {
            tokio::time::sleep(std::time::Duration::from_millis(spec.slow_ms)).await;
            next.run(request).await
        }
        Some(fault) => {
            let response = next.run(request).await;
            let (mut parts, body) = response.into_parts();
            let Ok(bytes) = axum::body::to_bytes(body, MANGLED_BODY_MAX_BYTES).await else {
                return error(StatusCode::INTERNAL_SERVER_ERROR, "body too large");
            };
            parts.headers.remove(header::CONTENT_LENGTH);
            // The body is no longer the one the statuses were served in.
            parts.extensions.remove::<crate::server::ServedIds>();
            let half = bytes.slice(..bytes.len() / 2);
            let body = match fault {
                Fault::Truncate => Body::from(half),
                Fault::Reset => {
                    // Half the body, then an error: hyper aborts the connection mid-body.
                    let chunks: Vec<Result<axum::body::Bytes, std::io::Error>> = vec![
                        Ok(half),
                        Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "injected reset",
                        )),
                    ];
                    Body::from_stream(futures_stream(chunks))
                }
                _ => Body::from(mangle_json(fault, &bytes, salt).unwrap_or_else(|| bytes.to_vec())),
            };
            Response::from_parts(parts, body)
        }
    }
}

/// A stream over a few ready items (avoids a dependency for one use).
fn futures_stream<T: Send + 'static>(
    items: Vec<T>,
) -> impl futures_core::Stream<Item = T> + Send + 'static {
    struct Iter<T>(std::vec::IntoIter<T>);
    impl<T> futures_core::Stream for Iter<T> {
        type Item = T;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<T>> {
            std::task::Poll::Ready(self.0.next())
        }
    }
    impl<T> Unpin for Iter<T> {}
    Iter(items.into_iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let spec: FaultSpec =
            "5xx=2%,429=1%,timeout=1%,reset=0.5%,truncate=0.5%,reorder=1%,duplicate=1%,slow=2%:3s"
                .parse()
                .unwrap();
        assert_eq!(spec.server_error, 0.02);
        assert_eq!(spec.reset, 0.005);
        assert_eq!(spec.slow_ms, 3000);
        assert_eq!(spec.to_string().parse::<FaultSpec>().unwrap(), spec);
        for bad in [
            "5xx",
            "5xx=2",
            "5xx=x%",
            "gremlins=1%",
            "5xx=101%",
            "5xx=60%,429=60%",
            "slow=1%:soon",
        ] {
            assert!(bad.parse::<FaultSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn draws_are_seeded_and_follow_the_rates() {
        let spec: FaultSpec = "5xx=10%,reorder=10%".parse().unwrap();
        let draw = |seed| {
            let mut plan = FaultPlan::new(spec.clone(), seed);
            (0..10_000).map(|_| plan.draw().0).collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
        let errors = draw(1)
            .iter()
            .filter(|f| **f == Some(Fault::ServerError))
            .count();
        assert!((800..1200).contains(&errors), "{errors}");
    }

    #[test]
    fn mangles_pages() {
        let mut page = vec![5, 4, 3, 2, 1];
        mangle_list(Fault::Reorder, &mut page, 7);
        assert_ne!(page, vec![5, 4, 3, 2, 1]);
        page.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(page, vec![5, 4, 3, 2, 1], "same items");
        mangle_list(Fault::Duplicate, &mut page, 2);
        assert_eq!(page, vec![5, 4, 3, 3, 2, 1]);
        let body = br#"{"data":[{"id":"2"},{"id":"1"}],"meta":{}}"#;
        let out: Value =
            serde_json::from_slice(&mangle_json(Fault::Reorder, body, 0).unwrap()).unwrap();
        assert_eq!(out["data"][0]["id"], "1");
        assert!(mangle_json(Fault::Reorder, b"not json", 0).is_none());
    }

    /// The layer over real HTTP: each fault reaches the client as itself.
    #[tokio::test]
    async fn the_layer_injects_each_fault_over_http() {
        use crate::server::{RateLimits, RunningServer, router_with_clock};
        let _ = rustls::crypto::ring::default_provider().install_default();
        let now = 1_700_000_000_000;
        let mut config = crate::SimConfig::profile("twitter").unwrap();
        config.rate_per_s = 0.0;
        let mut sim = crate::Simulator::new(config, 1, now);
        for id in 1..=5u128 {
            sim.inject(crate::SimStatus {
                id: since_id::id::Id(id << 22),
                id_time_ms: 0,
                posted_at_ms: now,
                visible_at_ms: now,
                deleted_at_ms: None,
                origin: "gen0".into(),
                author: 1,
            });
        }
        let sim = Arc::new(Mutex::new(sim));
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_millis(300))
            .build()
            .unwrap();
        let ids = |body: &[u8]| -> Vec<String> {
            let v: Value = serde_json::from_slice(body).unwrap();
            v.as_array()
                .unwrap()
                .iter()
                .map(|t| t["id_str"].as_str().unwrap().to_string())
                .collect()
        };
        for (spec, check) in [
            ("5xx=100%", "503"),
            ("429=100%", "429"),
            ("timeout=100%:5s", "timeout"),
            ("truncate=100%", "truncated"),
            ("reset=100%", "reset"),
            ("reorder=100%", "reordered"),
            ("duplicate=100%", "duplicated"),
        ] {
            let app = layer(
                router_with_clock(sim.clone(), RateLimits::default(), Arc::new(move || now)),
                FaultPlan::new(spec.parse().unwrap(), 1),
            );
            let server = RunningServer::start(app).await.unwrap();
            let result = http
                .get(server.url("/1.1/lists/statuses.json?count=200"))
                .send()
                .await;
            match check {
                "503" | "429" => {
                    let r = result.unwrap();
                    assert_eq!(r.status().as_str(), check);
                    if check == "429" {
                        assert_eq!(r.headers()["retry-after"], "1");
                    }
                }
                "timeout" => assert!(result.unwrap_err().is_timeout(), "{spec}"),
                "truncated" => {
                    let body = result.unwrap().bytes().await.unwrap();
                    assert!(serde_json::from_slice::<Value>(&body).is_err(), "{spec}");
                }
                "reset" => {
                    let failed = match result {
                        Err(_) => true,
                        Ok(r) => r.bytes().await.is_err(),
                    };
                    assert!(failed, "{spec}: the body should fail mid-way");
                }
                "reordered" => {
                    let got = ids(&result.unwrap().bytes().await.unwrap());
                    let mut sorted = got.clone();
                    sorted.sort_by_key(|id| std::cmp::Reverse(id.parse::<u64>().unwrap()));
                    assert_eq!(got.len(), 5);
                    assert_ne!(got, sorted, "{spec}");
                }
                _ => {
                    let got = ids(&result.unwrap().bytes().await.unwrap());
                    assert_eq!(got.len(), 6, "{spec}: one item twice");
                }
            }
            drop(server);
        }
    }
}
