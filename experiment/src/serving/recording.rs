//! The recording layer of `experiment serve --record`: every timeline
//! request goes through to the simulator as it came, and on its way back the
//! exchange (what the client asked, what it was served) goes to the client
//! book ([`crate::clients`]) and from there to the recorder. Other requests
//! pass untouched.
//!
//! The recorder's queue is bounded: when the disk falls behind, the request
//! waits for room (back-pressure on the client), so that no record is lost
//! and memory stays bounded whatever the clients' rate.

use crate::clients::{
    ClientBook, Exchange, Page, Reader, Recorded, first_served, served, timeline_of,
};
use crate::record::RecordSender;
use crate::sim::server::ServedIds;
use crate::sim::sync::lock;
use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::{Arc, Mutex};

/// The largest request body read (a timeline request's parameters are a few
/// hundred bytes); a larger one is refused with 413.
const MAX_REQUEST_BODY: usize = 64 * 1024;

/// The largest response read back (the simulator's pages are far smaller).
const MAX_RESPONSE_BODY: usize = 16 * 1024 * 1024;

/// The most records one exchange sends: a new client's poller row and its request.
const RECORDS_A_REQUEST: usize = 2;

/// The `runs` row of a server face's recording (`serve --record`): a run of
/// `target` on `profile`, seeded `seed`, on the wall clock from
/// `started_at_ms`, its IDs of `layout`, `config` its `runs.config`.
pub fn run_row(
    (target, profile): (&str, &str),
    seed: u64,
    started_at_ms: i64,
    layout: &since_id::id::Layout,
    config: serde_json::Value,
) -> rundb::RunRow {
    rundb::RunRow {
        started_at_ms,
        target: target.into(),
        profile: Some(profile.into()),
        // The seed's bit pattern (rundb::rows).
        seed: Some(seed as i64),
        clock: "wall".into(),
        layout: layout.name().into(),
        config: config.to_string(),
        version: rundb::VERSION.into(),
        ..rundb::RunRow::default()
    }
}

/// The banner's line of a server face recording to `path` (`--record`).
pub fn banner_line(path: &std::path::Path) -> String {
    format!(
        "  recording       {} (every client's requests, and the truth)",
        path.display()
    )
}

struct Recording {
    /// Held while a record is sent, so that a new client's poller row reaches
    /// the recorder before any request of it, in the order indexes were given.
    book: Mutex<ClientBook>,
    /// Reads each exchange before the book is taken, so that the workers
    /// hold it only to place the request ([`ClientBook::place`]).
    reader: Reader,
    sender: RecordSender,
    layout: since_id::id::Layout,
}

/// `router` with every timeline exchange recorded to `sender`.
pub fn layer(router: axum::Router, book: ClientBook, sender: RecordSender) -> axum::Router {
    let state = Arc::new(Recording {
        layout: book.layout().clone(),
        reader: book.reader(),
        book: Mutex::new(book),
        sender,
    });
    router.layer(axum::middleware::from_fn_with_state(state, record))
}

async fn record(State(rec): State<Arc<Recording>>, request: Request, next: Next) -> Response {
    let method = request.method().as_str().to_string();
    let path = request.uri().path().to_string();
    // Read as the server reads it.
    let query = crate::sim::server::params(&request.uri().query().map(str::to_string));
    if timeline_of(&method, &path, &query).is_none() {
        return next.run(request).await;
    }
    // Read before any await: a borrow of the request held across one would
    // make this future not Send (its body is not Sync).
    let (authorization, user_agent) = {
        let header_text = |name: header::HeaderName| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        (
            header_text(header::AUTHORIZATION),
            header_text(header::USER_AGENT),
        )
    };
    let (parts, body) = request.into_parts();
    // A GET's empty body is neither read nor parsed: most requests are those.
    let (body, json) = match body.size_hint().exact() {
        Some(0) => (body, None),
        _ => {
            let Ok(sent_body) = axum::body::to_bytes(body, MAX_REQUEST_BODY).await else {
                return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
            };
            let json = serde_json::from_slice(&sent_body).ok();
            (Body::from(sent_body), json)
        }
    };
    let sent_at_ms = crate::clock::now_ms();
    let response = next.run(Request::from_parts(parts, body)).await;
    let received_at_ms = crate::clock::now_ms();
    let status = response.status().as_u16();
    let (mut parts, body) = response.into_parts();
    let scope = parts.extensions.get::<crate::sim::server::Scope>().cloned();
    let covered = parts
        .extensions
        .get::<crate::sim::server::Covered>()
        .copied();
    let served_ids = parts.extensions.remove::<ServedIds>();
    let Ok(sent) = axum::body::to_bytes(body, MAX_RESPONSE_BODY).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "response too large to record",
        )
            .into_response();
    };
    let exchange = Exchange {
        method,
        path,
        query,
        body: json,
        authorization,
        user_agent,
        status,
        response: sent.clone(),
        scope,
        covered,
        sent_at_ms,
        received_at_ms,
    };
    // A page the server marked is known without reading it back, but for
    // the statuses no client was served before (their rows need the creation
    // time and author it wrote); any other page (a body a fault rewrote, a
    // backend that does not mark) is read.
    let page = match served_ids {
        Some(ServedIds { ids, spans }) if status == 200 => {
            let new = lock(&rec.book).claim(&ids);
            let first_seen = match new.is_empty() {
                true => Vec::new(),
                false => first_served(&rec.layout, &exchange, &ids, spans.as_deref(), new),
            };
            Page::marked(&rec.layout, &ids, first_seen)
        }
        _ => Page::read(served(&rec.layout, &exchange), |ids| {
            lock(&rec.book).claim(ids)
        }),
    };
    let Some(reading) = rec.reader.read(&exchange) else {
        return Response::from_parts(parts, Body::from(sent));
    };
    let record = || {
        let mut book = lock(&rec.book);
        for recorded in book.place(reading, page) {
            match recorded {
                Recorded::NewClient(row) => rec.sender.poller(row),
                Recorded::Request(row, asked) => rec.sender.client_request(*row, asked),
            }
        }
    };
    // A full queue makes the send wait: then wait off the runtime's worker,
    // so the other tasks go on. Handing the worker over costs a thread switch
    // a request, so it is done only when the queue is near full (the few
    // records another sender may add in between wait at most one commit).
    if rec.sender.has_room(RECORDS_A_REQUEST) {
        record();
    } else {
        tokio::task::block_in_place(record);
    }
    Response::from_parts(parts, Body::from(sent))
}

#[cfg(test)]
mod tests {
    //! The server's mark of the statuses a page holds ([`ServedIds`]) must be
    //! what reading the page gives, in every dialect, or a recording that
    //! trusts it would record what no client was served.

    use crate::clients::{ClientBook, Exchange, Page, first_served, served};
    use crate::sim::faults::{FaultPlan, FaultSpec};
    use crate::sim::server::{RateLimits, RunningServer, ServedIds, router_with_clock};
    use crate::sim::sync::lock;
    use crate::sim::{SimConfig, Simulator};
    use axum::extract::{Request, State};
    use axum::middleware::Next;
    use axum::response::Response;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    const NOW: i64 = 1_700_000_000_000;

    /// A request: method, path and query, JSON body.
    type Asked<'a> = (&'a str, &'a str, &'a str);

    /// What the layer under test saw: the exchange and the server's mark.
    type Seen = Arc<Mutex<Vec<(Exchange, Option<ServedIds>)>>>;

    async fn keep(State(seen): State<Seen>, request: Request, next: Next) -> Response {
        let method = request.method().as_str().to_string();
        let path = request.uri().path().to_string();
        let query = crate::sim::server::params(&request.uri().query().map(str::to_string));
        let response = next.run(request).await;
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        let mark = parts.extensions.get::<ServedIds>().cloned();
        let exchange = Exchange {
            method,
            path,
            query,
            body: None,
            authorization: None,
            user_agent: None,
            status: parts.status.as_u16(),
            response: bytes.clone(),
            scope: None,
            covered: None,
            sent_at_ms: NOW,
            received_at_ms: NOW,
        };
        lock(&seen).push((exchange, mark));
        Response::from_parts(parts, axum::body::Body::from(bytes))
    }

    /// The router of a simulator of `profile` holding a minute of statuses,
    /// its clock stopped at [`NOW`].
    fn simulator(profile: &str) -> axum::Router {
        let mut config = SimConfig::profile(profile).unwrap();
        config.rate_per_s = 20.0;
        let sim = Simulator::with_backlog(config, 7, NOW, 60_000);
        router_with_clock(
            Arc::new(Mutex::new(sim)),
            RateLimits::default(),
            Arc::new(|| NOW),
        )
    }

    /// `requests` (method, path and query, JSON body) against a simulator of
    /// `profile` holding a minute of statuses, each seen by the layer above
    /// the simulator (and the faults layer, if `faults`).
    async fn exchanges(
        profile: &str,
        requests: &[Asked<'_>],
        faults: Option<FaultSpec>,
    ) -> Vec<(Exchange, Option<ServedIds>)> {
        let mut app = simulator(profile);
        if let Some(spec) = faults {
            app = crate::sim::faults::layer(app, FaultPlan::new(spec, 3));
        }
        let seen: Seen = Arc::default();
        let app = app.layer(axum::middleware::from_fn_with_state(seen.clone(), keep));
        let server = RunningServer::start(app).await.unwrap();
        let http = crate::api::http_client(std::time::Duration::from_secs(10)).unwrap();
        for (method, path, body) in requests {
            let request = match *method {
                "GET" => http.get(server.url(path)),
                _ => http
                    .post(server.url(path))
                    .header("content-type", "application/json")
                    .body(body.to_string()),
            };
            let sent = request.bearer_auth("t").send().await.unwrap();
            sent.bytes().await.unwrap();
        }
        server.stop().await.unwrap();
        Arc::try_unwrap(seen).unwrap().into_inner().unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_servers_mark_is_what_reading_each_dialects_page_gives() {
        let cases: [(&str, &[Asked]); 4] = [
            (
                "mastodon",
                &[
                    ("GET", "/api/v1/timelines/public?limit=40", ""),
                    ("GET", "/api/v1/timelines/home?limit=40", ""),
                    ("GET", "/api/v1/timelines/public?local=true&limit=40", ""),
                ],
            ),
            (
                "twitter",
                &[
                    ("GET", "/1.1/lists/statuses.json?list_id=1&count=200", ""),
                    (
                        "GET",
                        "/1.1/statuses/home_timeline.json?count=200&tweet_mode=extended",
                        "",
                    ),
                    (
                        "GET",
                        "/2/users/1/tweets?max_results=100&expansions=author_id",
                        "",
                    ),
                    ("GET", "/2/tweets/search/recent?query=a&max_results=100", ""),
                ],
            ),
            (
                "misskey",
                &[
                    ("POST", "/api/notes/global-timeline", r#"{"limit":100}"#),
                    ("POST", "/api/notes/timeline", r#"{"i":"t","limit":100}"#),
                ],
            ),
            (
                "discord",
                &[("GET", "/api/v10/channels/1/messages?limit=100", "")],
            ),
        ];
        for (profile, requests) in cases {
            let layout = SimConfig::profile(profile).unwrap().layout();
            let seen = exchanges(profile, requests, None).await;
            assert_eq!(seen.len(), requests.len());
            for (exchange, mark) in seen {
                let what = format!("{profile} {}", exchange.path);
                assert_eq!(exchange.status, 200, "{what}");
                let read = served(&layout, &exchange);
                let mark = mark.unwrap_or_else(|| panic!("{what}: no mark"));
                assert!(
                    !read.is_empty(),
                    "{what}: a page of statuses, or this proves nothing"
                );
                // The page's record, from the mark and from the body.
                let marked = Page::marked(&layout, &mark.ids, Vec::new());
                if exchange.path.starts_with("/1.1/") {
                    assert!(
                        mark.spans.is_some(),
                        "{what}: v1.1 pages say where each status lies"
                    );
                }
                // The statuses read for a page of which `seen` were served before.
                let first_after = |seen: Vec<since_id::Id>| {
                    let mut book = ClientBook::new(layout.clone(), HashMap::new());
                    book.claim(&seen);
                    let claimed = book.claim(&mark.ids);
                    first_served(
                        &layout,
                        &exchange,
                        &mark.ids,
                        mark.spans.as_deref(),
                        claimed,
                    )
                };
                // Every status new: what the spans give is the whole page.
                let first = first_after(Vec::new());
                assert_eq!(first, read, "{what}: the statuses read where the spans say");
                // One new status, in the middle: only it is read.
                let middle = mark.ids[mark.ids.len() / 2];
                let first = first_after(
                    mark.ids
                        .iter()
                        .copied()
                        .filter(|&id| id != middle)
                        .collect(),
                );
                let expected: Vec<_> = read.iter().filter(|i| i.id == middle).cloned().collect();
                assert_eq!(first, expected, "{what}: the one new status");
                let read = Page::read(read, |_| Default::default());
                assert_eq!(marked, read, "{what}");
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_page_a_fault_rewrote_carries_no_mark() {
        let spec = FaultSpec {
            duplicate: 1.0,
            ..FaultSpec::default()
        };
        let requests = [("GET", "/api/v1/timelines/public?limit=40", "")];
        let seen = exchanges("mastodon", &requests, Some(spec)).await;
        let (exchange, mark) = &seen[0];
        let layout = SimConfig::profile("mastodon").unwrap().layout();
        let read = served(&layout, exchange);
        let distinct: std::collections::HashSet<_> = read.iter().map(|i| i.id).collect();
        assert!(
            distinct.len() < read.len(),
            "the page was rewritten: an item repeated"
        );
        assert_eq!(
            mark, &None,
            "a rewritten page is read, never taken from the mark"
        );
    }

    /// Every exchange served before the server stopped is in the database:
    /// eight clients at once, each on its own timeline, their exchanges
    /// recorded by two serving threads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_exchange_served_by_concurrent_clients_is_recorded() {
        const CLIENTS: usize = 8;
        const EACH: usize = 60;
        let layout = SimConfig::profile("mastodon").unwrap().layout();
        let app = simulator("mastodon");
        let db = crate::record::writer::tests::temp_db("recording");
        let recorder =
            crate::record::Recorder::create(&db, &crate::record::writer::tests::run_info(), &[])
                .unwrap();
        let book = ClientBook::new(layout, HashMap::new());
        let app = super::layer(app, book, recorder.sender());
        let server = RunningServer::start(app).await.unwrap();
        let http = crate::api::http_client(std::time::Duration::from_secs(10)).unwrap();
        let mut clients = tokio::task::JoinSet::new();
        for c in 0..CLIENTS {
            let (http, url) = (
                http.clone(),
                server.url(&format!("/api/v1/timelines/tag/t{c}?limit=40")),
            );
            clients.spawn(async move {
                for _ in 0..EACH {
                    let sent = http.get(&url).bearer_auth("t").send().await.unwrap();
                    assert_eq!(sent.status(), 200);
                    sent.bytes().await.unwrap();
                }
            });
        }
        while let Some(done) = clients.join_next().await {
            done.unwrap();
        }
        server.stop().await.unwrap();
        recorder.finish(NOW, true, "stopped").unwrap();
        let conn = rusqlite::Connection::open(&*db).unwrap();
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(
            count("SELECT count(*) FROM client_requests"),
            (CLIENTS * EACH) as i64,
            "every exchange recorded"
        );
        assert_eq!(
            count("SELECT count(*) FROM pollers"),
            CLIENTS as i64,
            "one poller a timeline of the one client"
        );
        assert_eq!(count("SELECT complete FROM runs"), 1);
    }
}
