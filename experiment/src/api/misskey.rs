//! Misskey's client side [docs/api-facts.md 3]: `POST /api/notes/...-timeline`
//! with `sinceId`, `untilId` and `limit` <= 100 in a JSON body, the token as
//! the body field `i` (from `MISSKEY_TOKEN`), notes as a JSON array, an ID
//! layout of four detected from the IDs' shape [3.3], and `--target
//! misskey:https://HOST` with `--timeline`.

use super::client::{
    MAX_BODY_BYTES, Token, describe_reqwest_error, read_capped, redact, redirect_error,
};
use super::common::{
    Api, Auth, Dialect, HttpRequest, ItemFields, Resolved, TargetOptions, TargetSpec, base_url,
    excerpt, url_in_target,
};
use serde_json::Value;
use since_id::id::Layout;
use since_id::poller::PageRequest;

/// Misskey.
pub const API: Api = Api {
    kind: "misskey",
    specs: &["misskey:https://HOST"],
    token_env: "MISSKEY_TOKEN",
    auth: AUTH,
    max_limit: 100,
    item: ItemFields {
        id: "id",
        integer_id: None,
        created_at: "createdAt",
        author: "/user/username",
    },
    // A spent limit is a 429 with Retry-After only.
    rate_headers: None,
    // `misskey:https://HOST`.
    parse_spec: |spec| {
        Ok(TargetSpec::Misskey {
            base: base_url(spec)?,
        })
    },
};
/// The token travels as the body field `i`.
const AUTH: Auth = Auth::BodyField("i");
/// The timeline polled when `--timeline` is not given.
pub const DEFAULT_ENDPOINT: &str = "local-timeline";

/// The request for a page of `endpoint`.
pub fn build(endpoint: &str, layout: &Layout, req: &PageRequest, limit: usize) -> HttpRequest {
    let mut body = serde_json::Map::new();
    body.insert("limit".into(), Value::from(limit));
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

/// Whether the timeline holds local notes only.
pub fn local_only(endpoint: &str) -> bool {
    endpoint == "local-timeline"
}

/// The first request when the layout is unknown: the newest notes, no cursors.
pub fn probe_request(endpoint: &str) -> HttpRequest {
    HttpRequest {
        post: true,
        path: format!("/api/notes/{endpoint}"),
        query: vec![],
        json_body: Some(serde_json::json!({"limit": 10})),
    }
}

/// The probe as `--dry-run` prints it, token redacted.
pub fn describe_probe(base: &str, endpoint: &str, token: bool) -> String {
    let http = probe_request(endpoint);
    let mut body = http.json_body.clone().unwrap_or_default();
    if let (true, Value::Object(map), Auth::BodyField(field)) = (token, &mut body, AUTH) {
        map.insert(field.into(), "<redacted>".into());
    }
    format!(
        "POST {}\n  body: {body}",
        super::common::full_url(base, &http)
    )
}

/// Which Misskey layout IDs like these are, from their shape alone [docs/api-facts.md 3.3]:
/// 10 base36 characters = `aid`, 16 = `aidx`, 24 hex digits starting 8-f =
/// `meid` (0-7 would be `objectid`, unsupported), 26 Crockford base32 = `ulid`.
/// Every ID must agree; anything else is an error naming `--layout`.
pub fn detect_misskey_layout<S: AsRef<str>>(ids: &[S]) -> Result<Layout, String> {
    fn shape(id: &str) -> Option<&'static str> {
        let base36 = |c: char| c.is_ascii_digit() || c.is_ascii_lowercase();
        let hex = |c: char| c.is_ascii_hexdigit() && !c.is_ascii_uppercase();
        let crockford = |c: char| {
            let c = c.to_ascii_uppercase();
            c.is_ascii_digit() || (c.is_ascii_uppercase() && !"ILOU".contains(c))
        };
        match id.len() {
            10 if id.chars().all(base36) => Some("misskey-aid"),
            16 if id.chars().all(base36) => Some("misskey-aidx"),
            24 if id.chars().all(hex) && id.starts_with(|c: char| "89abcdef".contains(c)) => {
                Some("misskey-meid")
            }
            26 if id.chars().all(crockford)
                && id.starts_with(|c: char| ('0'..='7').contains(&c)) =>
            {
                Some("ulid")
            }
            _ => None,
        }
    }
    let mut found: Option<&'static str> = None;
    for id in ids {
        let id = id.as_ref();
        let Some(name) = shape(id) else {
            return Err(format!(
                "cannot tell the ID layout of '{id}' (aid, aidx, meid and ulid are known): pass --layout"
            ));
        };
        if found.is_some_and(|f| f != name) {
            return Err(format!(
                "IDs of two layouts ({} and {name}): pass --layout",
                found.unwrap_or_default()
            ));
        }
        found = Some(name);
    }
    let name =
        found.ok_or("no IDs to detect the layout from (the timeline is empty): pass --layout")?;
    name.parse::<Layout>().map_err(|e| e.to_string())
}

/// Sends `probe` (a Misskey timeline request without cursors) and detects the
/// ID layout from the notes it returns ([`detect_misskey_layout`]).
pub async fn probe_layout(
    client: &reqwest::Client,
    base: &str,
    probe: &HttpRequest,
    token: Option<&Token>,
) -> Result<Layout, String> {
    let mut body = probe
        .json_body
        .clone()
        .unwrap_or(Value::Object(Default::default()));
    if let (Some(token), Value::Object(map)) = (token, &mut body) {
        map.insert("i".into(), Value::from(token.secret()));
    }
    let url = format!("{}{}", base.trim_end_matches('/'), probe.path);
    let mut response = client
        .post(&url)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("layout probe: {}", describe_reqwest_error(&e)))?;
    let status = response.status().as_u16();
    if (300..400).contains(&status) {
        let error = redirect_error(status, response.headers());
        return Err(redact(token, format!("layout probe: {error}")));
    }
    let bytes = read_capped(&mut response, MAX_BODY_BYTES)
        .await
        .map_err(|e| format!("layout probe: {e}"))?;
    if !(200..300).contains(&status) {
        let error = format!("layout probe: HTTP {status}: {}", excerpt(&bytes));
        return Err(redact(token, error));
    }
    let notes: Vec<Value> = serde_json::from_slice(&bytes).map_err(|_| {
        redact(
            token,
            format!("layout probe: not a JSON array: {}", excerpt(&bytes)),
        )
    })?;
    let ids: Vec<&str> = notes
        .iter()
        .filter_map(|n| n.get("id").and_then(Value::as_str))
        .collect();
    detect_misskey_layout(&ids).map_err(|e| redact(token, e))
}

/// The dialect for `--target misskey:HOST` and its options; the layout stays
/// unknown (detected from the first notes) unless `--layout` gives it.
pub fn resolve(
    host: &str,
    opts: &TargetOptions,
    layout: Option<Layout>,
) -> Result<Resolved, String> {
    let allowed = ["local", "global", "hybrid", "home"];
    if let Some(t) = &opts.timeline
        && !allowed.contains(&t.as_str())
    {
        return Err(format!(
            "bad --timeline '{t}' for misskey: expected one of {}",
            allowed.join(", ")
        ));
    }
    url_in_target(opts, "misskey")?;
    let endpoint = match opts.timeline.as_deref().unwrap_or("local") {
        "global" => "global-timeline",
        "hybrid" => "hybrid-timeline",
        "home" => "timeline",
        _ => DEFAULT_ENDPOINT,
    };
    Ok(Resolved {
        base: host.to_string(),
        dialect: Dialect::Misskey {
            endpoint: endpoint.into(),
        },
        layout,
    })
}

#[cfg(test)]
mod tests {
    use super::detect_misskey_layout;
    use crate::api::Dialect;
    use since_id::id::{Id, Layout};
    use since_id::poller::PageRequest;

    #[test]
    fn misskey_layouts_are_detected_from_the_id_shape() {
        let name = |ids: &[&str]| detect_misskey_layout(ids).map(|l| l.name().to_string());
        assert_eq!(name(&["9v6hsao0ab"]), Ok("misskey-aid".into()));
        assert_eq!(
            name(&["9v6hsao08sdi0003", "9v6hsao08sdi0004"]),
            Ok("misskey-aidx".into())
        );
        assert_eq!(
            name(&["8190a2b3c4d5e6f708192a3b"]),
            Ok("misskey-meid".into())
        );
        assert_eq!(name(&["01ARZ3NDEKTSV4RRFFQ69G5FAV"]), Ok("ulid".into()));
        for bad in [
            &["0190a2b3c4d5e6f708192a3b"][..], // objectid: unsupported
            &["g190a2b3c4d5e6f708192a3b"],     // meidg: unsupported
            &["9v6hsao0ab", "9v6hsao08sdi0003"],
            &["short"],
            &[],
        ] {
            let e = name(bad).unwrap_err();
            assert!(e.contains("--layout"), "{e}");
        }
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
}
