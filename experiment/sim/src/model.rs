//! The leaky timeline as a pure, seeded model: which statuses exist, with which
//! IDs, and when each one is visible to a reader.
//!
//! A status is born at an *event time* `t` drawn from a Poisson process (with
//! optional bursts). At that moment the model decides everything about it, so
//! that the truth is complete when it streams out: the generator that IDs it
//! and that generator's clock offset (hence the ID time), the delay until it
//! becomes visible (the commit, the fan-out push, a rare heavy tail), and
//! whether and when it is deleted. Remote statuses carry a `published` time
//! before `t`; some dialects ID them at that time (Misskey always, Mastodon for
//! fetched statuses), which is how they land far below a poller's cursor.
//!
//! Why it is shaped this way:
//! - No I/O, no clock: time is passed to [`Simulator::advance`], so the same
//!   model runs in real time behind the HTTP server and in virtual time in tests.
//! - *Chunking invariance*: every random draw is made in event order from one
//!   ChaCha8 stream, and nothing drawn depends on how far `advance` was asked to
//!   go; `advance(t1); advance(t2)` yields exactly the statuses of `advance(t2)`.
//! - *Unique IDs*: each generator owns a disjoint part of the ID's non-time bits
//!   (Snowflake worker bits, an aidx node, or a slice of Mastodon's sequence) and
//!   numbers IDs within each tick like Snowflake's sequence, moving to the next
//!   tick when a tick's sequence is used up.
//! - *Bounded memory*: the model keeps (a) statuses not yet visible (a heap of
//!   pending events), (b) visible statuses made visible less than
//!   `retention_ms` ago, at most `max_items` of them, in a `BTreeMap` by ID,
//!   (c) per generator the sequence numbers of recent ticks (those a new ID can
//!   still use: `id_horizon_ms` for live generators, `backdate_max_ms` for the
//!   generator of backdated IDs), and (d) the truth not yet taken (or none, with
//!   [`Simulator::set_truth_recording`]). Older statuses are evicted: the APIs
//!   being modelled serve a bounded window too (Twitter's 800 home tweets,
//!   Mastodon's 400-item feeds). Queries are chunk-invariant except when the
//!   `max_items` cap evicts (the cap is applied at each `advance`).

pub use super::profile::SimConfig;
use super::profile::{is_snowflake22, max_generators};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp1, StandardNormal};
use serde::Serialize;
use since_id::id::{Id, Layout};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, LazyLock};

/// Everything known about one status: what the truth table records.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimStatus {
    /// Serialized as the exact integer (serde_json writes u128 digits).
    #[serde(serialize_with = "serialize_id")]
    pub id: Id,
    /// The time encoded in the ID (`layout.ts_ms(id) == id_time_ms`).
    pub id_time_ms: i64,
    /// When the author posted it (for remote statuses: their `published` time).
    pub posted_at_ms: i64,
    /// From this instant on, queries return it.
    pub visible_at_ms: i64,
    /// From this instant on, queries no longer return it.
    pub deleted_at_ms: Option<i64>,
    /// `genN` (Snowflake worker N), `local`, `remote` or `remote-fetched`:
    /// shared, since a page of 200 makes 200 of them.
    #[serde(serialize_with = "serialize_origin")]
    pub origin: Arc<str>,
    pub author: u32,
}

impl SimStatus {
    /// Whether the status was posted on the simulated server itself.
    pub fn is_local(&self) -> bool {
        !self.origin.starts_with("remote")
    }
}

/// A dialect-free page request. Both bounds are exclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    pub after: Option<Id>,
    pub before: Option<Id>,
    pub limit: usize,
    /// false: the newest `limit` in descending order; true: the oldest `limit`
    /// above `after`, in ascending order.
    pub oldest_first: bool,
}

/// How a status got its ID and where it came from (stored compactly).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Origin {
    /// Posted here, labelled with the generator (Twitter's workers).
    Generator(u16),
    Local,
    Remote,
    RemoteFetched,
}

impl Origin {
    /// The label, shared: made once per origin, not once per status served.
    fn label(self) -> Arc<str> {
        static LABELS: LazyLock<[Arc<str>; 3]> =
            LazyLock::new(|| ["local".into(), "remote".into(), "remote-fetched".into()]);
        /// Snowflake's 10 bits of worker.
        static GENERATORS: LazyLock<Vec<Arc<str>>> =
            LazyLock::new(|| (0..1024).map(|g| format!("gen{g}").into()).collect());
        match self {
            Origin::Generator(g) => GENERATORS
                .get(usize::from(g))
                .cloned()
                .unwrap_or_else(|| format!("gen{g}").into()),
            Origin::Local => LABELS[0].clone(),
            Origin::Remote => LABELS[1].clone(),
            Origin::RemoteFetched => LABELS[2].clone(),
        }
    }
}

/// A status as the model stores it: no heap allocation per status.
#[derive(Copy, Clone, Debug)]
struct Stored {
    id: Id,
    id_time_ms: i64,
    posted_at_ms: i64,
    visible_at_ms: i64,
    deleted_at_ms: Option<i64>,
    origin: Origin,
    author: u32,
}

impl Stored {
    fn to_status(self) -> SimStatus {
        SimStatus {
            id: self.id,
            id_time_ms: self.id_time_ms,
            posted_at_ms: self.posted_at_ms,
            visible_at_ms: self.visible_at_ms,
            deleted_at_ms: self.deleted_at_ms,
            origin: self.origin.label(),
            author: self.author,
        }
    }
}

/// A pending change of the visible set.
#[derive(Debug)]
enum Change {
    /// The pending status in this slot of `Simulator::waiting` becomes visible.
    /// (Statuses wait in a slab, not in the heap: small heap entries sift faster.)
    Appear(u32),
    Vanish(Id),
}

/// A change at a time; ties are broken by creation order so that processing
/// is deterministic.
#[derive(Debug)]
struct Event {
    at_ms: i64,
    order: u64,
    change: Change,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at_ms, self.order).cmp(&(other.at_ms, other.order))
    }
}

/// One ID generator: a disjoint slice of the non-time bits and a per-tick sequence.
#[derive(Debug)]
struct Generator {
    /// Added to every ID (worker bits, aidx node, or a sequence slice's base).
    part: u128,
    /// Number of sequence values per tick.
    seq_space: u128,
    /// Next sequence number of each recent tick.
    next_seq: BTreeMap<i64, u128>,
    /// Ticks below this were forgotten; an ID asked for below it is moved up to it.
    floor_tick: i64,
    /// Its clock's offset from true time, ms (live generators only).
    offset_ms: f64,
}

impl Generator {
    /// A unique ID at (or, when the tick's sequence is used up, just after) `tick_ms`.
    fn issue(&mut self, layout: &Layout, tick_ms: i64) -> Id {
        // Sequences are kept per tick of the layout's time field (10 ms for
        // Sonyflake), keyed by the tick's first ms.
        let unit = layout.unit_ms().clamp(1, i64::MAX as u64) as i64;
        let mut tick = layout.ts_ms(layout.min_id_at(tick_ms.max(self.floor_tick)));
        loop {
            let seq = self.next_seq.entry(tick).or_insert(0);
            if *seq < self.seq_space {
                let id = layout.min_id_at(tick).0 + self.part + *seq;
                *seq += 1;
                return Id(id);
            }
            tick = tick.saturating_add(unit);
        }
    }

    /// Forgets the ticks below `floor_tick` (IDs can no longer be issued there).
    fn forget_below(&mut self, floor_tick: i64) {
        // Splitting is O(log n); doing it only when the floor moved by a second keeps it cheap.
        if floor_tick > self.floor_tick + 1000 {
            self.next_seq = self.next_seq.split_off(&floor_tick);
            self.floor_tick = floor_tick;
        }
    }
}

/// The seeded timeline. See the module docs.
pub struct Simulator {
    config: SimConfig,
    layout: Layout,
    rng: ChaCha8Rng,
    now_ms: i64,
    /// Event time of the next status, in fractional ms (a Poisson process).
    next_post_at: f64,
    /// Start of the next burst, and the end of the current one (if in one).
    next_burst_at: f64,
    burst_ends_at: Option<f64>,
    /// Next clock step of some live generator.
    next_step_at: f64,
    live: Vec<Generator>,
    /// IDs statuses at their `published` time (Misskey remotes, Mastodon fetches).
    backdated: Generator,
    pending: BinaryHeap<Reverse<Event>>,
    event_order: u64,
    /// Statuses not yet visible, by slot; free slots are reused.
    waiting: Vec<Stored>,
    free_slots: Vec<u32>,
    visible: BTreeMap<Id, Stored>,
    /// Visible statuses in the order they appeared, for eviction.
    appeared: VecDeque<(i64, Id)>,
    truth: Vec<SimStatus>,
    record_truth: bool,
    /// The authors the reader follows: its home timeline ([`home_follows`]).
    follows: Arc<BTreeSet<u32>>,
}

const MS_PER_HOUR: f64 = 3_600_000.0;

/// The history a simulated timeline holds when a run or `serve` starts
/// (`--backlog`): five minutes is more than a first page at every profile's
/// rate and page size, so pollers and clients meet a full timeline at once.
pub const DEFAULT_BACKLOG_MS: u64 = 5 * 60_000;

impl Simulator {
    /// A simulator whose timeline starts empty at `start_ms`. The config is
    /// expected to be validated ([`SimConfig::validate`]); out-of-range values
    /// are clamped rather than panicking.
    pub fn new(config: SimConfig, seed: u64, start_ms: i64) -> Simulator {
        let layout = config.layout();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let generators = config.generators.clamp(1, max_generators(&layout));
        let slots = generator_slots(&layout, generators);
        let mut live: Vec<Generator> = slots[..generators as usize]
            .iter()
            .map(|&(part, seq_space)| Generator {
                part,
                seq_space,
                next_seq: BTreeMap::new(),
                floor_tick: i64::MIN,
                offset_ms: 0.0,
            })
            .collect();
        // Initial clock offsets are drawn first, in generator order.
        for g in &mut live {
            g.offset_ms = normal(&mut rng, config.clock_offset_sd_ms);
        }
        let (part, seq_space) = slots[generators as usize];
        let backdated = Generator {
            part,
            seq_space,
            next_seq: BTreeMap::new(),
            floor_tick: i64::MIN,
            offset_ms: 0.0,
        };
        let start = start_ms as f64;
        let mut sim = Simulator {
            layout,
            rng,
            now_ms: start_ms,
            next_post_at: f64::INFINITY,
            next_burst_at: f64::INFINITY,
            burst_ends_at: None,
            next_step_at: f64::INFINITY,
            live,
            backdated,
            pending: BinaryHeap::new(),
            event_order: 0,
            waiting: Vec::new(),
            free_slots: Vec::new(),
            visible: BTreeMap::new(),
            appeared: VecDeque::new(),
            truth: Vec::new(),
            record_truth: true,
            follows: Arc::new(home_follows(seed, config.authors)),
            config,
        };
        sim.next_burst_at = start + sim.exp_ms(sim.config.burst_every_s * 1000.0);
        let step_rate_per_ms = sim.config.clock_step_per_hour * sim.live.len() as f64 / MS_PER_HOUR;
        sim.next_step_at = start + sim.exp_ms(1.0 / step_rate_per_ms);
        sim.next_post_at = sim.next_event_after(start);
        sim
    }

    /// A simulator whose timeline already holds `backlog_ms` of history at
    /// `start_ms`, as every real server does: it starts empty that long
    /// before and runs up to `start_ms`. Its truth includes the backlog.
    pub fn with_backlog(config: SimConfig, seed: u64, start_ms: i64, backlog_ms: u64) -> Simulator {
        let mut sim = Simulator::new(config, seed, start_ms.saturating_sub_unsigned(backlog_ms));
        sim.advance(start_ms);
        sim
    }

    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The authors whose statuses the reader's home timeline serves.
    pub fn follows(&self) -> Arc<BTreeSet<u32>> {
        self.follows.clone()
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Whether [`Simulator::take_truth`] collects statuses (default on). Turn it
    /// off when nobody takes the truth, or it grows without bound.
    pub fn set_truth_recording(&mut self, on: bool) {
        self.record_truth = on;
        if !on {
            self.truth = Vec::new();
        }
    }

    /// Number of statuses currently visible (and retained).
    pub fn visible_len(&self) -> usize {
        self.visible.len()
    }

    /// Produces everything posted, made visible or deleted up to `now_ms`.
    /// An earlier time than the current one is a no-op: the model never goes back.
    pub fn advance(&mut self, now_ms: i64) {
        if now_ms < self.now_ms {
            return;
        }
        self.now_ms = now_ms;
        while self.next_post_at.floor() <= now_ms as f64 {
            let t = self.next_post_at;
            self.post(t);
            self.next_post_at = self.next_event_after(t);
        }
        while let Some(Reverse(event)) = self.pending.peek() {
            if event.at_ms > now_ms {
                break;
            }
            let Some(Reverse(event)) = self.pending.pop() else {
                break;
            };
            match event.change {
                Change::Appear(slot) => {
                    self.free_slots.push(slot);
                    let status = self.waiting[slot as usize];
                    self.appeared.push_back((status.visible_at_ms, status.id));
                    self.visible.insert(status.id, status);
                }
                Change::Vanish(id) => {
                    self.visible.remove(&id);
                }
            }
        }
        self.evict();
    }

    /// Every status posted since the last call, in posting order.
    pub fn take_truth(&mut self) -> Vec<SimStatus> {
        // The next batch is likely as large: reserve it instead of regrowing.
        let capacity = if self.record_truth {
            self.truth.len()
        } else {
            0
        };
        std::mem::replace(&mut self.truth, Vec::with_capacity(capacity))
    }

    /// The visible statuses with `after < id < before`: see [`Query`].
    pub fn query(&self, q: &Query) -> Vec<SimStatus> {
        self.query_filtered(q, |_| true)
    }

    /// Like [`Simulator::query`], counting only statuses that pass `keep`
    /// (e.g. Mastodon's `local=true`).
    pub fn query_filtered(&self, q: &Query, keep: impl Fn(&SimStatus) -> bool) -> Vec<SimStatus> {
        let lower = q.after.map_or(Bound::Unbounded, Bound::Excluded);
        let upper = q.before.map_or(Bound::Unbounded, Bound::Excluded);
        // BTreeMap::range panics on an empty or inverted range; such a query is simply empty.
        if let (Some(a), Some(b)) = (q.after, q.before)
            && a.0.saturating_add(1) >= b.0
        {
            return Vec::new();
        }
        let range = self
            .visible
            .range((lower, upper))
            .map(|(_, s)| s.to_status());
        if q.oldest_first {
            range.filter(|s| keep(s)).take(q.limit).collect()
        } else {
            range.rev().filter(|s| keep(s)).take(q.limit).collect()
        }
    }

    /// Test support: makes a status visible at once, bypassing the process.
    /// Its ID must be unique; it is not part of the truth.
    pub fn inject(&mut self, status: SimStatus) {
        let origin = match &*status.origin {
            "remote" => Origin::Remote,
            "remote-fetched" => Origin::RemoteFetched,
            "local" => Origin::Local,
            other => other
                .strip_prefix("gen")
                .and_then(|g| g.parse().ok())
                .map_or(Origin::Local, Origin::Generator),
        };
        let stored = Stored {
            id: status.id,
            id_time_ms: status.id_time_ms,
            posted_at_ms: status.posted_at_ms,
            visible_at_ms: status.visible_at_ms,
            deleted_at_ms: status.deleted_at_ms,
            origin,
            author: status.author,
        };
        if status.visible_at_ms <= self.now_ms {
            self.appeared.push_back((self.now_ms, status.id));
            self.visible.insert(status.id, stored);
        } else {
            self.schedule_appearance(stored);
        }
        if let Some(d) = status.deleted_at_ms {
            self.schedule(d, Change::Vanish(status.id));
        }
    }

    /// Test support: removes a visible status at once (a deletion).
    pub fn remove(&mut self, id: Id) {
        self.visible.remove(&id);
    }

    fn schedule(&mut self, at_ms: i64, change: Change) {
        self.event_order += 1;
        self.pending.push(Reverse(Event {
            at_ms,
            order: self.event_order,
            change,
        }));
    }

    fn schedule_appearance(&mut self, status: Stored) {
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.waiting[slot as usize] = status;
                slot
            }
            None => {
                self.waiting.push(status);
                (self.waiting.len() - 1) as u32
            }
        };
        self.schedule(status.visible_at_ms, Change::Appear(slot));
    }

    fn evict(&mut self) {
        let oldest_kept = self
            .now_ms
            .saturating_sub(self.config.retention_ms.min(i64::MAX as u64) as i64);
        while let Some(&(appeared_at, id)) = self.appeared.front() {
            let too_old = appeared_at < oldest_kept;
            let too_many = self.visible.len() > self.config.max_items;
            if !(too_old || too_many) {
                break;
            }
            self.appeared.pop_front();
            self.visible.remove(&id);
        }
    }

    /// Exponential waiting time with the given mean (infinite for a mean of
    /// infinity or NaN; zero for a non-positive mean is avoided by the callers).
    fn exp_ms(&mut self, mean_ms: f64) -> f64 {
        let e: f64 = Exp1.sample(&mut self.rng);
        if mean_ms.is_finite() && mean_ms > 0.0 {
            e * mean_ms
        } else {
            f64::INFINITY
        }
    }

    fn lognormal_ms(&mut self, median_ms: f64, sigma: f64) -> f64 {
        let z: f64 = StandardNormal.sample(&mut self.rng);
        (median_ms.max(0.0)) * (sigma.max(0.0) * z).exp()
    }

    /// The next event time of the (bursty) Poisson process after `t`: walks
    /// one unit of exponential "work" through the piecewise-constant rate.
    fn next_event_after(&mut self, mut t: f64) -> f64 {
        let base = self.config.rate_per_s.max(0.0) / 1000.0; // per ms
        if base <= 0.0 || !base.is_finite() {
            return f64::INFINITY;
        }
        let mut work: f64 = Exp1.sample(&mut self.rng);
        loop {
            let (rate, change_at) = match self.burst_ends_at {
                Some(end) => (base * self.config.burst_factor.max(0.0), end),
                None => (base, self.next_burst_at),
            };
            let room = (change_at - t) * rate;
            if rate > 0.0 && room >= work {
                return t + work / rate;
            }
            if !change_at.is_finite() {
                return f64::INFINITY;
            }
            work -= room.max(0.0);
            t = change_at;
            match self.burst_ends_at {
                Some(_) => {
                    self.burst_ends_at = None;
                    self.next_burst_at = t + self.exp_ms(self.config.burst_every_s * 1000.0);
                }
                None => {
                    self.burst_ends_at = Some(t + self.config.burst_len_ms as f64);
                }
            }
        }
    }

    /// Decides everything about the status whose event time is `t`.
    fn post(&mut self, t: f64) {
        let event_ms = t.floor() as i64;
        // Clock steps that happened before this status.
        let step_rate_per_ms =
            self.config.clock_step_per_hour * self.live.len() as f64 / MS_PER_HOUR;
        while self.next_step_at <= t {
            let g = self.rng.random_range(0..self.live.len());
            let step = normal(&mut self.rng, self.config.clock_step_sd_ms);
            self.live[g].offset_ms += step;
            self.next_step_at += self.exp_ms(1.0 / step_rate_per_ms);
        }
        let cfg = &self.config;
        let (remote_fraction, fetched_fraction) = (cfg.remote_fraction, cfg.fetched_fraction);
        let remote = self.rng.random::<f64>() < remote_fraction;
        let fetched = remote && self.rng.random::<f64>() < fetched_fraction;
        let author = self.rng.random_range(0..self.config.authors.max(1));
        let g = self.rng.random_range(0..self.live.len());

        let (origin, posted_at_ms, id) = if !remote {
            let origin = if self.config.label_by_generator {
                Origin::Generator(g as u16)
            } else {
                Origin::Local
            };
            let tick = (t + self.live[g].offset_ms).floor() as i64;
            (origin, event_ms, self.issue_live(g, tick, event_ms))
        } else if fetched {
            // Mastodon's id_at(published): whole seconds plus a random 0-999 ms.
            let age = self
                .lognormal_ms(
                    self.config.fetched_age_median_ms,
                    self.config.fetched_age_sigma,
                )
                .min(self.config.backdate_max_ms as f64);
            let published = (t - age).floor() as i64;
            let tick = published.div_euclid(1000) * 1000 + self.rng.random_range(0..1000);
            (
                Origin::RemoteFetched,
                published,
                self.issue_backdated(tick, event_ms),
            )
        } else {
            let delay = self
                .lognormal_ms(
                    self.config.federation_median_ms,
                    self.config.federation_sigma,
                )
                .min(self.config.backdate_max_ms as f64);
            let published = (t - delay).floor() as i64;
            let id = if self.config.remote_id_at_published {
                self.issue_backdated(published, event_ms)
            } else {
                let tick = (t + self.live[g].offset_ms).floor() as i64;
                self.issue_live(g, tick, event_ms)
            };
            (Origin::Remote, published, id)
        };

        // Visibility: the body (commit) plus, rarely, a heavy tail, plus the push.
        let mut delay = self.lognormal_ms(self.config.delay_median_ms, self.config.delay_sigma);
        if self.rng.random::<f64>() < self.config.tail_probability {
            let u: f64 = self.rng.random::<f64>();
            let pareto = self.config.tail_min_ms * (1.0 - u).powf(-1.0 / self.config.tail_alpha);
            delay += pareto.min(self.config.tail_max_ms);
        }
        if self.config.push_delay_mean_ms > 0.0 {
            delay += self.exp_ms(self.config.push_delay_mean_ms);
        }
        let visible_at_ms = event_ms + delay.max(0.0).round() as i64;
        let deleted_at_ms = if self.rng.random::<f64>() < self.config.delete_probability {
            let after = self.exp_ms(self.config.delete_after_mean_ms).max(1.0);
            Some(visible_at_ms + after.min(1e15) as i64)
        } else {
            None
        };

        let stored = Stored {
            id,
            id_time_ms: self.layout.ts_ms(id),
            posted_at_ms,
            visible_at_ms,
            deleted_at_ms,
            origin,
            author,
        };
        if self.record_truth {
            self.truth.push(stored.to_status());
        }
        self.schedule_appearance(stored);
        if let Some(d) = deleted_at_ms {
            self.schedule(d, Change::Vanish(id));
        }
    }

    fn issue_live(&mut self, g: usize, tick_ms: i64, event_ms: i64) -> Id {
        let horizon = self.config.id_horizon_ms.min(i64::MAX as u64 / 2) as i64;
        let generator = &mut self.live[g];
        generator.forget_below(event_ms.saturating_sub(horizon));
        generator.issue(&self.layout, tick_ms)
    }

    fn issue_backdated(&mut self, tick_ms: i64, event_ms: i64) -> Id {
        // A backdated tick is at least event - backdate_max - 1 s (the 0-999 ms of id_at).
        let horizon = self.config.backdate_max_ms.min(i64::MAX as u64 / 4) as i64 + 2000;
        self.backdated
            .forget_below(event_ms.saturating_sub(horizon));
        self.backdated.issue(&self.layout, tick_ms)
    }
}

fn serialize_origin<S: serde::Serializer>(origin: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(origin)
}

fn serialize_id<S: serde::Serializer>(id: &Id, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u128(id.0)
}

/// The reader's follow set, which its home timeline serves: each author in
/// with probability 1/4, drawn from the seed by its own hash (splitmix64),
/// so the timeline's random stream is untouched; never empty.
pub fn home_follows(seed: u64, authors: u32) -> BTreeSet<u32> {
    let splitmix = since_id::seed::splitmix64;
    let mut set: BTreeSet<u32> = (0..authors.max(1))
        .filter(|&a| splitmix(seed ^ splitmix(u64::from(a))).is_multiple_of(4))
        .collect();
    if set.is_empty() {
        set.insert(0);
    }
    set
}

fn normal(rng: &mut ChaCha8Rng, sd: f64) -> f64 {
    let z: f64 = StandardNormal.sample(rng);
    if sd.is_finite() { z * sd.max(0.0) } else { 0.0 }
}

/// `(part, seq_space)` for `generators` live generators plus one backdated one.
fn generator_slots(layout: &Layout, generators: u32) -> Vec<(u128, u128)> {
    let n = generators as u128 + 1;
    if is_snowflake22(layout) {
        // (ts << 22) | (worker << 12) | seq, as in Twitter's IdWorker.
        (0..n).map(|w| (w << 12, 4096)).collect()
    } else if layout.name() == "misskey-aidx" {
        // time(8) + node(4) + counter(4) base36: each process has its own node.
        let node_space = 36u128.pow(4);
        (0..n)
            .map(|i| (((i * 7919 + 1296) % node_space) * node_space, node_space))
            .collect()
    } else {
        // No worker bits (Mastodon: 16 bits of sequence): disjoint slices of the sequence.
        let slice = (layout.multiplier() / n).max(1);
        (0..n).map(|i| (i * slice, slice)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    const START: i64 = 1_700_000_000_000;

    fn profile(name: &str) -> SimConfig {
        SimConfig::profile(name).unwrap()
    }

    fn run(config: SimConfig, seed: u64, until: i64) -> (Simulator, Vec<SimStatus>) {
        let mut sim = Simulator::new(config, seed, START);
        sim.advance(START + until);
        let truth = sim.take_truth();
        (sim, truth)
    }

    fn status(id: u128, origin: &str) -> SimStatus {
        SimStatus {
            id: Id(id),
            id_time_ms: 0,
            posted_at_ms: 0,
            visible_at_ms: 0,
            deleted_at_ms: None,
            origin: origin.into(),
            author: 1,
        }
    }

    fn ids(page: &[SimStatus]) -> Vec<u128> {
        page.iter().map(|s| s.id.0).collect()
    }

    #[test]
    fn ids_are_unique_and_decode_to_their_time() {
        for name in SimConfig::PROFILES {
            let mut config = profile(name);
            // Dense enough that many statuses share a millisecond and a generator.
            config.rate_per_s = 400.0;
            let (sim, truth) = run(config, 7, 120_000);
            assert!(truth.len() > 40_000, "{name}: {}", truth.len());
            let layout = sim.layout();
            let mut seen = HashSet::new();
            for s in &truth {
                assert!(seen.insert(s.id), "{name}: duplicate {:?}", s.id);
                assert_eq!(layout.ts_ms(s.id), s.id_time_ms, "{name}");
                assert_eq!(layout.parse(&layout.format(s.id)).unwrap(), s.id, "{name}");
                assert!(s.visible_at_ms >= s.posted_at_ms, "{name}: {s:?}");
                assert!(
                    s.deleted_at_ms.is_none_or(|d| d > s.visible_at_ms),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn other_layouts_get_unique_decodable_ids_too() {
        for layout in [
            "discord",
            "sonyflake",
            "instagram",
            "misskey-aid",
            "ulid",
            "uuidv7",
        ] {
            let mut config = profile("twitter");
            config.layout = layout.into();
            config.rate_per_s = 2000.0;
            config.generators = config.generators.min(max_generators(&config.layout()));
            config.validate().unwrap();
            let (sim, truth) = run(config, 2, 5_000);
            let unique: HashSet<Id> = truth.iter().map(|s| s.id).collect();
            assert_eq!(unique.len(), truth.len(), "{layout}");
            for s in &truth {
                assert_eq!(sim.layout().ts_ms(s.id), s.id_time_ms, "{layout}");
            }
        }
        let mut config = profile("twitter");
        config.layout = "custom:epoch=0,shift=4".into();
        assert!(config.validate().unwrap_err().contains("too few"));
    }

    #[test]
    fn sequence_overflow_moves_to_the_next_tick_and_stays_unique() {
        let layout = Layout::twitter();
        let mut generator = Generator {
            part: 3 << 12,
            seq_space: 4,
            next_seq: BTreeMap::new(),
            floor_tick: i64::MIN,
            offset_ms: 0.0,
        };
        let t = START;
        let issued: Vec<Id> = (0..10).map(|_| generator.issue(&layout, t)).collect();
        let times: Vec<i64> = issued.iter().map(|&id| layout.ts_ms(id) - t).collect();
        assert_eq!(times, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]);
        assert_eq!(issued[0], Id(layout.min_id_at(t).0 + (3 << 12)));
        // The next tick's own IDs continue after the overflowed ones.
        // Tick t+1 is full, so an ID asked for at t+1 takes tick t+2's next sequence.
        assert_eq!(
            generator.issue(&layout, t + 1),
            Id(layout.min_id_at(t + 2).0 + (3 << 12) + 2)
        );
        let unique: HashSet<Id> = issued.iter().copied().collect();
        assert_eq!(unique.len(), issued.len());
        // Below the forgotten floor, IDs move up to it instead of reusing sequences.
        generator.forget_below(t + 5000);
        assert_eq!(layout.ts_ms(generator.issue(&layout, t)), t + 5000);
    }

    /// Twitter: IDs are k-sorted as documented: ID time within 5 sd of the
    /// clock offset from the posted time (no clock steps here), and visible
    /// within 1 s of the ID time except the heavy tail (probability 0.1 %).
    #[test]
    fn twitter_ids_are_k_sorted_except_the_tail() {
        let mut config = profile("twitter");
        config.clock_step_per_hour = 0.0;
        config.rate_per_s = 50.0;
        let (_, truth) = run(config.clone(), 11, 3_600_000);
        let bound = 5.0 * config.clock_offset_sd_ms;
        for s in &truth {
            assert!(
                ((s.id_time_ms - s.posted_at_ms) as f64).abs() <= bound,
                "{s:?}"
            );
        }
        let late = truth
            .iter()
            .filter(|s| s.visible_at_ms - s.id_time_ms > 1000)
            .count();
        let expected = config.tail_probability * truth.len() as f64;
        assert!(late > 0, "the tail exists");
        assert!(
            (late as f64) < 2.0 * expected + 10.0,
            "{late} late of {}",
            truth.len()
        );
    }

    #[test]
    fn mastodon_and_misskey_id_remote_statuses_as_documented() {
        let (_, truth) = run(profile("mastodon"), 5, 3_600_000);
        let origins: HashSet<&str> = truth.iter().map(|s| &*s.origin).collect();
        assert_eq!(
            origins,
            HashSet::from(["local", "remote", "remote-fetched"])
        );
        for s in &truth {
            match &*s.origin {
                // Transaction start: one clock, the posting time itself.
                "local" => assert_eq!(s.id_time_ms, s.posted_at_ms),
                // Delivered: IDed on receipt, after `published`.
                "remote" => assert!(s.id_time_ms >= s.posted_at_ms),
                // Fetched: id_at(published) = whole second + 0-999 ms, visible later.
                _ => {
                    let second = s.posted_at_ms.div_euclid(1000) * 1000;
                    assert!((second..second + 1000).contains(&s.id_time_ms), "{s:?}");
                    assert!(s.visible_at_ms > s.id_time_ms);
                }
            }
        }
        let (_, truth) = run(profile("misskey"), 5, 600_000);
        for s in truth.iter().filter(|s| &*s.origin == "remote") {
            assert_eq!(s.id_time_ms, s.posted_at_ms, "IDed at published");
        }
    }

    #[test]
    fn the_home_follow_set_is_a_seeded_quarter_of_the_authors() {
        let a = home_follows(1, 400);
        assert_eq!(a, home_follows(1, 400), "same seed, same set");
        assert_ne!(a, home_follows(2, 400), "another seed, another set");
        assert!((60..140).contains(&a.len()), "about a quarter: {}", a.len());
        assert!(a.iter().all(|&x| x < 400));
        assert_eq!(home_follows(7, 1), [0].into(), "never empty");
    }

    #[test]
    fn same_seed_same_statuses_other_seed_other_statuses() {
        let a = run(profile("twitter"), 1, 600_000).1;
        let b = run(profile("twitter"), 1, 600_000).1;
        let c = run(profile("twitter"), 2, 600_000).1;
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// advance(t1); advance(t2) produces exactly what advance(t2) does,
        /// and the same visible set.
        #[test]
        fn chunking_is_invariant(
            which in 0usize..3,
            seed in any::<u64>(),
            mut cuts in proptest::collection::vec(0i64..120_000, 0..8),
        ) {
            let mut config = profile(SimConfig::PROFILES[which]);
            config.rate_per_s = 40.0;
            config.delete_probability = 0.05;
            config.delete_after_mean_ms = 10_000.0;
            let (whole_sim, whole) = run(config.clone(), seed, 120_000);
            cuts.sort_unstable();
            let mut sim = Simulator::new(config, seed, START);
            let mut chunked = Vec::new();
            for cut in cuts {
                sim.advance(START + cut);
                chunked.extend(sim.take_truth());
            }
            sim.advance(START + 120_000);
            chunked.extend(sim.take_truth());
            prop_assert_eq!(&chunked, &whole);
            let all = Query { after: None, before: None, limit: usize::MAX, oldest_first: false };
            prop_assert_eq!(sim.query(&all), whole_sim.query(&all));
        }
    }

    #[test]
    fn queries_follow_the_documented_semantics() {
        let mut config = profile("twitter");
        config.rate_per_s = 0.0;
        let mut sim = Simulator::new(config, 1, START);
        for id in 1..=6 {
            sim.inject(status(id, if id % 2 == 0 { "local" } else { "remote" }));
        }
        let q = |after: Option<u128>, before: Option<u128>, limit, oldest_first| Query {
            after: after.map(Id),
            before: before.map(Id),
            limit,
            oldest_first,
        };
        // Newest `limit` above `after`, descending (Mastodon's since_id=3 limit=2 => 6 5).
        assert_eq!(ids(&sim.query(&q(Some(3), None, 2, false))), [6, 5]);
        // Oldest `limit` above `after`, ascending (min_id=3 limit=2 => 4 5).
        assert_eq!(ids(&sim.query(&q(Some(3), None, 2, true))), [4, 5]);
        // Both bounds are exclusive.
        assert_eq!(ids(&sim.query(&q(Some(2), Some(5), 10, false))), [4, 3]);
        // Empty and inverted ranges are empty, not a panic.
        assert!(sim.query(&q(Some(3), Some(4), 10, false)).is_empty());
        assert!(sim.query(&q(Some(5), Some(2), 10, false)).is_empty());
        assert!(sim.query(&q(Some(6), None, 10, false)).is_empty());
        assert!(sim.query(&q(None, Some(1), 10, false)).is_empty());
        assert!(sim.query(&q(None, None, 0, false)).is_empty());
        // A filter counts toward the limit only what it keeps.
        let local = sim.query_filtered(&q(None, None, 2, false), SimStatus::is_local);
        assert_eq!(ids(&local), [6, 4]);
        // A deleted status is gone; its neighbours stay.
        sim.remove(Id(5));
        assert_eq!(ids(&sim.query(&q(Some(3), None, 10, false))), [6, 4]);
    }

    #[test]
    fn statuses_appear_and_vanish_at_their_times() {
        let (mut sim, truth) = run(profile("twitter"), 4, 60_000);
        let all = Query {
            after: None,
            before: None,
            limit: usize::MAX,
            oldest_first: true,
        };
        let now = sim.now_ms();
        let expected: Vec<Id> = {
            let mut v: Vec<Id> = truth
                .iter()
                .filter(|s| s.visible_at_ms <= now && s.deleted_at_ms.is_none_or(|d| now < d))
                .map(|s| s.id)
                .collect();
            v.sort();
            v
        };
        let got: Vec<Id> = sim.query(&all).iter().map(|s| s.id).collect();
        assert_eq!(got, expected);
        // Going back in time is a no-op.
        sim.advance(START);
        assert_eq!(sim.now_ms(), now);
        assert_eq!(sim.query(&all).len(), got.len());
    }

    #[test]
    fn memory_is_bounded_by_retention_and_max_items() {
        let mut config = profile("twitter");
        config.rate_per_s = 100.0;
        config.retention_ms = 60_000;
        let mut sim = Simulator::new(config.clone(), 1, START);
        sim.set_truth_recording(false);
        sim.advance(START + 600_000);
        assert!(sim.take_truth().is_empty());
        // About 100/s for the last 60 s (bursts triple it).
        assert!(
            sim.visible_len() <= 60 * 100 * 3 + 1000,
            "{}",
            sim.visible_len()
        );
        assert!(sim.visible_len() >= 60 * 100 / 2, "{}", sim.visible_len());
        config.max_items = 500;
        let mut sim = Simulator::new(config, 1, START);
        sim.advance(START + 600_000);
        assert_eq!(sim.visible_len(), 500);
        // The newest are kept.
        let newest = sim.query(&Query {
            after: None,
            before: None,
            limit: 1,
            oldest_first: false,
        });
        let truth = sim.take_truth();
        let max_visible = truth
            .iter()
            .filter(|s| {
                s.visible_at_ms <= sim.now_ms() && s.deleted_at_ms.is_none_or(|d| d > sim.now_ms())
            })
            .map(|s| s.id)
            .max();
        assert_eq!(newest.first().map(|s| s.id), max_visible);
    }

    #[test]
    fn a_backlog_is_history_present_at_the_start() {
        let mut sim = Simulator::with_backlog(profile("twitter"), 1, START, 120_000);
        assert_eq!(sim.now_ms(), START);
        assert!(sim.visible_len() > 100, "two minutes at 3/s");
        let truth = sim.take_truth();
        assert!(truth.iter().all(|s| s.posted_at_ms <= START));
        assert!(truth.iter().any(|s| s.posted_at_ms < START - 60_000));
        // No backlog: the empty timeline `new` gives.
        assert_eq!(
            Simulator::with_backlog(profile("twitter"), 1, START, 0).visible_len(),
            0
        );
    }

    #[test]
    fn rate_zero_posts_nothing() {
        let mut config = profile("misskey");
        config.rate_per_s = 0.0;
        let (sim, truth) = run(config, 1, 3_600_000);
        assert!(truth.is_empty());
        assert_eq!(sim.visible_len(), 0);
    }
}
