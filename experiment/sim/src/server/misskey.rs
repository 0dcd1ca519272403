//! The simulator in Misskey's dialect [docs/api-facts.md 3]: `POST
//! /api/notes/local-timeline`, `/global-timeline` [3.1-3.2] and `/timeline`
//! (home: the reader's follow set), `POST /api/i` (the reader), parameters in
//! a JSON body; `sinceId` alone returns the oldest notes after it in
//! ascending order, `sinceDate`/`untilDate` become IDs at that time; `POST
//! /api/meta`, which clients post first; errors as `{"error": {"message",
//! "code", "id", "kind"}}`; a spent limit is a 429 with `Retry-After` only.

use super::{
    AppState, READER_ID, READER_NAME, Scope, ServedApi, account_number, host, json_response,
    retry_after, to_json, with_scope, with_served,
};
use crate::model::{Query, SimStatus};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};
use since_id::id::{Id, Layout};
use since_id::time::rfc3339_ms;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The Misskey version the simulator claims (`/api/meta`, NodeInfo).
pub(super) const VERSION: &str = "2025.4.0";

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/notes/local-timeline", post(misskey_local))
        .route("/api/notes/global-timeline", post(misskey_global))
        .route("/api/notes/timeline", post(misskey_home))
        .route("/api/i", post(misskey_i))
        .route("/api/meta", post(misskey_meta))
}

/// The 404 of an unknown path under `/api/`: Misskey's catch-all
/// (misskey-dev/misskey `packages/backend/src/server/api/ApiServerService.ts`).
pub(super) fn not_found() -> Response {
    misskey_error(
        StatusCode::NOT_FOUND,
        "UNKNOWN_API_ENDPOINT",
        "Unknown API endpoint.",
        "2ca3b769-540a-4f08-9dd5-b5a825b6d0f1",
        HeaderMap::new(),
    )
}

/// Every POST handler takes its body, even unread: a body arriving after the
/// answer makes hyper close the keep-alive connection, and the client's next
/// request fails (Misskey.py met it).
///
/// `POST /api/meta`, which clients post first (Misskey.py's constructor
/// does): the instance's name, version and features, in the shape of
/// Misskey's `MetaDetailed` (misskey-hub.net, for-developers/api, `meta`).
async fn misskey_meta(headers: HeaderMap, _body: Bytes) -> Response {
    let host = host(&headers);
    let body = json!({
        "maintainerName": null,
        "maintainerEmail": null,
        "version": VERSION,
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

/// Which notes a timeline serves.
enum Notes {
    Global,
    Local,
    /// `notes/timeline`: the notes of the users the reader follows.
    Home(Arc<BTreeSet<u32>>, Scope),
}

async fn misskey_local(State(app): State<AppState>, body: Bytes) -> Response {
    misskey_timeline(app, body, Notes::Local)
}

async fn misskey_global(State(app): State<AppState>, body: Bytes) -> Response {
    misskey_timeline(app, body, Notes::Global)
}

async fn misskey_home(State(app): State<AppState>, body: Bytes) -> Response {
    let (follows, scope) = app.home();
    misskey_timeline(app, body, Notes::Home(follows, scope))
}

/// `POST /api/i`, which clients post to learn who they are (Misskey's
/// MeDetailed; misskey-hub.net, for-developers/api, `i`): every token is the reader.
async fn misskey_i(State(app): State<AppState>, _body: Bytes) -> Response {
    let layout = app.layout();
    let id = layout.format(Id(u128::from(READER_ID)));
    let body = json!({
        "id": id,
        "name": "Reader",
        "username": READER_NAME,
        "host": null,
        "avatarUrl": null,
        "avatarBlurhash": null,
        "avatarDecorations": [],
        "emojis": {},
        "onlineStatus": "unknown",
        "createdAt": "2024-01-01T00:00:00.000Z",
        "isBot": false,
        "isLocked": false,
        "followersCount": 0,
        "followingCount": 0,
        "notesCount": 0,
    });
    json_response(StatusCode::OK, HeaderMap::new(), to_json(&body))
}

fn misskey_timeline(app: AppState, body: Bytes, notes: Notes) -> Response {
    let allowance = app.limiter.check(ServedApi::Misskey, (app.clock)());
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
    let scope = match (with_files, &notes) {
        (true, _) => Scope::None,
        (false, Notes::Local) => Scope::Local,
        (false, Notes::Global) => Scope::All,
        (false, Notes::Home(_, scope)) => scope.clone(),
    };
    let keep = move |s: &SimStatus| {
        !with_files
            && match &notes {
                Notes::Global => true,
                Notes::Local => s.is_local(),
                Notes::Home(follows, _) => follows.contains(&s.author),
            }
    };
    let (statuses, layout, _) = app.query(&query, keep);
    let notes: Vec<Value> = statuses.iter().map(|s| misskey_note(s, &layout)).collect();
    let response = json_response(StatusCode::OK, HeaderMap::new(), to_json(&notes));
    with_scope(with_served(response, &statuses), scope)
}

/// A packed note (misskey-dev/misskey `packages/backend/src/models/json-schema/note.ts`,
/// `packedNoteSchema`): every property it marks `optional: false`
/// (`reactionAcceptance` nullable), and the optional ones Misskey sends for
/// a plain public note; `uri` only for a remote note (optional, never null).
fn misskey_note(s: &SimStatus, layout: &Layout) -> Value {
    let id = layout.format(s.id);
    let user_id = layout.format(Id(account_number(s) as u128));
    let host = if s.is_local() {
        Value::Null
    } else {
        json!("remote.example")
    };
    let mut note = json!({
        "id": id,
        // Packed from the ID itself (`idService.parse(note.id).date`) [3.2].
        "createdAt": rfc3339_ms(layout.ts_ms(s.id)),
        "userId": user_id,
        // `packedUserLiteSchema` (`json-schema/user.ts`): its required properties.
        "user": {
            "id": user_id,
            "name": format!("User {}", s.author),
            "username": format!("user{}", s.author),
            "host": host,
            "avatarUrl": null,
            "avatarBlurhash": null,
            "avatarDecorations": [],
            "emojis": {},
            "onlineStatus": "unknown",
        },
        "text": format!("Note {id} from the snowleak simulator ({})", s.origin),
        "cw": null,
        "visibility": "public",
        "localOnly": false,
        "renoteCount": 0,
        "repliesCount": 0,
        "reactionAcceptance": null,
        "reactionCount": 0,
        "reactions": {},
        "reactionEmojis": {},
        "emojis": {},
        "fileIds": [],
        "files": [],
        "replyId": null,
        "renoteId": null,
    });
    if !s.is_local() {
        note["uri"] = json!(format!("https://remote.example/notes/{id}"));
    }
    note
}
