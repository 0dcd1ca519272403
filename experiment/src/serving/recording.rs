//! The recording layer of `experiment serve --record`: every timeline
//! request goes through to the simulator as it came, and on its way back the
//! exchange (what the client asked, what it was served) goes to the client
//! book ([`crate::clients`]) and from there to the recorder. Other requests
//! pass untouched.
//!
//! The recorder's queue is bounded: when the disk falls behind, the request
//! waits for room (back-pressure on the client), so that no record is lost
//! and memory stays bounded whatever the clients' rate.

use crate::clients::{ClientBook, Exchange, Recorded, timeline_of};
use crate::record::RecordSender;
use crate::sim::sync::lock;
use axum::body::Body;
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

struct Recording {
    /// Held while a record is sent, so that a new client's poller row reaches
    /// the recorder before any request of it, in the order indexes were given.
    book: Mutex<ClientBook>,
    sender: RecordSender,
    layout: since_id::id::Layout,
}

/// `router` with every timeline exchange recorded to `sender`.
pub fn layer(router: axum::Router, book: ClientBook, sender: RecordSender) -> axum::Router {
    let state = Arc::new(Recording {
        layout: book.layout().clone(),
        book: Mutex::new(book),
        sender,
    });
    router.layer(axum::middleware::from_fn_with_state(state, record))
}

async fn record(State(rec): State<Arc<Recording>>, request: Request, next: Next) -> Response {
    let method = request.method().as_str().to_string();
    let path = request.uri().path().to_string();
    let query: Vec<(String, String)> = request
        .uri()
        .query()
        .and_then(|q| reqwest::Url::parse(&format!("http://query/?{q}")).ok())
        .map(|url| url.query_pairs().into_owned().collect())
        .unwrap_or_default();
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
    let Ok(sent_body) = axum::body::to_bytes(body, MAX_REQUEST_BODY).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
    };
    let json = serde_json::from_slice(&sent_body).ok();
    let sent_at_ms = crate::clock::now_ms();
    let response = next
        .run(Request::from_parts(parts, Body::from(sent_body)))
        .await;
    let received_at_ms = crate::clock::now_ms();
    let status = response.status().as_u16();
    let (parts, body) = response.into_parts();
    let scope = parts.extensions.get::<crate::sim::server::Scope>().cloned();
    let covered = parts
        .extensions
        .get::<crate::sim::server::Covered>()
        .copied();
    let Ok(served) = axum::body::to_bytes(body, MAX_RESPONSE_BODY).await else {
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
        response: served.to_vec(),
        scope,
        covered,
        sent_at_ms,
        received_at_ms,
    };
    let items = crate::clients::served(&rec.layout, &exchange);
    // The queue may be full: wait for room without stalling the other tasks.
    tokio::task::block_in_place(|| {
        let mut book = lock(&rec.book);
        for recorded in book.observe_served(&exchange, items) {
            match recorded {
                Recorded::NewClient(row) => rec.sender.poller(row),
                Recorded::Request(row, asked) => rec.sender.client_request(*row, asked),
            }
        }
    });
    Response::from_parts(parts, Body::from(served))
}
