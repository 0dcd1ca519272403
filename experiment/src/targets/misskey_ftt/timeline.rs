//! A timeline read against the real Redis and PostgreSQL: `getMulti`'s
//! pipelined `LRANGE list 0 -1`, `getAndFilterFromDb`'s lookup, the pure
//! decision of `read::decide`, then the `dbFallback` query it asks for.

use super::push::{LOCAL_KEY, home_key};
use super::read::{self, Decision, Path, Request, Switches};
use super::store::{self, Source};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The Redis lists an endpoint reads (misskey-dev/misskey
/// `packages/backend/src/server/api/endpoints/notes/timeline.ts`,
/// `local-timeline.ts`, `hybrid-timeline.ts`: `redisTimelines`, without
/// files or replies).
pub fn redis_keys(source: Source) -> Vec<String> {
    match source {
        Source::Home { me } => vec![home_key(me)],
        Source::Local => vec![LOCAL_KEY.to_string()],
        Source::Hybrid { me } => vec![
            home_key(me),
            LOCAL_KEY.to_string(),
            format!("list:localTimelineWithReplyTo:{me}"),
        ],
    }
}

/// The run-time switches, changeable while the server runs (the admin panel's).
#[derive(Debug)]
pub struct LiveSwitches {
    pub fanout_timeline: AtomicBool,
    pub db_fallback: AtomicBool,
}

impl LiveSwitches {
    pub fn new(s: Switches) -> LiveSwitches {
        LiveSwitches {
            fanout_timeline: AtomicBool::new(s.fanout_timeline),
            db_fallback: AtomicBool::new(s.db_fallback),
        }
    }

    pub fn get(&self) -> Switches {
        Switches {
            fanout_timeline: self.fanout_timeline.load(Ordering::Relaxed),
            db_fallback: self.db_fallback.load(Ordering::Relaxed),
        }
    }
}

/// The connections a read uses.
#[derive(Clone)]
pub struct Reader {
    pub redis: redis::aio::MultiplexedConnection,
    pub pg: Arc<tokio_postgres::Client>,
    pub switches: Arc<LiveSwitches>,
}

/// A page as served, and the path that served it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub ids: Vec<String>,
    pub path: Path,
    pub decision: Decision,
}

impl Reader {
    /// `FanoutTimelineEndpointService.getMiNotes` for one request.
    pub async fn read(&self, source: Source, req: &Request) -> Result<Served, String> {
        let switches = self.switches.get();
        let lists: Vec<Vec<String>> = if switches.fanout_timeline {
            let mut pipe = redis::pipe();
            for key in redis_keys(source) {
                pipe.cmd("LRANGE").arg(key).arg(0).arg(-1);
            }
            let mut conn = self.redis.clone();
            pipe.query_async(&mut conn)
                .await
                .map_err(|e| format!("Redis: {e}"))?
        } else {
            Vec::new()
        };
        let candidates = read::candidates(&lists, req);
        let found: HashSet<String> = if candidates.is_empty() {
            HashSet::new()
        } else {
            store::existing(&self.pg, &candidates)
                .await?
                .into_iter()
                .collect()
        };
        let decision = read::decide(&lists, req, switches, |id| found.contains(id));
        let mut ids = decision.redis_ids.clone();
        if let Some(q) = &decision.db {
            ids.extend(store::page(&self.pg, source, q).await?);
        }
        Ok(Served {
            ids,
            path: decision.path,
            decision,
        })
    }
}
