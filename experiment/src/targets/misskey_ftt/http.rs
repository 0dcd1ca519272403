//! The read side over loopback HTTP in Misskey's dialect, so that the
//! harness's Misskey pollers (`experiment/src/api/misskey.rs`) and Misskey.py
//! read it: `POST /api/notes/timeline` (home), `/api/notes/local-timeline`,
//! `/api/notes/hybrid-timeline`, with `/api/meta` and `/api/i` that clients
//! post first, parameters in a JSON body (`sinceId`,
//! `untilId`, `sinceDate`, `untilDate`, `limit` 1..100, default 10), errors
//! as the simulator's Misskey dialect writes them
//! (`experiment/sim/src/server/misskey.rs`). `sinceDate`/`untilDate` become
//! IDs with `idService.gen(date)`, as the endpoints do (misskey-dev/misskey
//! `packages/backend/src/server/api/endpoints/notes/timeline.ts`).
//! Every request is the pollers' account, user 0 (the token is not checked).

use super::aidx::{self, Aidx};
use super::read::{Path, Request};
use super::store::Source;
use super::timeline::{Reader, RedisSlot, RedisSource};
use crate::sim::sync::lock;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The pollers' account.
pub const ME: i32 = 0;

/// The key of [`PathCounts`] for reads that failed (Redis or PostgreSQL gone).
pub const FAILED: &str = "failed";

/// How many requests each path answered (and [`FAILED`]).
pub type PathCounts = Arc<Mutex<BTreeMap<&'static str, u64>>>;

#[derive(Clone)]
struct App {
    reader: Reader,
    /// The reader process's own aidx generator, for `sinceDate`/`untilDate`.
    ids: Arc<Mutex<Aidx>>,
    counts: PathCounts,
    /// The Redis connection to read on, when the run restarts Redis
    /// (`--redis-restart-at`); else the reader's own.
    slot: Option<RedisSlot>,
}

/// The router; `counts` is filled as requests are answered.
pub fn router(reader: Reader, counts: PathCounts) -> Router {
    router_on(reader, counts, None)
}

/// The router, reading Redis on `slot`'s current connection when given.
pub fn router_on(reader: Reader, counts: PathCounts, slot: Option<RedisSlot>) -> Router {
    let app = App {
        reader,
        ids: Arc::new(Mutex::new(Aidx::with_node("read"))),
        counts,
        slot,
    };
    Router::new()
        .route("/api/notes/timeline", post(home))
        .route("/api/notes/local-timeline", post(local))
        .route("/api/notes/hybrid-timeline", post(hybrid))
        .route("/api/notes/global-timeline", post(global))
        .route("/api/meta", post(meta))
        .route("/api/i", post(i))
        .fallback(unknown_endpoint)
        .with_state(app)
}

/// Any other path: Misskey's answer to an API endpoint it lacks, a 404 with
/// its JSON error (`UNKNOWN_API_ENDPOINT`, the catch-all route at the end of
/// packages/backend/src/server/api/ApiServerService.ts), so that a client
/// reads an API error, not an empty body. The body is read first, as in
/// [`meta`].
async fn unknown_endpoint(_body: Bytes) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "UNKNOWN_API_ENDPOINT",
        "Unknown API endpoint.",
        "2ca3b769-540a-4f08-9dd5-b5a825b6d0f1",
    )
}

/// `POST /api/notes/global-timeline`: from PostgreSQL alone, as Misskey
/// reads it (`store::global_page`); its page's path is `db-direct`.
async fn global(State(app): State<App>, body: Bytes) -> Response {
    timeline(app, None, body).await
}

async fn home(State(app): State<App>, body: Bytes) -> Response {
    timeline(app, Some(Source::Home { me: ME }), body).await
}

async fn local(State(app): State<App>, body: Bytes) -> Response {
    timeline(app, Some(Source::Local), body).await
}

async fn hybrid(State(app): State<App>, body: Bytes) -> Response {
    timeline(app, Some(Source::Hybrid { me: ME }), body).await
}

// `meta` and `i` take their body and drop it: a handler that leaves the
// body unread makes hyper close the connection after the response when the
// body has not arrived yet, and a keep-alive client (Misskey.py's session)
// then sends its next request into a closed connection.
async fn meta(_body: Bytes) -> Response {
    json_ok(json!({
        "name": "snowleak misskey-ftt",
        "version": "2025.4.0",
        "uri": "http://127.0.0.1",
        "description": "Misskey's Fanout Timeline on a real Redis and PostgreSQL",
        "langs": ["en"],
        "disableRegistration": true,
        "maxNoteTextLength": 3000,
        "policies": {"ltlAvailable": true, "gtlAvailable": true},
        "features": {"localTimeline": true, "globalTimeline": true, "miauth": true},
    }))
}

/// `POST /api/i`: the account every request reads as, user 0, in the
/// shape of Misskey's `MeDetailed` (the fields clients look at).
async fn i(_body: Bytes) -> Response {
    json_ok(json!({
        "id": ME.to_string(),
        "name": "snowleak",
        "username": "snowleak",
        "host": null,
        "avatarUrl": null,
        "isBot": true,
        "isCat": false,
        "emojis": {},
        "onlineStatus": "unknown",
        "createdAt": "2000-01-01T00:00:00.000Z",
        "followersCount": 0,
        "notesCount": 0,
    }))
}

fn json_ok(v: Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json; charset=utf-8")],
        v.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, code: &str, message: &str, id: &str) -> Response {
    let body = json!({"error": {"message": message, "code": code, "id": id, "kind": "client"}});
    (
        status,
        [("content-type", "application/json; charset=utf-8")],
        body.to_string(),
    )
        .into_response()
}

fn invalid(message: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "INVALID_PARAM",
        message,
        "3d81ceae-475f-4600-b2a8-2bc116157532",
    )
}

/// The request's parameters, checked as Misskey's schema does.
pub fn parse_request(body: &[u8], gen_at: impl FnMut(i64) -> String) -> Result<Request, String> {
    let mut gen_at = gen_at;
    let params: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(body) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Err("Invalid param: the body must be a JSON object.".into()),
        }
    };
    let limit = match params.get("limit") {
        None | Some(Value::Null) => 10,
        Some(v) => match v.as_u64() {
            Some(n @ 1..=100) => n as usize,
            _ => return Err("Invalid param: limit must be an integer from 1 to 100.".into()),
        },
    };
    let id = |name: &str| -> Result<Option<String>, String> {
        match params.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s))
                if aidx::parse_ms(s).is_some()
                    && s.bytes()
                        .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()) =>
            {
                Ok(Some(s.clone()))
            }
            Some(_) => Err(format!("Invalid param: {name} must be a misskey:id.")),
        }
    };
    let mut date = |name: &str| -> Result<Option<String>, String> {
        match params.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .map(|ms| Some(gen_at(ms)))
                .ok_or_else(|| format!("Invalid param: {name} must be an integer.")),
        }
    };
    // `untilId ?? (untilDate ? idService.gen(untilDate) : null)`, likewise since.
    let since_id = match id("sinceId")? {
        Some(s) => Some(s),
        None => date("sinceDate")?,
    };
    let until_id = match id("untilId")? {
        Some(u) => Some(u),
        None => date("untilDate")?,
    };
    // Misskey.py sends `withFiles` on every call; only `true` filters.
    let with_files = params.get("withFiles").and_then(Value::as_bool) == Some(true);
    Ok(Request {
        since_id,
        until_id,
        limit,
        with_files,
    })
}

/// A timeline endpoint: `source`'s, through the Fanout Timeline
/// (`Reader::read`), or with none the global timeline, from PostgreSQL alone.
async fn timeline(app: App, source: Option<Source>, body: Bytes) -> Response {
    let req = {
        let ids = app.ids.clone();
        parse_request(&body, |ms| lock(&ids).gen_at(ms))
    };
    let req = match req {
        Ok(r) => r,
        Err(message) => return invalid(&message),
    };
    let mut reader = app.reader.clone();
    let generation = app.slot.as_ref().map(|slot| {
        let (generation, conn) = slot.conn();
        reader.redis = conn;
        generation
    });
    let read = match source {
        Some(source) => reader.read(source, &req).await.map(|s| (s.ids, s.path)),
        None => global_page(&reader, &req)
            .await
            .map(|ids| (ids, Path::DbDirect)),
    };
    let (ids, path) = match read {
        Ok(s) => s,
        Err(e) => {
            // Redis's errors are prefixed so (`timeline.rs`); PostgreSQL's are not.
            if let (Some(slot), Some(generation)) = (&app.slot, generation)
                && e.starts_with("Redis:")
            {
                slot.failed(generation);
            }
            *lock(&app.counts).entry(FAILED).or_default() += 1;
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL_ERROR",
                &e,
                "5d37dbcb-891e-41ca-a3d6-e690c97775ac",
            );
        }
    };
    *lock(&app.counts).entry(path.as_str()).or_default() += 1;
    let notes: Vec<Value> = ids.iter().map(|id| note_json(id, req.with_files)).collect();
    let mut response = json_ok(Value::Array(notes));
    if req.with_files {
        // Which notes have files is not in the truth a recording keeps, so a
        // `withFiles` page is owed nothing (`rundb::scope`'s `none`); the
        // endpoint's own scope marks every other page (`serve --record`).
        response.extensions_mut().insert(rundb::scope::Scope::None);
    }
    response.headers_mut().insert(
        "x-snowleak-ftt-path",
        axum::http::HeaderValue::from_static(path.as_str()),
    );
    response
}

/// The global timeline's page: every note between the request's bounds.
async fn global_page(reader: &Reader, req: &Request) -> Result<Vec<String>, String> {
    let query = super::read::DbQuery {
        until_id: req.until_id.clone(),
        since_id: req.since_id.clone(),
        limit: req.limit,
        with_files: req.with_files,
    };
    super::store::global_page(&reader.pg, &query).await
}

/// A note in the shape Misskey packs it; `createdAt` from the ID, as
/// `NoteEntityService.pack` does (`idService.parse(note.id).date`). A note
/// read `withFiles` has files: one image, named after the note.
fn note_json(id: &str, with_files: bool) -> Value {
    let ms = aidx::parse_ms(id).unwrap_or(0);
    let files = if with_files {
        json!([{"id": format!("{id}f"), "createdAt": since_id::time::rfc3339_ms(ms),
                "name": format!("{id}.png"), "type": "image/png", "md5": "", "size": 0,
                "isSensitive": false, "blurhash": null, "properties": {},
                "url": format!("http://127.0.0.1/files/{id}.png"), "thumbnailUrl": null,
                "comment": null, "folderId": null, "folder": null, "userId": null, "user": null}])
    } else {
        json!([])
    };
    let file_ids: Vec<Value> = files
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["id"].clone())
        .collect();
    json!({
        "id": id,
        "createdAt": since_id::time::rfc3339_ms(ms),
        "userId": "0",
        "user": {"id": "0", "name": "someone", "username": "someone", "host": null,
                 "avatarUrl": null, "emojis": {}, "onlineStatus": "unknown"},
        "text": format!("note {id}"),
        "cw": null,
        "visibility": "public",
        "localOnly": false,
        "renoteCount": 0,
        "repliesCount": 0,
        "reactions": {},
        "emojis": {},
        "fileIds": file_ids,
        "files": files,
        "replyId": null,
        "renoteId": null,
    })
}

/// What each path served, in one line.
pub fn counts_line(counts: &PathCounts) -> String {
    let counts = lock(counts);
    let parts: Vec<String> = [
        Path::Redis.as_str(),
        Path::RedisThenDb.as_str(),
        Path::DbFallback.as_str(),
        Path::EmptyFallback.as_str(),
        Path::DbDirect.as_str(),
        FAILED,
    ]
    .iter()
    .filter_map(|p| counts.get(p).map(|n| format!("{p} {n}")))
    .collect();
    format!(
        "read paths: {}\n",
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_checked_and_dates_become_ids() {
        let gen_at = |ms: i64| Aidx::with_node("read").gen_at(ms);
        let r = parse_request(br#"{"sinceDate": 946684800001, "limit": 5}"#, gen_at).unwrap();
        assert_eq!(r.since_id.as_deref(), Some("00000001read0001"));
        assert_eq!(r.limit, 5);
        assert_eq!(parse_request(b"", |_| String::new()).unwrap().limit, 10);
        assert!(parse_request(br#"{"limit": 101}"#, |_| String::new()).is_err());
        assert!(parse_request(br#"{"sinceId": "nope"}"#, |_| String::new()).is_err());
        assert!(parse_request(b"[1]", |_| String::new()).is_err());
    }
}
