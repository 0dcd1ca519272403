//! Clients the harness did not write, as `experiment serve --record` sees
//! them: each timeline request a client sent and the page it was served
//! becomes a request of that client's poller in the run database, placed in
//! a cycle and a page by [`since_id::foreign`], so that `analyze` judges the
//! client by the same definitions as the harness's own pollers.
//!
//! Who is a client: the credential it sends (the `Authorization` header,
//! whatever its scheme, or Misskey's `i` in the body), named by `--client
//! NAME=TOKEN_ENV_VAR` or else by a short hash of it: the credential itself is
//! never stored. Without a credential, its `User-Agent`.
//!
//! Pure: the server's middleware (`cmd/serve.rs`) hands each exchange in and
//! sends what comes out to the recorder.

use crate::api::{Dialect, XEndpoint};
use crate::record::{PollerRow, RequestRecord, StatusRecord};
use rundb::scope::Scope;
use serde_json::Value;
use since_id::foreign::{Cycles, ForeignRequest};
use since_id::id::{Id, Layout};
use std::collections::{HashMap, HashSet};

/// The `pollers.policy` of a recorded client: not one of the harness's policies.
pub const CLIENT_POLICY: &str = "client";

/// The most clients one recording tells apart; later ones share the last
/// poller (`other clients`), so a server hammered by many credentials keeps
/// bounded state. `analyze` reads at most 64 pollers.
pub const MAX_CLIENTS: usize = 63;

/// One exchange as the server saw it.
#[derive(Clone, Debug, Default)]
pub struct Exchange {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    /// The JSON body (Misskey's parameters), if any.
    pub body: Option<Value>,
    pub authorization: Option<String>,
    pub user_agent: Option<String>,
    pub status: u16,
    pub response: Vec<u8>,
    /// The statuses the endpoint serves, as the server marked its response
    /// (`leaky_timeline::server::with_scope`); unmarked, every status.
    pub scope: Option<Scope>,
    pub sent_at_ms: i64,
    pub received_at_ms: i64,
}

/// What to send to the recorder for one exchange.
#[derive(Debug)]
pub enum Recorded {
    /// A client seen for the first time: its poller row (its index is the
    /// number of clients before it).
    NewClient(PollerRow),
    /// One request of a client, with what it asked for.
    Request(Box<RequestRecord>, rundb::ClientRequestRow),
}

/// The clients of one recording.
pub struct ClientBook {
    layout: Layout,
    /// Credential -> name, from `--client NAME=TOKEN_ENV_VAR`.
    names: HashMap<String, String>,
    clients: HashMap<String, Client>,
    /// Statuses already served to some client: their `statuses` row is
    /// written. Cleared when it reaches [`MAX_REMEMBERED`]: a status served
    /// again after that is written again and ignored by the database
    /// (`rundb::write::insert_statuses`), so forgetting costs a write, never a row.
    served: HashSet<Id>,
}

/// The most served IDs the book remembers (a few MiB).
pub const MAX_REMEMBERED: usize = 1 << 18;

struct Client {
    index: usize,
    name: String,
    cycles: Cycles,
    /// The oldest ID of the last page: where an opaque page token continues.
    last_oldest: Option<Id>,
}

impl ClientBook {
    /// A book for a timeline of `layout`, naming the clients whose credential
    /// is a key of `names`.
    /// The layout the book reads IDs in.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn new(layout: Layout, names: HashMap<String, String>) -> ClientBook {
        ClientBook {
            layout,
            names,
            clients: HashMap::new(),
            served: HashSet::new(),
        }
    }

    /// What to record of one exchange: nothing for a request that is not a
    /// timeline page; else the client's poller if new, and the request.
    #[cfg(test)]
    pub fn observe(&mut self, ex: &Exchange) -> Vec<Recorded> {
        let served = served(&self.layout, ex);
        self.observe_served(ex, served)
    }

    /// [`ClientBook::observe`] with the items already read from the
    /// response by [`served`]: the server parses pages in parallel, and
    /// only the placing, which needs the book, is done one at a time.
    pub fn observe_served(&mut self, ex: &Exchange, served: Vec<since_id::Item>) -> Vec<Recorded> {
        let Some(dialect) = timeline_of(&ex.method, &ex.path, &ex.query) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let credential = credential(ex);
        let key = match (&credential, &ex.user_agent) {
            (Some(c), _) => format!("credential:{c}"),
            (None, Some(ua)) => format!("user-agent:{ua}"),
            (None, None) => "anonymous".to_string(),
        };
        let full = self.clients.len() >= MAX_CLIENTS && !self.clients.contains_key(&key);
        let key = if full { "other".to_string() } else { key };
        if !self.clients.contains_key(&key) {
            let name = match (&credential, &ex.user_agent) {
                _ if key == "other" => "other clients".to_string(),
                (Some(c), _) => self
                    .names
                    .get(c)
                    .cloned()
                    .unwrap_or_else(|| format!("client {}", short_hash(c))),
                (None, Some(ua)) => format!("user-agent {}", printable(ua, 60)),
                (None, None) => "anonymous".to_string(),
            };
            let index = self.clients.len();
            out.push(Recorded::NewClient(PollerRow {
                name: name.clone(),
                policy: CLIENT_POLICY.into(),
                ..PollerRow::default()
            }));
            self.clients.insert(
                key.clone(),
                Client {
                    index,
                    name,
                    cycles: Cycles::new(),
                    last_oldest: None,
                },
            );
        }
        let client = self.clients.get_mut(&key).expect("inserted above");
        let asked = Asked::read(&dialect, ex);
        let parse_id =
            |text: &Option<String>| text.as_deref().and_then(|t| self.layout.parse(t).ok());
        let mut upper = parse_id(&asked.upper);
        if asked.page_token && upper.is_none() {
            // An opaque token continues below the last page.
            upper = client.last_oldest;
        }
        let foreign = ForeignRequest {
            lower: parse_id(&asked.lower),
            upper,
            forward: asked.forward,
            limit: asked.limit,
            served: served.iter().map(|i| i.id).collect(),
        };
        let placed = client.cycles.place(&foreign);
        client.last_oldest = foreign.served.iter().copied().min();
        let error = (ex.status != 200).then(|| format!("HTTP {}", ex.status));
        let request = rundb::RequestRow {
            cycle: placed.cycle as i64,
            page: placed.page as i64,
            sent_at_ms: ex.sent_at_ms,
            received_at_ms: ex.received_at_ms,
            since_id: placed.since.map(|id| self.layout.format(id)),
            since_key: placed.since.map(|id| id.sort_key()),
            before_id: placed.before.map(|id| self.layout.format(id)),
            before_key: placed.before.map(|id| id.sort_key()),
            page_limit: asked.limit as i64,
            http_status: Some(i64::from(ex.status)),
            error,
            bytes: Some(ex.response.len() as i64),
            new_items: served.len() as i64,
            overflow: false,
            ..Default::default()
        };
        if self.served.len() + served.len() > MAX_REMEMBERED {
            self.served.clear();
        }
        let items = served
            .into_iter()
            .map(|item| StatusRecord {
                first_sighting: self.served.insert(item.id),
                status: rundb::StatusRow {
                    id_key: item.id.sort_key(),
                    id_time_ms: self.layout.ts_ms(item.id),
                    id: item.id_text,
                    created_at: item.created_at,
                    author: item.author,
                },
            })
            .collect();
        let row = RequestRecord {
            poller: client.index,
            request,
            items,
        };
        let asked_row = rundb::ClientRequestRow {
            client: client.name.clone(),
            method: ex.method.clone(),
            endpoint: ex.path.clone(),
            params: asked.params.to_string(),
            // A failed request served nothing; an unmarked success, everything.
            scope: match (&ex.scope, ex.status) {
                (_, status) if status != 200 => Scope::None,
                (Some(scope), _) => scope.clone(),
                (None, _) => Scope::All,
            }
            .to_string(),
            served: None, // the recorder encodes the request's items
        };
        out.push(Recorded::Request(Box::new(row), asked_row));
        out
    }
}

/// The items a timeline response served (none for a failed request, or
/// any other request): pure, and done outside the book's lock.
pub fn served(layout: &Layout, ex: &Exchange) -> Vec<since_id::Item> {
    match timeline_of(&ex.method, &ex.path, &ex.query) {
        Some(dialect) if ex.status == 200 => {
            dialect.parse(layout, &ex.response).unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// The timeline a request reads, as the client side names it; `None` for
/// any other request (login, instance, user look-ups).
pub fn timeline_of(method: &str, path: &str, query: &[(String, String)]) -> Option<Dialect> {
    let flag = |name: &str| query.iter().any(|(k, v)| k == name && v == "true");
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        ("GET", ["", "api", "v1", "timelines", "public"]) => Some(Dialect::Mastodon {
            timeline: if flag("local") { "local" } else { "public" }.into(),
        }),
        ("GET", ["", "api", "v1", "timelines", "local"]) => Some(Dialect::Mastodon {
            timeline: "local".into(),
        }),
        ("GET", ["", "api", "v1", "timelines", "home"]) => Some(Dialect::Mastodon {
            timeline: "home".into(),
        }),
        ("GET", ["", "api", "v1", "timelines", "tag", tag]) => Some(Dialect::Mastodon {
            timeline: format!("tag:{tag}"),
        }),
        ("POST", ["", "api", "notes", endpoint]) if endpoint.ends_with("timeline") => {
            Some(Dialect::Misskey {
                endpoint: (*endpoint).to_string(),
            })
        }
        ("GET", ["", "1.1", "lists", "statuses.json"]) => Some(Dialect::TwitterV1 {
            list_id: param(query, "list_id").unwrap_or("1").to_string(),
        }),
        // The home timeline's tweets are a list's, read the same way.
        ("GET", ["", "1.1", "statuses", "home_timeline.json"]) => Some(Dialect::TwitterV1 {
            list_id: "home".into(),
        }),
        // A home timeline's page is a user timeline's, read the same way.
        ("GET", ["", "2", "users", id, "tweets"])
        | ("GET", ["", "2", "users", id, "timelines", "reverse_chronological"]) => {
            Some(Dialect::X {
                endpoint: XEndpoint::UserTweets {
                    user_id: (*id).to_string(),
                },
            })
        }
        ("GET", ["", "2", "tweets", "search", "recent"]) => Some(Dialect::X {
            endpoint: XEndpoint::SearchRecent {
                query: param(query, "query").unwrap_or_default().to_string(),
            },
        }),
        ("GET", ["", "api", "v10", "channels", id, "messages"]) => Some(Dialect::Discord {
            channel_id: (*id).to_string(),
        }),
        _ => None,
    }
}

fn param<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A client's cursor and page parameters, as sent.
#[derive(Debug, Default)]
struct Asked {
    lower: Option<String>,
    upper: Option<String>,
    forward: bool,
    /// An opaque page token (X) was sent.
    page_token: bool,
    limit: usize,
    /// Every parameter read, as sent: what `client_requests.params` stores.
    params: Value,
}

impl Asked {
    fn read(dialect: &Dialect, ex: &Exchange) -> Asked {
        let q = |name: &str| param(&ex.query, name).map(str::to_string);
        let mut params = serde_json::Map::new();
        let mut keep = |name: &str, value: &Option<String>| {
            if let Some(v) = value {
                params.insert(name.to_string(), Value::String(v.clone()));
            }
        };
        let number = |text: Option<String>, default: usize| {
            text.and_then(|t| t.trim().parse::<usize>().ok())
                .unwrap_or(default)
        };
        let asked = match dialect {
            Dialect::Mastodon { .. } => {
                let (since, min, max, limit) =
                    (q("since_id"), q("min_id"), q("max_id"), q("limit"));
                for (n, v) in [
                    ("since_id", &since),
                    ("min_id", &min),
                    ("max_id", &max),
                    ("limit", &limit),
                ] {
                    keep(n, v);
                }
                Asked {
                    forward: min.is_some(),
                    lower: min.or(since),
                    upper: max,
                    limit: number(limit, 20),
                    ..Asked::default()
                }
            }
            Dialect::Misskey { .. } => {
                let body = ex.body.clone().unwrap_or(Value::Null);
                let text = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_string);
                let (since, until) = (text("sinceId"), text("untilId"));
                let limit = body
                    .get("limit")
                    .and_then(Value::as_u64)
                    .map(|n| n.to_string());
                for (n, v) in [("sinceId", &since), ("untilId", &until), ("limit", &limit)] {
                    keep(n, v);
                }
                for n in ["sinceDate", "untilDate"] {
                    keep(n, &body.get(n).map(|v| v.to_string()));
                }
                Asked {
                    // `sinceId` alone is answered oldest first (ascending).
                    forward: since.is_some() && until.is_none(),
                    lower: since,
                    upper: until,
                    limit: number(limit, 10),
                    ..Asked::default()
                }
            }
            Dialect::TwitterV1 { .. } => {
                let (since, max, count) = (q("since_id"), q("max_id"), q("count"));
                for (n, v) in [("since_id", &since), ("max_id", &max), ("count", &count)] {
                    keep(n, v);
                }
                // `max_id` is inclusive: the exclusive bound is one above it.
                let upper = max
                    .and_then(|m| m.parse::<u128>().ok())
                    .map(|m| (m + 1).to_string());
                Asked {
                    lower: since,
                    upper,
                    limit: number(count, 20),
                    ..Asked::default()
                }
            }
            Dialect::X { .. } => {
                let (since, until, max) = (q("since_id"), q("until_id"), q("max_results"));
                let token = q("pagination_token").or(q("next_token"));
                for (n, v) in [
                    ("since_id", &since),
                    ("until_id", &until),
                    ("max_results", &max),
                    ("pagination_token", &token),
                    ("start_time", &q("start_time")),
                    ("end_time", &q("end_time")),
                ] {
                    keep(n, v);
                }
                Asked {
                    lower: since,
                    upper: until,
                    page_token: token.is_some(),
                    limit: number(max, 10),
                    ..Asked::default()
                }
            }
            Dialect::Discord { .. } => {
                let (after, before, limit) = (q("after"), q("before"), q("limit"));
                for (n, v) in [("after", &after), ("before", &before), ("limit", &limit)] {
                    keep(n, v);
                }
                Asked {
                    forward: after.is_some(),
                    lower: after,
                    upper: before,
                    limit: number(limit, 50),
                    ..Asked::default()
                }
            }
        };
        Asked {
            params: Value::Object(params),
            ..asked
        }
    }
}

/// The credential a request carries: the `Authorization` header's token
/// (after its scheme, if it has one), or Misskey's `i`.
fn credential(ex: &Exchange) -> Option<String> {
    if let Some(auth) = ex.authorization.as_deref() {
        let token = auth.split_once(' ').map_or(auth, |(_, t)| t).trim();
        if !token.is_empty() {
            return Some(token.to_string());
        }
    }
    ex.body
        .as_ref()
        .and_then(|b| b.get("i"))
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty())
        .map(str::to_string)
}

/// 8 hex digits of FNV-1a: tells credentials apart, and a short hash of a
/// token is all the database ever holds of it.
fn short_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", h >> 32)
}

/// `text` with control characters dropped, at most `max` characters.
fn printable(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mastodon_page(ids: &[u64]) -> Vec<u8> {
        let statuses: Vec<Value> = ids
            .iter()
            .map(|id| {
                serde_json::json!({
                    "id": id.to_string(), "created_at": "2026-01-01T00:00:00.000Z",
                    "account": {"id": "1", "acct": "a"}
                })
            })
            .collect();
        serde_json::to_vec(&statuses).unwrap()
    }

    fn get(path: &str, query: &[(&str, &str)], auth: Option<&str>, served: &[u64]) -> Exchange {
        Exchange {
            method: "GET".into(),
            path: path.into(),
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            authorization: auth.map(str::to_string),
            user_agent: Some("Mastodon.py".into()),
            status: 200,
            response: mastodon_page(served),
            ..Exchange::default()
        }
    }

    fn requests(out: &[Recorded]) -> Vec<(&RequestRecord, &rundb::ClientRequestRow)> {
        out.iter()
            .filter_map(|r| match r {
                Recorded::Request(row, asked) => Some((row.as_ref(), asked)),
                Recorded::NewClient(_) => None,
            })
            .collect()
    }

    #[test]
    fn two_credentials_are_two_clients_and_the_token_is_never_kept() {
        let mut names = HashMap::new();
        names.insert("s3cret-token".to_string(), "my bot".to_string());
        let mut book = ClientBook::new("mastodon".parse().unwrap(), names);
        let path = "/api/v1/timelines/public";
        let first = book.observe(&get(path, &[], Some("Bearer s3cret-token"), &[300, 200]));
        let other = book.observe(&get(path, &[], Some("Bearer another-one"), &[300]));
        let again = book.observe(&get(
            path,
            &[("since_id", "300")],
            Some("Bearer s3cret-token"),
            &[],
        ));
        let Recorded::NewClient(named) = &first[0] else {
            panic!("a new client first")
        };
        assert_eq!(named.name, "my bot");
        assert_eq!(named.policy, CLIENT_POLICY);
        let Recorded::NewClient(hashed) = &other[0] else {
            panic!("a second client")
        };
        assert!(hashed.name.starts_with("client "), "{}", hashed.name);
        assert!(!hashed.name.contains("another-one"));
        assert_eq!(again.len(), 1, "a known client adds no poller");
        let (row, asked) = requests(&again)[0];
        assert_eq!(row.poller, 0);
        assert_eq!((row.request.cycle, row.request.page), (1, 0));
        assert_eq!(row.request.since_id.as_deref(), Some("300"));
        assert_eq!(asked.params, r#"{"since_id":"300"}"#);
        let everything = format!("{first:?}{other:?}{again:?}");
        assert!(!everything.contains("s3cret-token") && !everything.contains("another-one"));
    }

    #[test]
    fn served_ids_are_the_observations_and_paging_down_continues_the_cycle() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        let path = "/api/v1/timelines/public";
        let page0 = book.observe(&get(path, &[("limit", "2")], None, &[300, 200]));
        let page1 = book.observe(&get(
            path,
            &[("limit", "2"), ("max_id", "200")],
            None,
            &[100],
        ));
        let (row0, _) = requests(&page0)[0];
        let ids: Vec<&str> = row0.items.iter().map(|s| s.status.id.as_str()).collect();
        assert_eq!(ids, ["300", "200"]);
        let (row1, _) = requests(&page1)[0];
        assert_eq!((row1.request.cycle, row1.request.page), (0, 1));
        assert_eq!(row1.request.before_id.as_deref(), Some("200"));
        let Recorded::NewClient(ua) = &page0[0] else {
            panic!()
        };
        assert_eq!(ua.name, "user-agent Mastodon.py");
    }

    #[test]
    fn other_requests_are_not_timelines_and_errors_are_failed_requests() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        assert!(
            book.observe(&get("/api/v1/accounts/verify_credentials", &[], None, &[]))
                .is_empty()
        );
        let mut bad = get("/api/v1/timelines/public", &[("limit", "x")], None, &[]);
        bad.status = 422;
        bad.response = b"{\"error\":\"bad\"}".to_vec();
        let out = book.observe(&bad);
        let (row, _) = requests(&out)[0];
        assert_eq!(row.request.error.as_deref(), Some("HTTP 422"));
        assert!(row.items.is_empty());
    }

    #[test]
    fn misskey_credentials_come_from_the_body_and_since_id_alone_pages_forward() {
        let ex = Exchange {
            method: "POST".into(),
            path: "/api/notes/local-timeline".into(),
            body: Some(serde_json::json!({"i": "tok", "sinceId": "9f6m2hqa00", "limit": 5})),
            status: 200,
            response: b"[]".to_vec(),
            ..Exchange::default()
        };
        assert_eq!(credential(&ex).as_deref(), Some("tok"));
        let asked = Asked::read(&timeline_of("POST", &ex.path, &[]).unwrap(), &ex);
        assert!(asked.forward);
        assert_eq!(asked.limit, 5);
        assert_eq!(asked.lower.as_deref(), Some("9f6m2hqa00"));
    }

    #[test]
    fn clients_beyond_the_bound_share_one_poller() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        let mut new = 0;
        for n in 0..(MAX_CLIENTS + 10) {
            let auth = format!("Bearer t{n}");
            let out = book.observe(&get("/api/v1/timelines/public", &[], Some(&auth), &[]));
            new += out
                .iter()
                .filter(|r| matches!(r, Recorded::NewClient(_)))
                .count();
        }
        assert_eq!(
            new,
            MAX_CLIENTS + 1,
            "63 named, then one for all the others"
        );
    }
}
