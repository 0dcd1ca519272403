//! The APIs polled, each in one file with everything this tool knows of its
//! client side (its requests and paging rules, its JSON, its rate-limit
//! headers, its token and auth, its `--target` spec): [`mastodon`],
//! [`misskey`], [`twitter`] (v1.1), [`x`] (v2) and [`discord`]. Their server
//! side, the simulator's, is `experiment/sim/src/server/` with the same file names.
//!
//! This file is the dispatch over them ([`Dialect`]) and the one list of them;
//! what they share is [`common`], a leaf they import.
//! Dialects are pure (build a request description, parse bytes); the one
//! async function [`HttpTarget::fetch`] (`client.rs`) is the thin shell that
//! sends it with reqwest. The embedded simulator is reached through exactly
//! this client in real time, the same way a real API is. [`Pacer`] spends a
//! run's rate-limit budget, [`spec`] parses `--target`.

use serde_json::Value;
use since_id::id::{Id, Layout};
use since_id::poller::{Item, PageRequest};

mod client;
pub mod common;
pub mod discord;
mod entries;
#[cfg(test)]
mod loopback_tests;
pub mod mastodon;
pub mod misskey;
mod pace;
pub mod spec;
pub mod twitter;
pub mod x;

pub use client::{
    HttpTarget, MAX_BODY_BYTES, MAX_SERVER_WAIT_MS, Token, USER_AGENT, http_client, retry_after_ms,
};
pub use common::{
    Api, Auth, Dialect, HttpRequest, ItemFields, RateHeaders, XEndpoint, excerpt, full_url,
};
pub use misskey::{detect_misskey_layout, probe_layout};
pub use pace::{Pacer, RateInfo, rate_info};

/// The one list of the APIs: the order `--help` and errors list them, and
/// the order [`rate_info`] tries their headers (those that share header names,
/// Mastodon's and Discord's, read them the same way).
const APIS: [&Api; 5] = [
    &mastodon::API,
    &x::API,
    &twitter::API,
    &misskey::API,
    &discord::API,
];

impl Api {
    /// The one list of the APIs (`APIS`). An associated function, so that
    /// the files that need the list (`spec.rs`, `pace.rs`) reach it through
    /// the shared type alone and import nothing back from this dispatcher.
    pub fn all() -> [&'static Api; 5] {
        APIS
    }
}

impl Dialect {
    /// The API this dialect speaks.
    pub fn api(&self) -> &'static Api {
        match self {
            Dialect::TwitterV1 { .. } => &twitter::API,
            Dialect::Mastodon { .. } => &mastodon::API,
            Dialect::Misskey { .. } => &misskey::API,
            Dialect::X { .. } => &x::API,
            Dialect::Discord { .. } => &discord::API,
        }
    }

    /// The largest page the API serves.
    pub fn max_limit(&self) -> usize {
        self.api().max_limit
    }

    /// The smallest page the API accepts.
    pub fn min_limit(&self) -> usize {
        match self {
            Dialect::X { endpoint } => x::min_limit(endpoint),
            _ => 1,
        }
    }

    /// The page size actually asked for, for a poller that wants `limit`.
    pub fn page_limit(&self, limit: usize) -> usize {
        limit.clamp(self.min_limit(), self.max_limit())
    }

    /// How the token travels.
    pub fn auth(&self) -> Auth {
        self.api().auth
    }

    /// The environment variable the token is read from.
    pub fn token_env(&self) -> &'static str {
        self.api().token_env
    }

    /// The timeline polled, as `runs.config` records it (for APIs with several).
    pub fn timeline(&self) -> Option<String> {
        match self {
            Dialect::Mastodon { timeline } => Some(timeline.clone()),
            Dialect::Misskey { endpoint } => Some(endpoint.clone()),
            _ => None,
        }
    }

    /// Whether the timeline holds local statuses only.
    pub fn local_only(&self) -> bool {
        match self {
            Dialect::Mastodon { timeline } => mastodon::local_only(timeline),
            Dialect::Misskey { endpoint } => misskey::local_only(endpoint),
            _ => false,
        }
    }

    pub fn build(&self, layout: &Layout, req: &PageRequest) -> HttpRequest {
        let limit = self.page_limit(req.limit);
        match self {
            Dialect::TwitterV1 { list_id } => twitter::build(list_id, layout, req, limit),
            Dialect::Mastodon { timeline } => mastodon::build(timeline, layout, req, limit),
            Dialect::Misskey { endpoint } => misskey::build(endpoint, layout, req, limit),
            Dialect::X { endpoint } => x::build(endpoint, layout, req, limit),
            Dialect::Discord { channel_id } => discord::build(channel_id, layout, req, limit),
        }
    }

    /// Reads the response to `req` into items, in the order the API gave them,
    /// keeping only items inside the request's window (`since < id < before`)
    /// for dialects that cannot express it (Discord).
    pub fn parse_page(
        &self,
        layout: &Layout,
        req: &PageRequest,
        body: &[u8],
    ) -> Result<Vec<Item>, String> {
        // More items than asked for is a protocol violation. The page is refused
        // whole (a failed request, cursor unchanged) rather than cut to the limit:
        // which `limit` items a lying server meant is unknowable, and keeping any
        // of them would move the cursor on a page we cannot trust. An item
        // repeated within a page is counted once (a repeat is a duplicate, not a
        // violation). The raw count comes first, from a pass that allocates
        // nothing per item, so a page far over the limit never becomes a tree
        // of values.
        let asked = self.page_limit(req.limit);
        let count = self.count_entries(body);
        let too_many = |n: usize| {
            format!("response has {n} items, more than the page limit of {asked} asked for")
        };
        if count > 2 * asked {
            return Err(too_many(count));
        }
        let mut items = self.parse(layout, body)?;
        if count > asked {
            let distinct = items
                .iter()
                .map(|i| i.id)
                .collect::<std::collections::HashSet<_>>();
            if distinct.len() > asked {
                return Err(too_many(distinct.len()));
            }
        }
        if let Dialect::Discord { .. } = self {
            items.retain(|item| discord::in_window(req, item.id));
        }
        Ok(items)
    }

    /// How many entries the body's timeline array has (0 for anything else: the
    /// full parse reports what is wrong with it). Entries are skipped, not kept.
    fn count_entries(&self, body: &[u8]) -> usize {
        match self {
            Dialect::X { .. } => x::count_entries(body),
            _ => serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(body)
                .map_or(0, |entries| entries.len()),
        }
    }

    /// Reads a response body into items, in the order the API gave them.
    pub fn parse(&self, layout: &Layout, body: &[u8]) -> Result<Vec<Item>, String> {
        let fields = self.api().item;
        let numbered = |i: usize, e: String| format!("item {i}: {e}");
        if let Dialect::X { .. } = self {
            let value: Value =
                serde_json::from_slice(body).map_err(|e| format!("response is not JSON: {e}"))?;
            let entries = x::entries(value, body)?;
            return entries
                .iter()
                .enumerate()
                .map(|(i, entry)| parse_item(&fields, layout, entry).map_err(|e| numbered(i, e)))
                .collect();
        }
        let entries = entries::read(&fields, body).map_err(|e| {
            match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                Err(e) => format!("response is not JSON: {e}"),
                Ok(_) if !body.trim_ascii_start().starts_with(b"[") => {
                    format!("response is not a JSON array: {}", excerpt(body))
                }
                Ok(_) => format!("response is not a JSON array of statuses: {e}"),
            }
        })?;
        entries
            .iter()
            .enumerate()
            .map(|(i, entry)| parse_item(&fields, layout, entry).map_err(|e| numbered(i, e)))
            .collect()
    }

    /// The request as a human reads it, token redacted: for `--dry-run`.
    pub fn describe(&self, base: &str, layout: &Layout, req: &PageRequest, token: bool) -> String {
        let http = self.build(layout, req);
        let method = if http.post { "POST" } else { "GET" };
        let mut out = format!("{method} {}", full_url(base, &http));
        let auth = self.auth();
        if let (true, Auth::Header { scheme }) = (token, auth) {
            out.push_str(&format!("\n  Authorization: {scheme} <redacted>"));
        }
        if let Some(mut body) = http.json_body {
            if let (true, Value::Object(map), Auth::BodyField(field)) = (token, &mut body, auth) {
                map.insert(field.into(), Value::from("<redacted>"));
            }
            out.push_str(&format!("\n  body: {body}"));
        }
        out
    }

    /// The request that shows the IDs when the layout is not known (a
    /// Misskey timeline without `--layout`), and how `--dry-run` prints it.
    pub fn describe_layout_probe(&self, base: &str, token: bool) -> String {
        misskey::describe_probe(base, self.probe_endpoint(), token)
    }

    /// Sends the layout probe and detects the layout from the IDs it returns.
    pub async fn detect_layout(
        &self,
        client: &reqwest::Client,
        base: &str,
        token: Option<&Token>,
    ) -> Result<Layout, String> {
        let probe = misskey::probe_request(self.probe_endpoint());
        probe_layout(client, base, &probe, token).await
    }

    /// Only Misskey's layout is detected; its endpoint is probed.
    fn probe_endpoint(&self) -> &str {
        match self {
            Dialect::Misskey { endpoint } => endpoint,
            _ => misskey::DEFAULT_ENDPOINT,
        }
    }
}

/// An entry of a page, as [`parse_item`] reads it: a whole `Value` (X's
/// `data`), or the fields [`entries::read`] kept.
trait EntryFields {
    fn get(&self, name: &str) -> Option<&Value>;
    fn pointer(&self, pointer: &str) -> Option<&Value>;
}

impl EntryFields for Value {
    fn get(&self, name: &str) -> Option<&Value> {
        Value::get(self, name)
    }

    fn pointer(&self, pointer: &str) -> Option<&Value> {
        Value::pointer(self, pointer)
    }
}

impl EntryFields for entries::Entry {
    fn get(&self, name: &str) -> Option<&Value> {
        entries::Entry::get(self, name)
    }

    fn pointer(&self, pointer: &str) -> Option<&Value> {
        entries::Entry::pointer(self, pointer)
    }
}

fn parse_item(
    fields: &ItemFields,
    layout: &Layout,
    entry: &impl EntryFields,
) -> Result<Item, String> {
    let id_field = fields.id;
    let id_text = match (entry.get(id_field), fields.integer_id) {
        (Some(Value::String(s)), _) => s.clone(),
        // An integer ID is exact only when read as u64.
        (None, Some(integer)) => match entry.get(integer) {
            Some(Value::Number(n)) if n.as_u64().is_some() => n.to_string(),
            _ => return Err(format!("no {id_field} and no integer {integer}")),
        },
        (Some(other), _) => return Err(format!("{id_field} is not a string: {other}")),
        (None, None) => return Err(format!("no {id_field}")),
    };
    let id: Id = layout.parse(&id_text).map_err(|e| e.to_string())?;
    Ok(Item {
        id,
        id_text,
        created_at: entry
            .get(fields.created_at)
            .and_then(Value::as_str)
            .map(str::to_string),
        author: entry
            .pointer(fields.author)
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn twitter() -> Dialect {
        Dialect::TwitterV1 {
            list_id: "1".into(),
        }
    }

    fn fixture(path: &str) -> Vec<u8> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn texts(items: &[Item]) -> Vec<(&str, Option<&str>, Option<&str>)> {
        items
            .iter()
            .map(|i| {
                (
                    i.id_text.as_str(),
                    i.created_at.as_deref(),
                    i.author.as_deref(),
                )
            })
            .collect()
    }

    #[test]
    fn fixtures_parse() {
        let mastodon = Dialect::Mastodon {
            timeline: "public".into(),
        };
        let m: Layout = "mastodon".parse().unwrap();
        let items = mastodon
            .parse(&m, &fixture("mastodon/public_limit2.json"))
            .unwrap();
        assert_eq!(
            texts(&items),
            vec![
                ("103206804533200177", Some("2019-11-26T23:27:31.000Z"), None),
                ("103206804086086361", Some("2019-11-26T23:27:32.000Z"), None)
            ]
        );
        // The docs' own example is out of created_at order: ID time 23:27:40.186.
        assert_eq!(m.ts_ms(items[0].id), 1_574_810_860_186);

        let x = Dialect::X {
            endpoint: XEndpoint::UserTweets {
                user_id: "2244994945".into(),
            },
        };
        let t = Layout::twitter();
        let items = x.parse(&t, &fixture("x/timeline.json")).unwrap();
        assert_eq!(items[0].id_text, "1524796546306478083");
        assert_eq!(items[1].id, Id(1_524_468_552_404_668_416));
        assert_eq!(x.parse(&t, &fixture("x/empty.json")).unwrap(), vec![]);

        let d = Dialect::Discord {
            channel_id: "290926798999357250".into(),
        };
        let items = d
            .parse(
                &"discord".parse().unwrap(),
                &fixture("discord/messages.json"),
            )
            .unwrap();
        assert_eq!(
            texts(&items),
            vec![(
                "334385199974967042",
                Some("2017-07-11T17:27:07.299000+00:00"),
                Some("Mason")
            )]
        );

        let items = twitter()
            .parse(&t, &fixture("twitter-v1/lists_statuses.json"))
            .unwrap();
        assert_eq!(
            texts(&items),
            vec![(
                "1050118621198921728",
                Some("Wed Oct 10 20:19:24 +0000 2018"),
                Some("TwitterAPI")
            )]
        );
        // created_at has whole seconds; the ID says 20:19:24.211.
        assert_eq!(t.ts_ms(items[0].id), 1_539_202_764_211);

        let body = fixture("misskey/local_timeline.json");
        let notes: Vec<Value> = serde_json::from_slice(&body).unwrap();
        let ids: Vec<&str> = notes.iter().map(|n| n["id"].as_str().unwrap()).collect();
        let layout = detect_misskey_layout(&ids).unwrap();
        assert_eq!(layout.name(), "misskey-aidx");
        let items = Dialect::Misskey {
            endpoint: "local-timeline".into(),
        }
        .parse(&layout, &body)
        .unwrap();
        assert_eq!(
            texts(&items),
            vec![(
                "9v6hsao08sdi0003",
                Some("2024-07-01T12:00:00.000Z"),
                Some("example")
            )]
        );
        assert_eq!(layout.ts_ms(items[0].id), 1_719_835_200_000);
    }

    #[test]
    fn dry_run_descriptions_redact_the_token() {
        let l: Layout = "misskey-aidx".parse().unwrap();
        let req = PageRequest {
            since: None,
            before: None,
            limit: 100,
        };
        let mk = Dialect::Misskey {
            endpoint: "timeline".into(),
        };
        let text = mk.describe("https://misskey.example", &l, &req, true);
        assert_eq!(
            text,
            "POST https://misskey.example/api/notes/timeline\n  body: {\"i\":\"<redacted>\",\"limit\":100,\"untilId\":\"zzzzzzzzzzzzzzzz\"}"
        );
        let x = Dialect::X {
            endpoint: XEndpoint::SearchRecent {
                query: "a b".into(),
            },
        };
        let text = x.describe("https://api.x.com", &Layout::twitter(), &req, true);
        assert_eq!(
            text,
            "GET https://api.x.com/2/tweets/search/recent?query=a+b&max_results=100&tweet.fields=created_at%2Cauthor_id\n  Authorization: Bearer <redacted>"
        );
        let d = Dialect::Discord {
            channel_id: "1".into(),
        };
        let text = d.describe(
            "https://discord.com/api/v10",
            &Layout::twitter(),
            &req,
            true,
        );
        assert!(text.ends_with("Authorization: Bot <redacted>"), "{text}");
        assert!(
            !d.describe(
                "https://discord.com/api/v10",
                &Layout::twitter(),
                &req,
                false
            )
            .contains("Authorization")
        );
    }
}
