//! Clients the harness did not write, as `experiment serve --record` sees
//! them: each timeline request a client sent and the page it was served
//! becomes a request of a poller in the run database, placed in a cycle and
//! a page by [`since_id::foreign`], so that `analyze` judges the client by
//! the same definitions as the harness's own pollers.
//!
//! A poller is one client on one timeline: a token that polls its home
//! timeline and a tag, each with its own cursor, is two pollers (`CLIENT
//! home`, `CLIENT tag:snowleak`), whose cycles, cursors and verdicts never
//! mix. The timeline is the endpoint and the parameters that pick what it
//! serves ([`which_timeline`]).
//!
//! Who is a client: the credential it sends (the `Authorization` header,
//! whatever its scheme, or Misskey's `i` in the body; for OAuth 1.0a, whose
//! header is signed anew for each request, its `oauth_consumer_key` and
//! `oauth_token`), named by `--client NAME=TOKEN_ENV_VAR` or else by a short
//! hash of it. Without a credential, its `User-Agent`. The book keeps only a
//! hash of each: no credential is stored or held.
//!
//! Bounded whatever the clients send: at most [`MAX_TIMELINES`] timelines a
//! client (the rest share `CLIENT other timelines`), at most [`MAX_POLLERS`]
//! pollers in all (the last, `other clients`, shared by every client and
//! timeline beyond), labels of at most [`MAX_LABEL`] characters, and
//! [`MAX_REMEMBERED`] served IDs.
//!
//! Pure: the server's middleware (`serving/recording.rs`) hands each
//! exchange in and sends what comes out to the recorder.

use crate::api::{Dialect, XEndpoint};
use crate::record::{PollerRow, RequestRecord, StatusRecord};
use crate::sim::server::Covered;
use rundb::scope::Scope;
use serde_json::Value;
use since_id::foreign::{Cycles, ForeignRequest};
use since_id::id::{Id, Layout};
use std::collections::{HashMap, HashSet};
use std::ops::Range;

/// The `pollers.policy` of a recorded client: not one of the harness's policies.
pub const CLIENT_POLICY: &str = "client";

/// The most pollers one recording holds, the shared `other clients` among
/// them: `analyze` reads at most 64 pollers.
pub const MAX_POLLERS: usize = 64;

/// The most timelines of one client told apart; its later ones share one
/// poller, `CLIENT other timelines`, so a client that varies its parameters
/// cannot take every poller.
pub const MAX_TIMELINES: usize = 8;

/// The longest timeline label in a poller's name, in characters; a longer
/// one is cut and told apart by a hash of the whole.
pub const MAX_LABEL: usize = 60;

/// The longest value of a parameter kept in `client_requests.params`, in
/// characters (IDs and page tokens are far shorter).
pub const MAX_PARAM: usize = 200;

/// The name of the poller shared by every client and timeline beyond the bounds.
pub const OTHER_CLIENTS: &str = "other clients";

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
    /// The body as served (shared with the response sent, not copied).
    pub response: axum::body::Bytes,
    /// The statuses the endpoint serves, as the server marked its response
    /// (`leaky_timeline::server::with_scope`); unmarked, every status.
    pub scope: Option<Scope>,
    /// The ID window the server's own bounds left the response (X's
    /// `start_time`/`end_time`, recent search's end lag:
    /// `leaky_timeline::server::Covered`); the request's window is narrowed
    /// to it, so the client is owed only what it could be served.
    pub covered: Option<Covered>,
    pub sent_at_ms: i64,
    pub received_at_ms: i64,
}

/// What to send to the recorder for one exchange.
#[derive(Debug)]
pub enum Recorded {
    /// A poller seen for the first time (a client on a timeline): its row
    /// (its index is the number of pollers before it).
    NewClient(PollerRow),
    /// One request of a poller, with what its client asked for.
    Request(Box<RequestRecord>, rundb::ClientRequestRow),
}

/// The clients of one recording, and their pollers.
pub struct ClientBook {
    layout: Layout,
    /// Credential -> name, from `--client NAME=TOKEN_ENV_VAR`.
    names: HashMap<String, String>,
    /// A hash of who the client is -> the client; at most
    /// [`MAX_POLLERS`] - 1 (each has a poller).
    clients: HashMap<u64, Client>,
    /// Every poller, in the order of their indexes; at most [`MAX_POLLERS`].
    pollers: Vec<Poller>,
    /// The index of [`OTHER_CLIENTS`], once some client or timeline overflowed.
    other_clients: Option<usize>,
    /// The clients named by `--client` not seen yet: a poller is kept for
    /// each, so that a flood of other clients cannot take them all.
    named_unseen: usize,
    /// Statuses already served to some client: their `statuses` row is
    /// written. Cleared when it reaches [`MAX_REMEMBERED`]: a status served
    /// again after that is written again and ignored by the database
    /// (`rundb::write::insert_statuses`), so forgetting costs a write, never a row.
    served: HashSet<Id, foldhash::fast::FixedState>,
    /// The IDs of the last page claimed, all in `served` since: a page that
    /// serves the same again (pollers re-read the head of a timeline, most
    /// pages are the last one over again) has nothing new, without looking
    /// up each of its IDs.
    last_claimed: Vec<Id>,
}

/// The most served IDs the book remembers (a few MiB).
pub const MAX_REMEMBERED: usize = 1 << 18;

/// A client: its name, and its pollers by timeline.
struct Client {
    name: String,
    /// A hash of the timeline -> the poller's index; at most [`MAX_TIMELINES`].
    timelines: HashMap<u64, usize>,
    /// The poller of its timelines beyond [`MAX_TIMELINES`], once it has one.
    other_timelines: Option<usize>,
}

/// One client on one timeline, as the checker will read it.
struct Poller {
    /// The client's name (`client_requests.client`).
    client: String,
    /// Its `pollers.name`: unique in the run.
    name: String,
    cycles: Cycles,
    /// The oldest ID of the last page: where an opaque page token continues.
    last_oldest: Option<Id>,
}

/// How much the book holds: what bounds its memory (asserted by the tests).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    pub clients: usize,
    /// Timelines told apart, over all clients.
    pub timelines: usize,
    pub pollers: usize,
    pub remembered: usize,
}

/// Who sent a request: a hash that tells clients apart, and the name a new
/// client gets.
struct Who {
    key: u64,
    name: String,
    /// Named by `--client`.
    named: bool,
}

impl ClientBook {
    /// A book for a timeline of `layout`, naming the clients whose credential
    /// (for OAuth 1.0a, its `oauth_token`) is a key of `names`.
    pub fn new(layout: Layout, names: HashMap<String, String>) -> ClientBook {
        ClientBook {
            layout,
            clients: HashMap::new(),
            pollers: Vec::new(),
            other_clients: None,
            named_unseen: names.len(),
            names,
            served: HashSet::default(),
            last_claimed: Vec::new(),
        }
    }

    /// The layout the book reads IDs in.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// How much the book holds now.
    #[cfg(test)]
    pub fn footprint(&self) -> Footprint {
        Footprint {
            clients: self.clients.len(),
            timelines: self.clients.values().map(|c| c.timelines.len()).sum(),
            pollers: self.pollers.len(),
            remembered: self.served.len(),
        }
    }

    /// What to record of one exchange: nothing for a request that is not a
    /// timeline page; else the poller if new, and the request.
    #[cfg(test)]
    pub fn observe(&mut self, ex: &Exchange) -> Vec<Recorded> {
        let served = served(&self.layout, ex);
        self.observe_served(ex, served)
    }

    /// Notes that these statuses were served; returns those no client was
    /// served before, whose `statuses` row is still to be written.
    pub fn claim(&mut self, ids: &[Id]) -> Claimed {
        if ids == self.last_claimed.as_slice() {
            return Claimed::default();
        }
        if self.served.len() + ids.len() > MAX_REMEMBERED {
            self.served.clear();
        }
        self.last_claimed.clear();
        self.last_claimed.extend_from_slice(ids);
        Claimed(
            ids.iter()
                .copied()
                .filter(|&id| self.served.insert(id))
                .collect(),
        )
    }

    /// [`ClientBook::observe`] with the items already read from the
    /// response by [`served`].
    #[cfg(test)]
    pub fn observe_served(&mut self, ex: &Exchange, served: Vec<since_id::Item>) -> Vec<Recorded> {
        let page = Page::read(served, |ids| self.claim(ids));
        self.observe_page(ex, page)
    }

    /// What to record of one exchange whose page is known ([`Page`]; its
    /// statuses claimed): [`ClientBook::place`] of its [`Reading`].
    #[cfg(test)]
    pub fn observe_page(&mut self, ex: &Exchange, page: Page) -> Vec<Recorded> {
        match self.reader().read(ex) {
            Some(reading) => self.place(reading, page),
            None => Vec::new(),
        }
    }

    /// What reads an exchange without the book ([`Reader::read`]).
    pub fn reader(&self) -> Reader {
        Reader {
            layout: self.layout.clone(),
            names: self.names.clone(),
        }
    }

    /// What to record of one exchange, read ([`Reading`]) and its page
    /// known ([`Page`]; its statuses claimed): the server reads exchanges
    /// and pages in parallel, and only this, which needs the book, is done
    /// one at a time.
    pub fn place(&mut self, reading: Reading, page: Page) -> Vec<Recorded> {
        let Reading {
            who,
            timeline_key,
            label,
            lower,
            upper,
            page_token,
            forward,
            limit,
            mut asked_row,
            covered,
            request,
        } = reading;
        let mut out = Vec::new();
        let index = self.poller_of(who, timeline_key, &label, &mut out);
        let poller = &mut self.pollers[index];
        // An opaque token continues below the last page.
        let upper = match upper {
            None if page_token => poller.last_oldest,
            upper => upper,
        };
        let foreign = ForeignRequest {
            lower,
            upper,
            forward,
            limit,
            served: page.ids,
        };
        let placed = narrowed(poller.cycles.place(&foreign), covered);
        poller.last_oldest = foreign.served.iter().copied().min();
        asked_row.client = poller.client.clone();
        asked_row.served = Some(page.served);
        let request = rundb::RequestRow {
            cycle: placed.cycle as i64,
            page: placed.page as i64,
            since_id: placed.since.map(|id| self.layout.format(id)),
            since_key: placed.since.map(|id| id.sort_key()),
            before_id: placed.before.map(|id| self.layout.format(id)),
            before_key: placed.before.map(|id| id.sort_key()),
            new_items: foreign.served.len() as i64,
            items: foreign.served.len() as i64,
            ..request
        };
        let items = page
            .first_seen
            .into_iter()
            .map(|item| StatusRecord {
                first_sighting: true,
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
            poller: index,
            request,
            items,
        };
        out.push(Recorded::Request(Box::new(row), asked_row));
        out
    }

    /// The index of the poller of this client on this timeline: its own,
    /// its client's `other timelines`, or [`OTHER_CLIENTS`], as the bounds
    /// allow; a new poller's row goes to `out`.
    fn poller_of(
        &mut self,
        who: Who,
        timeline_key: u64,
        label: &str,
        out: &mut Vec<Recorded>,
    ) -> usize {
        // One poller is kept for OTHER_CLIENTS until it exists, and one for
        // each named client not seen yet (its first is its own).
        let known = self.clients.contains_key(&who.key);
        let first_of_named = who.named && !known && self.named_unseen > 0;
        let kept = usize::from(self.other_clients.is_none()) + self.named_unseen
            - usize::from(first_of_named);
        let room = self.pollers.len() + kept < MAX_POLLERS;
        if !known && room {
            if who.named {
                self.named_unseen = self.named_unseen.saturating_sub(1);
            }
            self.clients.insert(
                who.key,
                Client {
                    name: who.name,
                    timelines: HashMap::new(),
                    other_timelines: None,
                },
            );
        }
        let Some(client) = self.clients.get(&who.key) else {
            return self.other_clients(out);
        };
        if let Some(&index) = client.timelines.get(&timeline_key) {
            return index;
        }
        let own = client.timelines.len() < MAX_TIMELINES;
        let (name, other) = (client.name.clone(), client.other_timelines);
        match (own, other) {
            _ if !room && (own || other.is_none()) => self.other_clients(out),
            (true, _) => {
                let index = self.new_poller(&name, &format!("{name} {label}"), out);
                let client = self.clients.get_mut(&who.key).expect("inserted above");
                client.timelines.insert(timeline_key, index);
                index
            }
            (false, Some(index)) => index,
            (false, None) => {
                let index = self.new_poller(&name, &format!("{name} other timelines"), out);
                let client = self.clients.get_mut(&who.key).expect("inserted above");
                client.other_timelines = Some(index);
                index
            }
        }
    }

    /// The poller shared by every client and timeline beyond the bounds.
    fn other_clients(&mut self, out: &mut Vec<Recorded>) -> usize {
        match self.other_clients {
            Some(index) => index,
            None => {
                let index = self.new_poller(OTHER_CLIENTS, OTHER_CLIENTS, out);
                self.other_clients = Some(index);
                index
            }
        }
    }

    /// A new poller of `client`, named `wanted` unless another has that name
    /// (run.db's poller names are unique in a run): then with a number.
    fn new_poller(&mut self, client: &str, wanted: &str, out: &mut Vec<Recorded>) -> usize {
        let taken = |name: &str| self.pollers.iter().any(|p| p.name == name);
        let mut name = wanted.to_string();
        let mut n = 2;
        while taken(&name) {
            name = format!("{wanted} #{n}");
            n += 1;
        }
        out.push(Recorded::NewClient(PollerRow {
            name: name.clone(),
            policy: CLIENT_POLICY.into(),
            ..PollerRow::default()
        }));
        self.pollers.push(Poller {
            client: client.to_string(),
            name,
            cycles: Cycles::new(),
            last_oldest: None,
        });
        self.pollers.len() - 1
    }
}

/// Reads exchanges for a book without holding it ([`ClientBook::reader`]):
/// its layout and its client names.
pub struct Reader {
    layout: Layout,
    names: HashMap<String, String>,
}

/// What one exchange says before the book places it: who sent it, which
/// timeline it reads, its bounds as IDs, and its rows but for what the book
/// adds (the placing, the client's name, the page served).
pub struct Reading {
    who: Who,
    timeline_key: u64,
    label: String,
    lower: Option<Id>,
    upper: Option<Id>,
    page_token: bool,
    forward: bool,
    limit: usize,
    asked_row: rundb::ClientRequestRow,
    covered: Option<Covered>,
    request: rundb::RequestRow,
}

impl Reader {
    /// `ex` read, or `None` if it is not a timeline request. Pure.
    pub fn read(&self, ex: &Exchange) -> Option<Reading> {
        let dialect = timeline_of(&ex.method, &ex.path, &ex.query)?;
        let (timeline_key, label) = which_timeline(&dialect, ex);
        let asked = Asked::read(&dialect, ex);
        let parse_id =
            |text: &Option<String>| text.as_deref().and_then(|t| self.layout.parse(t).ok());
        let request = rundb::RequestRow {
            sent_at_ms: ex.sent_at_ms,
            received_at_ms: ex.received_at_ms,
            page_limit: asked.limit as i64,
            http_status: Some(i64::from(ex.status)),
            error: (ex.status != 200).then(|| format!("HTTP {}", ex.status)),
            bytes: Some(ex.response.len() as i64),
            overflow: false,
            ..Default::default()
        };
        let asked_row = rundb::ClientRequestRow {
            client: String::new(),
            method: ex.method.clone(),
            // As sent, unless a hostile client made it long.
            endpoint: ex.path.chars().take(MAX_PARAM).collect(),
            params: asked.params.to_string(),
            // A failed request served nothing; an unmarked success, everything.
            scope: match (&ex.scope, ex.status) {
                (_, status) if status != 200 => Scope::None,
                (Some(scope), _) => scope.clone(),
                (None, _) => Scope::All,
            }
            .to_string(),
            served: None,
            ..Default::default()
        };
        Some(Reading {
            who: who(ex, &self.names),
            timeline_key,
            label,
            lower: parse_id(&asked.lower),
            upper: parse_id(&asked.upper),
            page_token: asked.page_token,
            forward: asked.forward,
            limit: asked.limit,
            asked_row,
            covered: ex.covered,
            request,
        })
    }
}

/// A request's window within what the server covered: the cycle and page
/// stay as the client's bounds placed them, the window shrinks to the IDs the
/// server could serve (a post inside the client's bounds but past recent
/// search's end lag is not owed at this request; it is the next one's).
fn narrowed(
    mut placed: since_id::foreign::Placed,
    covered: Option<Covered>,
) -> since_id::foreign::Placed {
    if let Some(c) = covered {
        placed.since = placed.since.max(c.after);
        placed.before = match (placed.before, c.before) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    placed
}

/// The items a timeline response served (none for a failed request, or
/// any other request): pure, and done outside the book's lock.
pub fn served(layout: &Layout, ex: &Exchange) -> Vec<since_id::Item> {
    served_in(layout, ex, &ex.response)
}

/// [`served`] read from `body`, a part of the exchange's response in the
/// same dialect.
fn served_in(layout: &Layout, ex: &Exchange, body: &[u8]) -> Vec<since_id::Item> {
    match timeline_of(&ex.method, &ex.path, &ex.query) {
        Some(dialect) if ex.status == 200 => dialect.parse(layout, body).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The items of the claimed statuses of a page the server marked with where
/// each status lies in its body (`spans`, in `ids`' order: see
/// [`crate::sim::server::ServedIds`]): only their elements of the JSON array
/// are read, as one array of them, so a page of 200 with one new status
/// reads one. Without usable spans, the whole page is read. Pure.
pub fn first_served(
    layout: &Layout,
    ex: &Exchange,
    ids: &[Id],
    spans: Option<&[Range<usize>]>,
    claimed: Claimed,
) -> Vec<since_id::Item> {
    let body = &ex.response;
    let parts = spans
        .filter(|spans| spans.len() == ids.len())
        .and_then(|spans| {
            let wanted = ids
                .iter()
                .zip(spans)
                .filter(|(id, _)| claimed.0.contains(id));
            let mut part = vec![b'['];
            for (i, (_, span)) in wanted.enumerate() {
                if i > 0 {
                    part.push(b',');
                }
                part.extend_from_slice(body.get(span.clone())?);
            }
            part.push(b']');
            Some(part)
        });
    match parts {
        Some(part) => claimed.first_seen(served_in(layout, ex, &part)),
        None => claimed.first_seen(served(layout, ex)),
    }
}

/// The statuses of a page no client was served before ([`ClientBook::claim`]):
/// a few at most, usually none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claimed(Vec<Id>);

impl Claimed {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The items of these statuses, each once (a status repeated within
    /// the page is first seen once).
    pub fn first_seen(mut self, items: Vec<since_id::Item>) -> Vec<since_id::Item> {
        items
            .into_iter()
            .filter(|i| match self.0.iter().position(|&id| id == i.id) {
                Some(at) => {
                    self.0.swap_remove(at);
                    true
                }
                None => false,
            })
            .collect()
    }
}

/// A timeline page as the recording knows it: the IDs it served, in order,
/// as one value, and the statuses no client was served before (claimed,
/// [`ClientBook::claim`]), as the page wrote them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    pub ids: Vec<Id>,
    /// The IDs as `client_requests.served` stores them ([`rundb::pages`]).
    pub served: Vec<u8>,
    pub first_seen: Vec<since_id::Item>,
}

impl Page {
    /// A page read from its body: each ID as the API wrote it. `claim`
    /// gives the IDs served for the first time.
    pub fn read(items: Vec<since_id::Item>, claim: impl FnOnce(&[Id]) -> Claimed) -> Page {
        let ids: Vec<Id> = items.iter().map(|i| i.id).collect();
        let texts: Vec<&str> = items.iter().map(|i| i.id_text.as_str()).collect();
        let served = rundb::pages::encode(&texts);
        let first_seen = claim(&ids).first_seen(items);
        Page {
            ids,
            served,
            first_seen,
        }
    }

    /// A page whose IDs the server handed over as it served them
    /// ([`crate::sim::server::ServedIds`]), written as the server writes
    /// them (`layout`), without reading the body; `first_seen`, read from
    /// the body, only if some status was new. Pure.
    pub fn marked(layout: &Layout, ids: &[Id], first_seen: Vec<since_id::Item>) -> Page {
        let max = layout.max_id().0;
        let numbers: Option<Vec<u64>> = if layout.is_numeric() {
            ids.iter()
                .map(|id| u64::try_from(id.0.min(max)).ok())
                .collect()
        } else {
            None
        };
        let served = match numbers {
            Some(numbers) => rundb::pages::encode_numbers(&numbers),
            None => {
                rundb::pages::encode(&ids.iter().map(|&id| layout.format(id)).collect::<Vec<_>>())
            }
        };
        Page {
            ids: ids.to_vec(),
            served,
            first_seen,
        }
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
        // One account's statuses (docs.joinmastodon.org, methods/accounts, "statuses").
        ("GET", ["", "api", "v1", "accounts", id, "statuses"]) => Some(Dialect::Mastodon {
            timeline: format!("account:{id}"),
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
                params.insert(
                    name.to_string(),
                    Value::String(v.chars().take(MAX_PARAM).collect()),
                );
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

/// Who sent `ex`: a hash of its credential (for OAuth 1.0a, of its
/// `oauth_consumer_key` and `oauth_token`), else of its `User-Agent`; and
/// the name such a client gets: `--client`'s, or a short hash.
fn who(ex: &Exchange, names: &HashMap<String, String>) -> Who {
    let credentialed = |key: String, token: &str, hashed: &str| match names.get(token) {
        Some(name) => Who {
            key: hash64(&key),
            name: name.clone(),
            named: true,
        },
        None => Who {
            key: hash64(&key),
            name: format!("client {}", short_hash(hashed)),
            named: false,
        },
    };
    if let Some(oauth) = oauth1(ex) {
        let both = format!("{}&{}", oauth.consumer_key, oauth.token);
        return credentialed(format!("oauth1:{both}"), &oauth.token, &both);
    }
    match (credential(ex), &ex.user_agent) {
        (Some(c), _) => credentialed(format!("credential:{c}"), &c, &c),
        (None, Some(ua)) => Who {
            key: hash64(&format!("user-agent:{ua}")),
            name: format!("user-agent {}", printable(ua, MAX_LABEL)),
            named: false,
        },
        (None, None) => Who {
            key: hash64("anonymous"),
            name: "anonymous".into(),
            named: false,
        },
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

/// What identifies an OAuth 1.0a client: its application and its user's
/// access token. The rest of the protocol's parameters (nonce, timestamp,
/// signature) change with every request.
#[derive(Debug, PartialEq, Eq)]
struct OAuth1 {
    consumer_key: String,
    /// Empty for a request signed by the application alone.
    token: String,
}

/// The OAuth 1.0a parameters of a signed request: from the `Authorization:
/// OAuth k="v", ...` header, or else from the query string, the two places
/// a client may send them (RFC 5849, sections 3.5.1 and 3.5.3); values are
/// percent-encoded (section 3.6). `None` when it is not signed so.
fn oauth1(ex: &Exchange) -> Option<OAuth1> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    match ex.authorization.as_deref().map(str::trim) {
        Some(auth)
            if auth
                .get(..6)
                .is_some_and(|s| s.eq_ignore_ascii_case("oauth ")) =>
        {
            for part in auth[6..].split(',') {
                let Some((k, v)) = part.split_once('=') else {
                    continue;
                };
                let v = v.trim().trim_matches('"');
                pairs.push((k.trim().to_string(), percent_decode(v)));
            }
        }
        Some(_) => return None,
        None => pairs.extend(
            ex.query
                .iter()
                .filter(|(k, _)| k.starts_with("oauth_"))
                .cloned(),
        ),
    }
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    Some(OAuth1 {
        consumer_key: get("oauth_consumer_key")?,
        token: get("oauth_token").unwrap_or_default(),
    })
}

/// `text` with its `%XX` escapes decoded (RFC 3986, section 2.1); an
/// escape that is not one stays as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap() * 16 + hex(l).unwrap()) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The timeline a request reads, as a hash that tells timelines apart and a
/// label for its poller's name: the endpoint and the parameters that pick
/// what it serves (Mastodon's tag, list, `local`, `remote`, `only_media`;
/// Misskey's `withFiles`, `withRenotes`, `withReplies`; X's user and query;
/// Twitter v1.1's list; Discord's channel). Cursor and page parameters are
/// not the timeline's. The label is at most [`MAX_LABEL`] characters.
pub fn which_timeline(dialect: &Dialect, ex: &Exchange) -> (u64, String) {
    let segments: Vec<&str> = ex.path.trim_end_matches('/').split('/').collect();
    let mut label = match dialect {
        Dialect::Mastodon { .. } => {
            // After /api/v1/timelines/: home, public, local, tag/NAME, list/ID;
            // /api/v1/accounts/ID/statuses is account:ID.
            let mut label = match segments.as_slice() {
                ["", "api", "v1", "accounts", id, "statuses"] => format!("account:{id}"),
                _ => segments.get(4..).unwrap_or_default().join(":"),
            };
            for flag in ["local", "remote", "only_media", "pinned"] {
                if mastodon_truthy(param(&ex.query, flag)) {
                    label.push('+');
                    label.push_str(flag);
                }
            }
            // A tag timeline's other tags (any[], all[], none[]).
            for (k, v) in &ex.query {
                if ["any[]", "all[]", "none[]", "tagged"].contains(&k.as_str()) {
                    label.push_str(&format!("+{}={v}", k.trim_end_matches("[]")));
                }
            }
            label
        }
        Dialect::Misskey { endpoint } => {
            let mut label = endpoint.clone();
            let body = ex.body.as_ref();
            for name in [
                "withFiles",
                "withRenotes",
                "withReplies",
                "listId",
                "channelId",
                "antennaId",
            ] {
                if let Some(v) = body.and_then(|b| b.get(name)) {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    label.push_str(&format!("+{name}={v}"));
                }
            }
            label
        }
        Dialect::TwitterV1 { .. } if ex.path.ends_with("home_timeline.json") => "home".into(),
        Dialect::TwitterV1 { .. } => {
            match (
                param(&ex.query, "list_id"),
                param(&ex.query, "slug"),
                param(&ex.query, "owner_screen_name").or(param(&ex.query, "owner_id")),
            ) {
                (Some(id), _, _) => format!("list:{id}"),
                (None, Some(slug), Some(owner)) => format!("list:{owner}/{slug}"),
                _ => "list".into(),
            }
        }
        Dialect::X {
            endpoint: XEndpoint::SearchRecent { query },
        } => format!("search:{query}"),
        Dialect::X {
            endpoint: XEndpoint::UserTweets { user_id },
        } if segments.last() == Some(&"reverse_chronological") => format!("home:{user_id}"),
        Dialect::X {
            endpoint: XEndpoint::UserTweets { user_id },
        } => format!("user:{user_id}"),
        Dialect::Discord { channel_id } => format!("channel:{channel_id}"),
    };
    let key = hash64(&format!("{} {label}", ex.method));
    if label.chars().count() > MAX_LABEL || label.chars().any(char::is_control) {
        // Cut, and told apart from another cut the same by the whole's hash.
        label = format!(
            "{}...#{}",
            printable(&label, MAX_LABEL - 12),
            short_hash(&label)
        );
    }
    (key, label)
}

/// Mastodon's reading of a boolean parameter: true unless absent, empty or
/// one of Rails' false values (`truthy_param?` in Mastodon's
/// app/controllers/application_controller.rb casts with
/// `ActiveModel::Type::Boolean`, whose `FALSE_VALUES` these are).
fn mastodon_truthy(value: Option<&str>) -> bool {
    value.is_some_and(|v| !["", "0", "f", "F", "false", "FALSE", "off", "OFF"].contains(&v))
}

/// 64 bits of FNV-1a (www.isthe.com/chongo/tech/comp/fnv): tells clients
/// and timelines apart without keeping what they sent.
fn hash64(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// 8 hex digits of [`hash64`]: tells credentials apart, and a short hash of
/// a token is all the database ever holds of it.
fn short_hash(text: &str) -> String {
    format!("{:08x}", hash64(text) >> 32)
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
            response: mastodon_page(served).into(),
            ..Exchange::default()
        }
    }

    #[test]
    fn a_status_is_claimed_once_whatever_pages_repeat_it() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        let page = |ids: &[u128]| ids.iter().map(|&i| Id(i)).collect::<Vec<_>>();
        let a = page(&[30, 20, 10]);
        let b = page(&[40, 30, 20]);
        assert_eq!(book.claim(&a), Claimed(a.clone()));
        assert_eq!(book.claim(&a), Claimed::default(), "the same page again");
        assert_eq!(book.claim(&b), Claimed(page(&[40])), "only the new status");
        assert_eq!(book.claim(&a), Claimed::default(), "an older page again");
        assert_eq!(book.claim(&page(&[])), Claimed::default());
        assert_eq!(book.claim(&b), Claimed::default());
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
        assert_eq!(named.name, "my bot public");
        assert_eq!(named.policy, CLIENT_POLICY);
        let Recorded::NewClient(hashed) = &other[0] else {
            panic!("a second client")
        };
        assert!(
            hashed.name.starts_with("client ") && hashed.name.ends_with(" public"),
            "{}",
            hashed.name
        );
        assert!(!hashed.name.contains("another-one"));
        assert_eq!(again.len(), 1, "a known client adds no poller");
        let (row, asked) = requests(&again)[0];
        assert_eq!(row.poller, 0);
        assert_eq!((row.request.cycle, row.request.page), (1, 0));
        assert_eq!(row.request.since_id.as_deref(), Some("300"));
        assert_eq!(asked.params, r#"{"since_id":"300"}"#);
        assert_eq!(asked.client, "my bot", "the client, not its poller");
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
        let (row0, asked0) = requests(&page0)[0];
        let served = rundb::pages::decode(asked0.served.as_ref().unwrap()).unwrap();
        assert_eq!(served, ["300", "200"]);
        assert_eq!(row0.request.items, 2);
        // Both first seen here: their rows are written with this request.
        let ids: Vec<&str> = row0.items.iter().map(|s| s.status.id.as_str()).collect();
        assert_eq!(ids, ["300", "200"]);
        // Served again, a status is in the page, not written again.
        let again = book.observe(&get(path, &[("limit", "2")], None, &[300, 200]));
        let (row, asked) = requests(&again)[0];
        assert_eq!(
            rundb::pages::decode(asked.served.as_ref().unwrap()).unwrap(),
            ["300", "200"]
        );
        assert!(row.items.is_empty(), "no status row written twice");
        let (row1, _) = requests(&page1)[0];
        assert_eq!((row1.request.cycle, row1.request.page), (0, 1));
        assert_eq!(row1.request.before_id.as_deref(), Some("200"));
        let Recorded::NewClient(ua) = &page0[0] else {
            panic!()
        };
        assert_eq!(ua.name, "user-agent Mastodon.py public");
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
        bad.response = axum::body::Bytes::from_static(b"{\"error\":\"bad\"}");
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
            response: axum::body::Bytes::from_static(b"[]"),
            ..Exchange::default()
        };
        assert_eq!(credential(&ex).as_deref(), Some("tok"));
        let asked = Asked::read(&timeline_of("POST", &ex.path, &[]).unwrap(), &ex);
        assert!(asked.forward);
        assert_eq!(asked.limit, 5);
        assert_eq!(asked.lower.as_deref(), Some("9f6m2hqa00"));
    }

    /// Every `NewClient` row of `out`: the pollers it added.
    fn new_pollers(out: &[Recorded]) -> Vec<String> {
        out.iter()
            .filter_map(|r| match r {
                Recorded::NewClient(row) => Some(row.name.clone()),
                Recorded::Request(..) => None,
            })
            .collect()
    }

    /// The one request `out` records: (poller, cycle, page, client).
    fn placed(out: &[Recorded]) -> (usize, i64, i64, String) {
        let (row, asked) = requests(out)[0];
        (
            row.poller,
            row.request.cycle,
            row.request.page,
            asked.client.clone(),
        )
    }

    /// What the server's own bounds left (X's end lag) narrows the window;
    /// the cycle and page stay as the client's cursors placed them.
    #[test]
    fn the_window_is_narrowed_to_what_the_server_covered() {
        let mut book = ClientBook::new("twitter".parse().unwrap(), HashMap::new());
        let search = |since: &str, covered: Option<Covered>| {
            let mut ex = get(
                "/2/tweets/search/recent",
                &[("query", "a"), ("since_id", since)],
                Some("Bearer t"),
                &[],
            );
            ex.response = axum::body::Bytes::from_static(
                br#"{"data":[{"id":"40","text":""}],"meta":{"result_count":1}}"#,
            );
            ex.covered = covered;
            ex
        };
        let lagged = Covered {
            after: None,
            before: Some(Id(50)),
        };
        let out = book.observe(&search("30", Some(lagged)));
        let (row, asked) = requests(&out)[0];
        let r = &row.request;
        assert_eq!((r.cycle, r.page), (0, 0));
        assert_eq!(r.since_id.as_deref(), Some("30"));
        assert_eq!(
            r.before_id.as_deref(),
            Some("50"),
            "the newest were not searchable yet"
        );
        assert_eq!(asked.params, r#"{"since_id":"30"}"#, "as sent");
        // A start_time above the client's since_id raises the window's floor.
        let from = Covered {
            after: Some(Id(35)),
            before: Some(Id(60)),
        };
        let out = book.observe(&search("40", Some(from)));
        let r = &requests(&out)[0].0.request;
        assert_eq!(
            (r.cycle, r.since_id.as_deref(), r.before_id.as_deref()),
            (1, Some("40"), Some("60"))
        );
        let out = book.observe(&search("20", Some(from)));
        let r = &requests(&out)[0].0.request;
        assert_eq!(
            (r.since_id.as_deref(), r.before_id.as_deref()),
            (Some("35"), Some("60"))
        );
        let out = book.observe(&search("40", None));
        let r = &requests(&out)[0].0.request;
        assert_eq!(
            (r.since_id.as_deref(), r.before_id.as_deref()),
            (Some("40"), None)
        );
    }

    #[test]
    fn one_token_on_two_timelines_is_two_pollers_with_their_own_cycles() {
        let names = HashMap::from([("tok".to_string(), "bot".to_string())]);
        let mut book = ClientBook::new("mastodon".parse().unwrap(), names);
        let (home, tag) = ("/api/v1/timelines/home", "/api/v1/timelines/tag/snowleak");
        let auth = Some("Bearer tok");
        let h0 = book.observe(&get(home, &[], auth, &[300, 100]));
        let t0 = book.observe(&get(tag, &[], auth, &[200]));
        let h1 = book.observe(&get(home, &[("since_id", "300")], auth, &[400]));
        let t1 = book.observe(&get(tag, &[("since_id", "200")], auth, &[]));
        assert_eq!(new_pollers(&h0), ["bot home"]);
        assert_eq!(new_pollers(&t0), ["bot tag:snowleak"]);
        assert!(new_pollers(&h1).is_empty() && new_pollers(&t1).is_empty());
        // Each timeline's requests are its own poller's, one cycle a poll.
        assert_eq!(placed(&h0), (0, 0, 0, "bot".into()));
        assert_eq!(placed(&t0), (1, 0, 0, "bot".into()));
        assert_eq!(placed(&h1), (0, 1, 0, "bot".into()));
        assert_eq!(placed(&t1), (1, 1, 0, "bot".into()));
        let (row, _) = requests(&t1)[0];
        assert_eq!(
            row.request.since_id.as_deref(),
            Some("200"),
            "its own cursor"
        );
        assert_eq!(
            book.footprint(),
            Footprint {
                clients: 1,
                timelines: 2,
                pollers: 2,
                remembered: 4
            }
        );
    }

    /// The timeline `ex` reads: its hash and its label.
    fn label(ex: &Exchange) -> (u64, String) {
        let dialect = timeline_of(&ex.method, &ex.path, &ex.query).expect("a timeline");
        which_timeline(&dialect, ex)
    }

    #[test]
    fn the_parameters_that_pick_a_timeline_tell_timelines_apart_and_cursors_do_not() {
        let public = "/api/v1/timelines/public";
        let of = |path: &str, query: &[(&str, &str)]| label(&get(path, query, None, &[]));
        let plain = of(public, &[]);
        assert_eq!(plain.1, "public");
        assert_eq!(of(public, &[("since_id", "5"), ("limit", "40")]), plain);
        assert_eq!(
            of(public, &[("local", "false")]),
            plain,
            "Rails reads it false"
        );
        assert_eq!(of(public, &[("local", "true")]).1, "public+local");
        assert_eq!(of(public, &[("remote", "1")]).1, "public+remote");
        assert_eq!(of(public, &[("only_media", "true")]).1, "public+only_media");
        assert_eq!(of("/api/v1/timelines/local", &[]).1, "local");
        assert_eq!(of("/api/v1/timelines/home", &[]).1, "home");
        let account = "/api/v1/accounts/1000007/statuses";
        assert_eq!(
            of(account, &[("min_id", "5"), ("limit", "40")]).1,
            "account:1000007"
        );
        assert_eq!(
            of(account, &[("pinned", "true")]).1,
            "account:1000007+pinned"
        );
        assert_eq!(
            of(account, &[("tagged", "rust")]).1,
            "account:1000007+tagged=rust"
        );
        assert_ne!(
            of(account, &[]),
            of("/api/v1/accounts/1000008/statuses", &[])
        );
        for other in ["/api/v1/accounts/1000007", "/api/v1/accounts/lookup"] {
            assert!(timeline_of("GET", other, &[]).is_none(), "{other}");
        }
        assert_eq!(
            of("/api/v1/timelines/tag/snowleak", &[("any[]", "rust")]).1,
            "tag:snowleak+any=rust"
        );
        let x = |path: &str, query: &[(&str, &str)]| {
            let mut ex = get(path, query, None, &[]);
            ex.response = axum::body::Bytes::from_static(b"{}");
            label(&ex).1
        };
        assert_eq!(x("/2/users/7/tweets", &[("since_id", "1")]), "user:7");
        assert_eq!(
            x("/2/users/7/timelines/reverse_chronological", &[]),
            "home:7"
        );
        assert_eq!(
            x("/2/tweets/search/recent", &[("query", "from:a")]),
            "search:from:a"
        );
        assert_eq!(x("/1.1/lists/statuses.json", &[("list_id", "9")]), "list:9");
        assert_eq!(
            x(
                "/1.1/lists/statuses.json",
                &[("slug", "news"), ("owner_screen_name", "a")]
            ),
            "list:a/news"
        );
        assert_eq!(x("/1.1/statuses/home_timeline.json", &[]), "home");
        assert_eq!(x("/api/v10/channels/42/messages", &[]), "channel:42");
        let misskey = |body: Value| {
            let ex = Exchange {
                method: "POST".into(),
                path: "/api/notes/local-timeline".into(),
                body: Some(body),
                ..Exchange::default()
            };
            label(&ex)
        };
        let files = misskey(serde_json::json!({"i": "t", "withFiles": true, "sinceId": "a"}));
        assert_eq!(files.1, "local-timeline+withFiles=true");
        assert_ne!(files, misskey(serde_json::json!({"withFiles": false})));
        assert_eq!(
            misskey(serde_json::json!({"untilId": "b"})).1,
            "local-timeline"
        );
    }

    #[test]
    fn a_client_has_at_most_eight_timelines_and_shares_one_for_the_rest() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        let mut names = Vec::new();
        for n in 0..(MAX_TIMELINES + 5) {
            let path = format!("/api/v1/timelines/tag/t{n}");
            names.extend(new_pollers(&book.observe(&get(
                &path,
                &[],
                Some("Bearer one"),
                &[],
            ))));
        }
        assert_eq!(names.len(), MAX_TIMELINES + 1, "{names:?}");
        assert!(
            names[MAX_TIMELINES].ends_with(" other timelines"),
            "{names:?}"
        );
        // A timeline told apart keeps its own poller after the bound.
        let again = book.observe(&get(
            "/api/v1/timelines/tag/t0",
            &[],
            Some("Bearer one"),
            &[],
        ));
        assert_eq!(placed(&again).0, 0);
        let later = book.observe(&get(
            "/api/v1/timelines/tag/t99",
            &[],
            Some("Bearer one"),
            &[],
        ));
        assert_eq!(placed(&later).0, MAX_TIMELINES, "the shared one");
    }

    /// A Twitter v1.1 request signed with OAuth 1.0a, as tweepy's requests-oauthlib sends it.
    fn signed(consumer: &str, token: &str, nonce: u32) -> Exchange {
        let mut ex = get("/1.1/statuses/home_timeline.json", &[], None, &[]);
        ex.response = axum::body::Bytes::from_static(b"[]");
        ex.authorization = Some(format!(
            "OAuth oauth_nonce=\"{nonce}\", oauth_timestamp=\"{}\", oauth_version=\"1.0\", \
             oauth_signature_method=\"HMAC-SHA1\", oauth_consumer_key=\"{consumer}\", \
             oauth_token=\"{token}\", oauth_signature=\"sig%2B{nonce}%3D\"",
            1_700_000_000 + nonce
        ));
        ex
    }

    #[test]
    fn oauth1_requests_are_one_client_by_consumer_key_and_token() {
        let names = HashMap::from([("370773112-Gw+user".to_string(), "archiver".to_string())]);
        let mut book = ClientBook::new("twitter".parse().unwrap(), names);
        let mut pollers = Vec::new();
        for nonce in 0..5 {
            pollers.extend(new_pollers(&book.observe(&signed(
                "xvz1evFS4wEEPTGEFPHBog",
                "370773112-Gw%2Buser",
                nonce,
            ))));
        }
        assert_eq!(
            pollers,
            ["archiver home"],
            "named by its percent-decoded token"
        );
        // Another user of the same application: another client, hashed.
        let other_user = book.observe(&signed("xvz1evFS4wEEPTGEFPHBog", "99-other", 1));
        let hashed = &new_pollers(&other_user)[0];
        assert!(hashed.starts_with("client ") && hashed.ends_with(" home"));
        // The same token through another application: another client, named
        // by its token too, its poller's name told apart.
        let other_app = book.observe(&signed("another-app", "370773112-Gw%2Buser", 1));
        assert_eq!(new_pollers(&other_app), ["archiver home #2"]);
        // The same in the query string (RFC 5849, 3.5.3).
        let mut in_query = get("/1.1/statuses/home_timeline.json", &[], None, &[]);
        in_query.response = axum::body::Bytes::from_static(b"[]");
        in_query.query = vec![
            ("oauth_consumer_key".into(), "xvz1evFS4wEEPTGEFPHBog".into()),
            ("oauth_token".into(), "370773112-Gw+user".into()),
            ("oauth_nonce".into(), "77".into()),
        ];
        let out = book.observe(&in_query);
        assert!(new_pollers(&out).is_empty());
        assert_eq!(placed(&out).3, "archiver");
        let everything = format!("{other_user:?}{other_app:?}{out:?}");
        assert!(!everything.contains("370773112") && !everything.contains("99-other"));
        // A bearer token is not OAuth 1.0a.
        let bearer = get(
            "/1.1/statuses/home_timeline.json",
            &[],
            Some("Bearer x"),
            &[],
        );
        assert_eq!(oauth1(&bearer), None);
        // Nor is a header whose first bytes are not characters' boundaries.
        let odd = get(
            "/1.1/statuses/home_timeline.json",
            &[],
            Some("aaaaaé OAuth"),
            &[],
        );
        assert_eq!(oauth1(&odd), None);
        assert_eq!(
            oauth1(&signed("k", "t", 3)),
            Some(OAuth1 {
                consumer_key: "k".into(),
                token: "t".into()
            })
        );
    }

    /// `n` pages of `per_page` IDs each, as the server's parser reads them:
    /// the items of page `p` are `base + p * per_page ..`.
    fn items(base: u64, per_page: u64) -> Vec<since_id::Item> {
        (0..per_page)
            .map(|i| since_id::Item {
                id: Id(u128::from(base + i)),
                id_text: (base + i).to_string(),
                created_at: None,
                author: None,
            })
            .collect()
    }

    #[test]
    fn ten_thousand_tokens_stay_under_the_bound_and_none_is_kept() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        let mut recorded = 0;
        let mut pollers = HashSet::new();
        for n in 0..10_000u64 {
            let auth = format!("Bearer hostile-token-{n}");
            let ex = get("/api/v1/timelines/public", &[], Some(&auth), &[]);
            let out = book.observe_served(&ex, items(n * 10, 10));
            for r in &out {
                let text = format!("{r:?}");
                assert!(!text.contains("hostile-token"), "{text}");
                match r {
                    Recorded::NewClient(row) => assert!(pollers.insert(row.name.clone())),
                    Recorded::Request(row, _) => {
                        recorded += 1;
                        assert!(row.poller < MAX_POLLERS);
                    }
                }
            }
        }
        assert_eq!(recorded, 10_000, "every request recorded");
        assert_eq!(
            pollers.len(),
            MAX_POLLERS,
            "unique names, 63 and the shared one"
        );
        assert!(pollers.contains(OTHER_CLIENTS));
        let f = book.footprint();
        assert_eq!((f.clients, f.timelines, f.pollers), (63, 63, 64));
        assert!(f.remembered <= MAX_REMEMBERED);
    }

    #[test]
    fn ten_thousand_tag_timelines_of_one_token_are_nine_pollers() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        let mut new = 0;
        for n in 0..10_000 {
            let path = format!("/api/v1/timelines/tag/t{n}");
            let out = book.observe(&get(&path, &[], Some("Bearer one"), &[]));
            new += new_pollers(&out).len();
            assert_eq!(requests(&out).len(), 1);
        }
        assert_eq!(new, MAX_TIMELINES + 1);
        let f = book.footprint();
        assert_eq!((f.clients, f.timelines, f.pollers), (1, MAX_TIMELINES, 9));
    }

    #[test]
    fn many_clients_on_many_timelines_never_pass_64_pollers() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        let mut names = HashSet::new();
        for n in 0..2_000 {
            let auth = format!("Bearer t{}", n % 100);
            let path = format!("/api/v1/timelines/tag/t{}", n / 100);
            for name in new_pollers(&book.observe(&get(&path, &[], Some(&auth), &[]))) {
                assert!(names.insert(name), "poller names are unique");
            }
            let f = book.footprint();
            assert!(f.pollers <= MAX_POLLERS && f.clients < MAX_POLLERS);
            assert!(f.timelines <= MAX_TIMELINES * f.clients);
        }
        assert_eq!(book.footprint().pollers, MAX_POLLERS);
    }

    #[test]
    fn a_megabyte_of_query_is_cut_in_names_and_params() {
        let mut book = ClientBook::new("twitter".parse().unwrap(), HashMap::new());
        let huge = "q".repeat(1 << 20);
        let mut ex = get(
            "/2/tweets/search/recent",
            &[("query", &huge), ("since_id", &huge), ("max_results", "10")],
            Some(&format!("Bearer {huge}")),
            &[],
        );
        ex.response = axum::body::Bytes::from_static(b"{}");
        let out = book.observe(&ex);
        let name = &new_pollers(&out)[0];
        assert!(name.len() < 2 * MAX_LABEL, "{} bytes", name.len());
        let (row, asked) = requests(&out)[0];
        assert!(asked.params.len() < 4 * MAX_PARAM, "{}", asked.params.len());
        assert_eq!(row.request.since_id, None, "not an ID");
        // Another huge query differing at its end is another timeline.
        let mut other = ex.clone();
        other.query[0].1.push('!');
        let (a, b) = (label(&ex), label(&other));
        assert!(a.0 != b.0 && a.1 != b.1, "{} / {}", a.1, b.1);
        let out = book.observe(&other);
        assert_eq!(new_pollers(&out).len(), 1);
        let f = book.footprint();
        assert_eq!((f.clients, f.timelines), (1, 2));
    }

    #[test]
    fn a_flood_keeps_every_record_and_remembers_a_bounded_set() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        let per_page = 1_000u64;
        let pages = (MAX_REMEMBERED as u64 / per_page) * 3;
        let mut first_sightings = 0u64;
        for p in 0..pages {
            let ex = get("/api/v1/timelines/public", &[], Some("Bearer flood"), &[]);
            let out = book.observe_served(&ex, items(p * per_page, per_page));
            let (row, asked) = requests(&out)[0];
            let served = rundb::pages::decode(asked.served.as_ref().unwrap()).unwrap();
            assert_eq!(served.len() as u64, per_page, "no item dropped");
            assert_eq!(row.request.items as u64, per_page);
            first_sightings += row.items.iter().filter(|i| i.first_sighting).count() as u64;
            assert!(book.footprint().remembered <= MAX_REMEMBERED);
        }
        assert_eq!(
            first_sightings,
            pages * per_page,
            "each status written once"
        );
    }

    #[test]
    fn a_named_client_keeps_a_poller_through_a_flood_of_others() {
        let names = HashMap::from([("good-token".to_string(), "good".to_string())]);
        let mut book = ClientBook::new("mastodon".parse().unwrap(), names);
        let public = "/api/v1/timelines/public";
        for n in 0..1_000 {
            let auth = format!("Bearer t{n}");
            book.observe(&get(public, &[], Some(&auth), &[]));
        }
        assert_eq!(book.footprint().pollers, MAX_POLLERS - 1, "one kept for it");
        let out = book.observe(&get(public, &[], Some("Bearer good-token"), &[]));
        assert_eq!(new_pollers(&out), ["good public"]);
        assert_eq!(placed(&out).3, "good");
        // Its next timeline finds no room: shared with the other clients.
        let tag = book.observe(&get(
            "/api/v1/timelines/home",
            &[],
            Some("Bearer good-token"),
            &[],
        ));
        assert_eq!(placed(&tag).3, OTHER_CLIENTS);
        assert_eq!(book.footprint().pollers, MAX_POLLERS);
    }

    #[test]
    fn clients_beyond_the_bound_share_one_poller() {
        let mut book = ClientBook::new("mastodon".parse().unwrap(), HashMap::new());
        let mut new = 0;
        for n in 0..(MAX_POLLERS + 10) {
            let auth = format!("Bearer t{n}");
            let out = book.observe(&get("/api/v1/timelines/public", &[], Some(&auth), &[]));
            new += out
                .iter()
                .filter(|r| matches!(r, Recorded::NewClient(_)))
                .count();
        }
        assert_eq!(new, MAX_POLLERS, "63 named, then one for all the others");
    }
}
