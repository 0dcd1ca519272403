//! A timeline read against the real Redis and PostgreSQL: `getMulti`'s
//! pipelined `LRANGE list 0 -1`, `getAndFilterFromDb`'s lookup, the pure
//! decision of `read::decide`, then the `dbFallback` query it asks for.

use super::push::{LOCAL_KEY, home_key};
use super::read::{self, Decision, Path, Request, Switches, Window};
use super::store::{self, Source};
use crate::sim::sync::lock;
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

/// The Redis lists an endpoint reads for `req`: with `withFiles`, the
/// with-files lists (the same endpoints' `redisTimelines: ps.withFiles ?
/// [homeTimelineWithFiles:<me>] : ...`, and `localTimelineWithFiles` on the
/// local and hybrid timelines), else [`redis_keys`].
pub fn redis_keys_of(source: Source, req: &Request) -> Vec<String> {
    if !req.with_files {
        return redis_keys(source);
    }
    let home = |me: i32| format!("list:homeTimelineWithFiles:{me}");
    let local = || "list:localTimelineWithFiles".to_string();
    match source {
        Source::Home { me } => vec![home(me)],
        Source::Local => vec![local()],
        Source::Hybrid { me } => vec![home(me), local()],
    }
}

/// The run-time switches, changeable while the server runs (the admin panel's),
/// and the spans of a run when FTT is off (`--ftt-off`).
#[derive(Debug)]
pub struct LiveSwitches {
    pub fanout_timeline: AtomicBool,
    pub db_fallback: AtomicBool,
    /// `--ftt-off` windows, and the run's start they count from (ms).
    off: Vec<Window>,
    start_ms: i64,
}

impl LiveSwitches {
    pub fn new(s: Switches) -> LiveSwitches {
        LiveSwitches::scheduled(s, Vec::new(), 0)
    }

    /// Switches whose FTT is also off in each of `off`, counted from `start_ms`.
    pub fn scheduled(s: Switches, off: Vec<Window>, start_ms: i64) -> LiveSwitches {
        LiveSwitches {
            fanout_timeline: AtomicBool::new(s.fanout_timeline),
            db_fallback: AtomicBool::new(s.db_fallback),
            off,
            start_ms,
        }
    }

    /// The switches now.
    pub fn get(&self) -> Switches {
        self.at(crate::clock::now_ms())
    }

    /// The switches at `now_ms`.
    pub fn at(&self, now_ms: i64) -> Switches {
        Switches {
            fanout_timeline: read::fanout_on_at(
                self.fanout_timeline.load(Ordering::Relaxed),
                &self.off,
                now_ms - self.start_ms,
            ),
            db_fallback: self.db_fallback.load(Ordering::Relaxed),
        }
    }
}

/// Whether a creator pushes a note committed at `committed_ms`: the
/// `enableFanoutTimeline` check at the top of `pushToTl`.
pub trait PushGate: Send + Sync + 'static {
    fn pushes_at(&self, committed_ms: i64) -> bool;
}

impl PushGate for Arc<AtomicBool> {
    fn pushes_at(&self, _committed_ms: i64) -> bool {
        self.load(Ordering::Relaxed)
    }
}

impl PushGate for Arc<LiveSwitches> {
    fn pushes_at(&self, committed_ms: i64) -> bool {
        self.at(committed_ms).fanout_timeline
    }
}

/// Where a creator or a read takes its Redis connection from: a fixed one,
/// or a [`RedisSlot`] that `--redis-restart-at` refills. The number is the
/// connection's generation (0 for a fixed one).
pub trait RedisSource: Clone + Send + Sync + 'static {
    fn conn(&self) -> (u64, redis::aio::MultiplexedConnection);
    /// A Redis command on the connection of generation `generation` failed.
    fn failed(&self, generation: u64);
}

impl RedisSource for redis::aio::MultiplexedConnection {
    fn conn(&self) -> (u64, redis::aio::MultiplexedConnection) {
        (0, self.clone())
    }

    fn failed(&self, _generation: u64) {}
}

/// The current connection to a Redis that a run restarts on purpose
/// (`--redis-restart-at`), and the failures those restarts caused: a
/// command fails by the restart when it was sent on a connection older
/// than the current one, or while a restart is under way. Such failures
/// are counted as any failure is, and told apart from a crash's.
#[derive(Clone)]
pub struct RedisSlot {
    inner: Arc<SlotInner>,
}

struct SlotInner {
    current: std::sync::Mutex<(u64, redis::aio::MultiplexedConnection)>,
    restarting: AtomicBool,
    planned_failures: std::sync::atomic::AtomicU64,
}

impl RedisSlot {
    pub fn new(conn: redis::aio::MultiplexedConnection) -> RedisSlot {
        RedisSlot {
            inner: Arc::new(SlotInner {
                current: std::sync::Mutex::new((0, conn)),
                restarting: AtomicBool::new(false),
                planned_failures: Default::default(),
            }),
        }
    }

    /// A restart begins: failures from here on are the restart's.
    pub fn restart_begins(&self) {
        self.inner.restarting.store(true, Ordering::SeqCst);
    }

    /// The restarted server's connection: the next generation.
    pub fn restarted(&self, conn: redis::aio::MultiplexedConnection) {
        let mut current = lock(&self.inner.current);
        *current = (current.0 + 1, conn);
        drop(current);
        self.inner.restarting.store(false, Ordering::SeqCst);
    }

    /// Failures the planned restarts caused (reads and pushes).
    pub fn planned_failures(&self) -> u64 {
        self.inner.planned_failures.load(Ordering::SeqCst)
    }
}

impl RedisSource for RedisSlot {
    fn conn(&self) -> (u64, redis::aio::MultiplexedConnection) {
        lock(&self.inner.current).clone()
    }

    fn failed(&self, generation: u64) {
        let current = lock(&self.inner.current).0;
        if generation < current || self.inner.restarting.load(Ordering::SeqCst) {
            self.inner.planned_failures.fetch_add(1, Ordering::SeqCst);
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
            for key in redis_keys_of(source, req) {
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
