//! The HTTP shell over real loopback sockets: every dialect against the
//! simulator's server (fixed clock, injected statuses, so pages are exact),
//! and against tiny handlers for what the simulator does not do (gzip, a
//! huge body, a 401, a 429).

use super::*;
use crate::sim::model::{SimStatus, Simulator};
use crate::sim::profile::SimConfig;
use crate::sim::server::{RateLimits, RunningServer, router_with_clock};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use since_id::policy::CursorPolicy;
use since_id::poller::Poller;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const NOW: i64 = 1_700_000_000_000;

fn status(id: Id) -> SimStatus {
    SimStatus {
        id,
        id_time_ms: 0,
        posted_at_ms: NOW - 60_000,
        visible_at_ms: NOW,
        deleted_at_ms: None,
        origin: "local".into(),
        author: 7,
    }
}

/// A simulator on `profile`'s layout with nothing but what the test injects.
async fn server(profile: &str) -> (RunningServer, Arc<Mutex<Simulator>>, Layout) {
    let mut config = SimConfig::profile(profile).unwrap();
    config.rate_per_s = 0.0;
    // Recent search's end lag bounds the ID's time: the injected IDs are seconds old.
    config.search_end_lag_ms = 0;
    let sim = Simulator::new(config, 1, NOW);
    let layout = sim.layout().clone();
    let sim = Arc::new(Mutex::new(sim));
    let app = router_with_clock(sim.clone(), RateLimits::default(), Arc::new(|| NOW));
    (RunningServer::start(app).await.unwrap(), sim, layout)
}

/// IDs `n` apart in time, from `from` (ms before NOW) upwards.
fn ids(layout: &Layout, from_ms: i64, count: usize) -> Vec<Id> {
    (0..count)
        .map(|i| layout.min_id_at(NOW - from_ms + i as i64 * 10))
        .collect()
}

fn inject(sim: &Arc<Mutex<Simulator>>, ids: &[Id]) {
    let mut sim = sim.lock().unwrap();
    for &id in ids {
        sim.inject(status(id));
    }
}

/// The Mastodon public timeline of a simulator server, without a token.
fn mastodon_sim_target(server: &RunningServer, layout: &Layout) -> HttpTarget {
    HttpTarget::new(
        http_client(Duration::from_secs(5)).unwrap(),
        &server.url(""),
        Dialect::Mastodon {
            timeline: "public".into(),
        },
        layout.clone(),
        None,
    )
}

/// One cycle of `poller` against `target`: every item returned, and whether it overflowed.
async fn cycle(target: &HttpTarget, poller: &mut Poller, now: i64) -> (Vec<Id>, bool) {
    let mut req = poller.begin_cycle(now);
    let mut seen = Vec::new();
    loop {
        let fetched = target.fetch(&req).await;
        let items = fetched.result.expect("request succeeds");
        let outcome = poller.on_page(items, now);
        seen.extend(outcome.items.iter().map(|i| i.id));
        match outcome.next {
            Some(next) => {
                poller.next_page_sent();
                req = next;
            }
            None => return (seen, outcome.overflow),
        }
    }
}

/// The analysis-free check: every status of the gap was observed.
fn gap_covered(gap: &[Id], observed: &HashSet<Id>) -> Result<(), String> {
    let missing = gap.iter().filter(|id| !observed.contains(id)).count();
    if missing == 0 {
        Ok(())
    } else {
        Err(format!("{missing} statuses in the gap never observed"))
    }
}

/// A naive poller sees one status, then 100 more appear: more than a page
/// (40) above its since_id. Returns what the gap check says and the overflow flag.
async fn mastodon_gap(max_back_pages: u32) -> (Result<(), String>, bool) {
    let (server, sim, layout) = server("mastodon").await;
    let first = ids(&layout, 10_000, 1);
    inject(&sim, &first);
    let target = mastodon_sim_target(&server, &layout);
    let mut poller = Poller::new(
        "naive",
        CursorPolicy::Naive,
        layout.clone(),
        40,
        max_back_pages,
    );
    let (seen, _) = cycle(&target, &mut poller, NOW).await;
    assert_eq!(seen, first);
    let gap = ids(&layout, 5_000, 100);
    inject(&sim, &gap);
    let (seen, overflow) = cycle(&target, &mut poller, NOW + 1000).await;
    let observed: HashSet<Id> = seen.into_iter().collect();
    (gap_covered(&gap, &observed), overflow)
}

#[tokio::test]
async fn mastodon_gap_larger_than_a_page_is_filled_by_paging_back_with_max_id() {
    let (check, overflow) = mastodon_gap(10).await;
    assert_eq!(check, Ok(()));
    assert!(!overflow);
}

/// since_id alone returns the newest 40 and silently drops the middle: the
/// same check catches a poller that does not page back (and it says so).
#[tokio::test]
async fn since_id_alone_loses_the_middle_of_the_gap_and_the_check_catches_it() {
    let (check, overflow) = mastodon_gap(0).await;
    assert_eq!(
        check,
        Err("60 statuses in the gap never observed".to_string())
    );
    assert!(overflow, "the cut window is flagged as an overflow");
}

/// Every dialect against the simulator: a first page, then a gap of 100 above
/// the cursor with pages smaller than that, all of which must be observed.
#[tokio::test]
async fn every_dialect_pages_a_gap_completely() {
    let cases: Vec<(&str, Dialect, &str, usize)> = vec![
        (
            "twitter",
            Dialect::TwitterV1 {
                list_id: "1".into(),
            },
            "",
            30,
        ),
        (
            "mastodon",
            Dialect::Mastodon {
                timeline: "local".into(),
            },
            "",
            40,
        ),
        (
            "misskey",
            Dialect::Misskey {
                endpoint: "local-timeline".into(),
            },
            "",
            30,
        ),
        (
            "twitter",
            Dialect::X {
                endpoint: XEndpoint::UserTweets {
                    user_id: "2244994945".into(),
                },
            },
            "",
            30,
        ),
        (
            "twitter",
            Dialect::X {
                endpoint: XEndpoint::SearchRecent {
                    query: "from:XDevelopers".into(),
                },
            },
            "",
            30,
        ),
        (
            "discord",
            Dialect::Discord {
                channel_id: "290926798999357250".into(),
            },
            "/api/v10",
            30,
        ),
    ];
    for (profile, dialect, prefix, limit) in cases {
        let (server, sim, layout) = server(profile).await;
        let old = ids(&layout, 20_000, 50);
        inject(&sim, &old);
        let target = HttpTarget::new(
            http_client(Duration::from_secs(5)).unwrap(),
            &server.url(prefix),
            dialect.clone(),
            layout.clone(),
            None,
        );
        let mut poller = Poller::new("naive", CursorPolicy::Naive, layout.clone(), limit, 10);
        let (seen, overflow) = cycle(&target, &mut poller, NOW).await;
        assert_eq!(seen.len(), limit, "{dialect:?}: first cycle is one page");
        assert!(!overflow);
        let gap = ids(&layout, 5_000, 100);
        inject(&sim, &gap);
        let (seen, overflow) = cycle(&target, &mut poller, NOW + 1000).await;
        let observed: HashSet<Id> = seen.iter().copied().collect();
        assert_eq!(gap_covered(&gap, &observed), Ok(()), "{dialect:?}");
        assert!(!overflow, "{dialect:?}");
        assert!(
            seen.iter().all(|id| *id > old[49]),
            "{dialect:?}: nothing at or below the cursor comes back"
        );
        server.stop().await.unwrap();
    }
}

/// Minimal deflate "stored" blocks in a gzip member: valid gzip without a compressor.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut crc_table = [0u32; 256];
    for (i, slot) in crc_table.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *slot = c;
    }
    let crc = !data.iter().fold(!0u32, |c, &b| {
        crc_table[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8)
    });
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    let chunks: Vec<&[u8]> = data.chunks(65_535).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        out.push(u8::from(i + 1 == chunks.len()));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// A brotli stream of uncompressed meta-blocks (RFC 7932 9.2): valid brotli without a compressor.
fn brotli_stored(data: &[u8]) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        used: u32,
    }
    impl Bits {
        fn put(&mut self, value: u32, n: u32) {
            for i in 0..n {
                if self.used.is_multiple_of(8) {
                    self.out.push(0);
                }
                let bit = ((value >> i) & 1) as u8;
                *self.out.last_mut().unwrap() |= bit << (self.used % 8);
                self.used += 1;
            }
        }
        fn align(&mut self) {
            self.used = self.used.div_ceil(8) * 8;
        }
    }
    let mut b = Bits {
        out: Vec::new(),
        used: 0,
    };
    b.put(0, 1); // WBITS = 16
    for chunk in data.chunks(65_536) {
        b.put(0, 1); // ISLAST = 0
        b.put(0, 2); // MNIBBLES = 4
        b.put(chunk.len() as u32 - 1, 16); // MLEN - 1
        b.put(1, 1); // ISUNCOMPRESSED
        b.align();
        b.out.extend_from_slice(chunk);
        b.used = b.out.len() as u32 * 8;
    }
    b.put(1, 1); // ISLAST
    b.put(1, 1); // ISLASTEMPTY
    b.out
}

#[tokio::test]
async fn brotli_bodies_are_read() {
    let body = br#"[{"id":"103206804086086361","created_at":"2019-11-26T23:27:32.000Z"}]"#;
    let (server, _) =
        capture(move || ([(header::CONTENT_ENCODING, "br")], brotli_stored(body)).into_response())
            .await;
    let items = mastodon_target(&server, None)
        .fetch(&first_page())
        .await
        .result
        .unwrap();
    assert_eq!(items[0].id_text, "103206804086086361");
}

type Seen = Arc<Mutex<Vec<(HeaderMap, Vec<u8>)>>>;

/// A server answering every request on `path` with `respond`, remembering the requests.
async fn capture(
    respond: impl Fn() -> axum::response::Response + Clone + Send + Sync + 'static,
) -> (RunningServer, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: axum::body::Bytes| {
        let respond = respond.clone();
        let log = log.clone();
        async move {
            log.lock().unwrap().push((headers, body.to_vec()));
            respond()
        }
    });
    (RunningServer::start(app).await.unwrap(), seen)
}

fn mastodon_target(server: &RunningServer, token: Option<&str>) -> HttpTarget {
    HttpTarget::new(
        http_client(Duration::from_secs(5)).unwrap(),
        &server.url(""),
        Dialect::Mastodon {
            timeline: "public".into(),
        },
        "mastodon".parse().unwrap(),
        token.map(|t| Token::new(t.into())),
    )
}

/// What a Mastodon first page comes to against a server that always answers `respond`.
async fn mastodon_result(
    respond: impl Fn() -> axum::response::Response + Clone + Send + Sync + 'static,
    token: Option<&str>,
) -> Result<Vec<Item>, String> {
    let (server, _) = capture(respond).await;
    mastodon_target(&server, token)
        .fetch(&first_page())
        .await
        .result
}

fn first_page() -> PageRequest {
    PageRequest {
        since: None,
        before: None,
        limit: 40,
    }
}

#[tokio::test]
async fn gzip_bodies_are_read_and_the_headers_reach_the_server() {
    let body = br#"[{"id":"103206804533200177","created_at":"2019-11-26T23:27:31.000Z","account":{"acct":"a@b"}}]"#;
    let (server, seen) = capture(move || {
        (
            [
                (header::CONTENT_ENCODING, "gzip"),
                (header::CONTENT_TYPE, "application/json"),
            ],
            gzip_stored(body),
        )
            .into_response()
    })
    .await;
    let fetched = mastodon_target(&server, Some("s3cret"))
        .fetch(&first_page())
        .await;
    let items = fetched.result.unwrap();
    assert_eq!(items[0].id_text, "103206804533200177");
    assert_eq!(items[0].author.as_deref(), Some("a@b"));
    let (headers, _) = seen.lock().unwrap()[0].clone();
    let get = |h: header::HeaderName| headers.get(h).unwrap().to_str().unwrap().to_string();
    assert_eq!(get(header::USER_AGENT), USER_AGENT);
    assert!(USER_AGENT.starts_with("snowleak-experiment/0."));
    let accept = get(header::ACCEPT_ENCODING);
    assert!(accept.contains("gzip") && accept.contains("br"), "{accept}");
    assert_eq!(get(header::AUTHORIZATION), "Bearer s3cret");
}

#[tokio::test]
async fn discord_sends_a_bot_token_and_misskey_a_body_token() {
    let (server, seen) = capture(|| (StatusCode::OK, "[]").into_response()).await;
    let client = http_client(Duration::from_secs(5)).unwrap();
    let discord = HttpTarget::new(
        client.clone(),
        &server.url("/api/v10"),
        Dialect::Discord {
            channel_id: "1".into(),
        },
        "discord".parse().unwrap(),
        Some(Token::new("bot-secret".into())),
    );
    assert_eq!(discord.fetch(&first_page()).await.result, Ok(vec![]));
    let misskey = HttpTarget::new(
        client,
        &server.url(""),
        Dialect::Misskey {
            endpoint: "local-timeline".into(),
        },
        "misskey-aidx".parse().unwrap(),
        Some(Token::new("mk-secret".into())),
    );
    assert_eq!(misskey.fetch(&first_page()).await.result, Ok(vec![]));
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].0[header::AUTHORIZATION], "Bot bot-secret");
    assert!(seen[1].0.get(header::AUTHORIZATION).is_none());
    let body: Value = serde_json::from_slice(&seen[1].1).unwrap();
    assert_eq!(body["i"], "mk-secret");
    assert_eq!(body["untilId"], "zzzzzzzzzzzzzzzz");
}

#[tokio::test]
async fn bodies_over_the_cap_are_errors() {
    let (server, _) = capture(|| vec![b' '; MAX_BODY_BYTES + 1].into_response()).await;
    let fetched = mastodon_target(&server, None).fetch(&first_page()).await;
    assert_eq!(
        fetched.result,
        Err(format!("response body over {MAX_BODY_BYTES} bytes"))
    );
    let (server, _) = capture(|| "[]    ".into_response()).await;
    let small = mastodon_target(&server, None).with_max_body(5);
    assert!(small.fetch(&first_page()).await.result.is_err());
}

#[tokio::test]
async fn a_401_without_a_token_says_which_variable_to_set() {
    let (server, _) = capture(|| {
        (
            StatusCode::UNAUTHORIZED,
            r#"{"error":"This API requires an authenticated user"}"#,
        )
            .into_response()
    })
    .await;
    let error = mastodon_target(&server, None)
        .fetch(&first_page())
        .await
        .result
        .unwrap_err();
    assert!(error.starts_with("HTTP 401: "), "{error}");
    assert!(error.contains("MASTODON_ACCESS_TOKEN"), "{error}");
    let with_token = mastodon_target(&server, Some("t"))
        .fetch(&first_page())
        .await
        .result
        .unwrap_err();
    assert!(!with_token.contains("MASTODON_ACCESS_TOKEN"));
}

#[tokio::test]
async fn a_429_holds_back_every_clone_of_the_target() {
    let (server, _) = capture(|| {
        (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            r#"{"error":"Too many requests"}"#,
        )
            .into_response()
    })
    .await;
    let target = mastodon_target(&server, None);
    let fetched = target.fetch(&first_page()).await;
    assert_eq!(fetched.http_status, Some(429));
    assert_eq!(fetched.retry_after_ms, Some(1000));
    // Another poller's clone waits out the refusal too.
    let waited = target.clone().pace().await;
    assert!((800..=1000).contains(&waited), "{waited}");
}

fn misskey_target(server: &RunningServer, token: &str) -> HttpTarget {
    HttpTarget::new(
        http_client(Duration::from_secs(5)).unwrap(),
        &server.url(""),
        Dialect::Misskey {
            endpoint: "local-timeline".into(),
        },
        "misskey-aidx".parse().unwrap(),
        Some(Token::new(token.into())),
    )
}

/// Issue 11.1: a 307/308 to another host would re-send Misskey's body token.
/// No redirect is followed, on or off the origin; the failure names the location.
#[tokio::test]
async fn a_redirect_to_another_host_is_never_followed_and_names_its_location() {
    let (elsewhere, reached) = capture(|| (StatusCode::OK, "[]").into_response()).await;
    for code in [
        StatusCode::TEMPORARY_REDIRECT,
        StatusCode::PERMANENT_REDIRECT,
    ] {
        let location = elsewhere.url("/api/notes/local-timeline");
        let (hostile, asked) =
            capture(move || (code, [(header::LOCATION, location.clone())], "").into_response())
                .await;
        let target = misskey_target(&hostile, "mk-secret");
        let fetched = target.fetch(&first_page()).await;
        assert_eq!(fetched.http_status, Some(code.as_u16()));
        let error = fetched.result.unwrap_err();
        assert_eq!(
            error,
            format!(
                "HTTP {}: redirect to {} not followed (redirects are never followed)",
                code.as_u16(),
                elsewhere.url("/api/notes/local-timeline")
            )
        );
        // The layout probe is refused the same way.
        let probe = misskey_probe_request();
        let client = http_client(Duration::from_secs(5)).unwrap();
        let token = Token::new("mk-secret".into());
        let probed = probe_layout(&client, &hostile.url(""), &probe, Some(&token)).await;
        assert!(probed.unwrap_err().contains("not followed"));
        assert_eq!(asked.lock().unwrap().len(), 2);
    }
    // A file:// location is named too.
    let error = mastodon_result(
        || {
            (
                StatusCode::FOUND,
                [(header::LOCATION, "file:///etc/passwd")],
                "",
            )
                .into_response()
        },
        None,
    )
    .await
    .unwrap_err();
    assert!(error.contains("redirect to file:///etc/passwd"), "{error}");
    assert!(
        reached.lock().unwrap().is_empty(),
        "the other host was never reached, so neither the body token nor a Referer left"
    );
}

/// Issue 11.6: a server echoing the token gets it back redacted, in errors and items.
#[tokio::test]
async fn a_token_echoed_by_the_server_is_redacted_everywhere() {
    let token = Some("s3cret-token");
    let echo = || {
        (
            StatusCode::UNAUTHORIZED,
            r#"{"error": "Bearer s3cret-token"}"#,
        )
            .into_response()
    };
    let error = mastodon_result(echo, token).await.unwrap_err();
    assert_eq!(error, r#"HTTP 401: {"error": "Bearer <redacted>"}"#);
    let echo = || {
        (
            StatusCode::OK,
            r#"[{"id":"103206804533200177","created_at":"Bot s3cret-token","account":{"acct":"s3cret-token@x"}}]"#,
        )
            .into_response()
    };
    let items = mastodon_result(echo, token).await.unwrap();
    assert_eq!(items[0].created_at.as_deref(), Some("Bot <redacted>"));
    assert_eq!(items[0].author.as_deref(), Some("<redacted>@x"));
    // The probe's errors too.
    let (server, _) =
        capture(|| (StatusCode::FORBIDDEN, "i=mk-secret is wrong").into_response()).await;
    let client = http_client(Duration::from_secs(5)).unwrap();
    let probe = misskey_probe_request();
    let token = Token::new("mk-secret".into());
    let error = probe_layout(&client, &server.url(""), &probe, Some(&token))
        .await
        .unwrap_err();
    assert_eq!(error, "layout probe: HTTP 403: i=<redacted> is wrong");
}

fn misskey_probe_request() -> HttpRequest {
    HttpRequest {
        post: true,
        path: "/api/notes/local-timeline".into(),
        query: vec![],
        json_body: Some(serde_json::json!({"limit": 10})),
    }
}

/// Issue 11.3: a page larger than asked for is a failed request, whatever the body,
/// and the count is made before any item is built.
#[tokio::test]
async fn a_page_larger_than_the_limit_is_a_failed_request() {
    let entries: Vec<String> = (0..41)
        .map(|i| format!(r#"{{"id":"1032068045332{i:05}"}}"#))
        .collect();
    let big = format!("[{}]", entries.join(","));
    let result = mastodon_result(move || (StatusCode::OK, big.clone()).into_response(), None).await;
    assert_eq!(
        result,
        Err("response has 41 items, more than the page limit of 40 asked for".into())
    );
    // 450,000 tiny items under the body cap: refused the same way.
    let huge = format!("[{}]", vec!["{}"; 450_000].join(","));
    let result =
        mastodon_result(move || (StatusCode::OK, huge.clone()).into_response(), None).await;
    assert_eq!(
        result,
        Err("response has 450000 items, more than the page limit of 40 asked for".into())
    );
    // Exactly the limit is fine, and so is a full page with one item repeated
    // (the simulator's `duplicate` fault): repeats are duplicates, not a violation.
    let mut full = entries[..40].to_vec();
    full.push(entries[0].clone());
    let full = format!("[{}]", full.join(","));
    let result =
        mastodon_result(move || (StatusCode::OK, full.clone()).into_response(), None).await;
    assert_eq!(result.unwrap().len(), 41);
}

/// Issue 11.4 over loopback: a server that serves one status IDed three years
/// ahead does not blind the poller; what is posted later is still returned.
#[tokio::test]
async fn a_status_from_the_future_does_not_blind_the_poller() {
    let (server, sim, layout) = server("mastodon").await;
    let three_years = 3 * 365 * 24 * 3600 * 1000;
    let future = layout.min_id_at(NOW + three_years);
    let first = ids(&layout, 10_000, 3);
    inject(&sim, &first);
    inject(&sim, &[future]);
    let target = mastodon_sim_target(&server, &layout);
    for policy in [
        CursorPolicy::Naive,
        CursorPolicy::Compensated { k_ms: 1000 },
    ] {
        let mut poller = Poller::new("p", policy, layout.clone(), 40, 10);
        let (seen, _) = cycle(&target, &mut poller, NOW).await;
        assert!(seen.contains(&future));
        assert!(poller.since().unwrap() < layout.min_id_at(NOW + 60_001));
        let later = ids(&layout, 2_000, 2);
        inject(&sim, &later);
        let (seen, _) = cycle(&target, &mut poller, NOW + 1000).await;
        for id in &later {
            assert!(seen.contains(id), "{policy}: a later status is returned");
        }
        sim.lock().unwrap().remove(later[0]);
        sim.lock().unwrap().remove(later[1]);
    }
}

/// Issue 11.8: the simulator's server closes connections that stay idle, send
/// half a request head, or go quiet after a request, instead of keeping them
/// open until it runs out of sockets. Each read below ends only because the
/// server closed the connection (the harness timeout fails the test otherwise).
#[tokio::test]
async fn the_server_closes_idle_and_half_sent_connections() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = crate::sim::server::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(|| async { "ok" });
    tokio::spawn(crate::sim::server::serve_with_timeout(
        listener,
        app,
        std::future::pending(),
        Duration::from_millis(200),
    ));
    let sends: [&[u8]; 3] = [
        b"",
        b"GET / HTTP/1.1\r\nHost: x\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ];
    for send in sends {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(send).await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut got))
            .await
            .expect("the server closes the connection")
            .unwrap();
        if send.ends_with(b"\r\n\r\n") {
            assert!(
                got.starts_with(b"HTTP/1.1 200"),
                "a whole request is answered first"
            );
        }
    }
}
