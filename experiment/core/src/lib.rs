//! # since_id: polling a timeline of k-sorted IDs without losing items
//!
//! Timelines (X, Mastodon, Misskey, Discord) and event tables are ordered by
//! timestamp-prefixed IDs that are only *k-sorted*: an item can become visible after one
//! with a higher ID, and a poller asking for "id > the highest ID seen" skips it forever.
//! This crate is the pure core of a poller that does not: no I/O, no clock reads, no async
//! runtime. You pass in the time and the responses; it tells you what to send next.
//!
//! - [`id`]: ID layouts (Snowflake, Misskey, ULID, UUIDv7): [`Layout::ts_ms`],
//!   [`Layout::min_id_at`].
//! - [`policy`]: cursor policies (`naive`, `compensated:k=1s`, `audit:...`, `adaptive`).
//! - [`strategy`]: a policy as a state machine (ticks, audits, adaptive's estimates).
//! - [`poller`]: one poller as a state machine: the next request from the last response.
//! - [`schedule`]: when each request is due: cadence, backoff, `Retry-After`, drain.
//! - [`time`]: ms since the Unix epoch and humantime durations, parsed and printed.
//!
//! Features: `serde` (serialise [`Id`]), `rfc3339` (RFC 3339 in [`time`], via chrono).
//!
//! ## The core in your own poller
//!
//! ```
//! use since_id::{CursorPolicy, Item, Layout, Poller};
//!
//! let layout: Layout = "mastodon".parse().unwrap();
//! let policy: CursorPolicy = "compensated:k=2s".parse().unwrap();
//! let mut poller = Poller::new("mine", policy, layout.clone(), 40, 10);
//!
//! // At each tick: the request to send (the first one has no since_id).
//! let now_ms = 1_574_810_861_000; // 2019-11-26T23:27:41Z, from your clock
//! let request = poller.tick(now_ms, false).unwrap();
//! assert_eq!(request.since, None);
//!
//! // Its response, newest first, goes back in with the time it came back; the
//! // outcome says what was new.
//! let id = layout.parse("103206804533200177").unwrap();
//! let item = Item { id, id_text: layout.format(id), created_at: None, author: None };
//! let outcome = poller.on_page(vec![item], now_ms + 20);
//! assert_eq!(outcome.new_items, 1);
//! assert!(outcome.next.is_none()); // a short page: the cycle is over
//!
//! // The next request's since_id is held 2 s before the last request was sent, minus
//! // one, so statuses up to 2 s late are not skipped.
//! let next = poller.tick(now_ms + 1000, false).unwrap();
//! assert_eq!(next.since, Some(layout.min_id_at(now_ms - 2000).pred()));
//! ```
#![warn(missing_docs)]

pub mod foreign;
pub mod gaps;
pub mod id;
pub mod keyset;
pub mod partitions;
pub mod policy;
pub mod poller;
pub mod schedule;
pub mod seed;
pub mod snowflake;
pub mod strategy;
pub mod time;

pub use id::{Id, IdError, Layout};
pub use policy::{CursorPolicy, PolicyError, PolicyErrorKind};
pub use poller::{Item, Outcome, PageRequest, Poller};
pub use schedule::{CycleStart, Schedule};
pub use strategy::PolicyState;
pub use time::{DurationError, TimeError};
