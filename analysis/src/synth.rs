//! Synthetic run databases, for the tests and the benchmark.
//!
//! Two layers: [`write_run`] records a hand-written history (requests with
//! the IDs they returned, and optional truth) into a database created with
//! the experiment's own schema and pragmas, exactly as the recorder lays it
//! out; [`simulate`] produces such a history from a tiny model of a leaky
//! timeline (statuses whose visibility lags their ID time, a few by seconds)
//! polled by real cursor policies from `since_id::policy`. Nothing here is
//! used by `analyze` itself.

use rundb::{RunRow, StatusRow, TruthRow, write};
use rusqlite::Connection;
use since_id::id::{Id, Layout};
use since_id::policy::CursorPolicy;
use std::path::Path;

/// The `runs` row of a synthetic run, complete; change what a test needs
/// (`Run { complete: false, end_reason: None, ..synth::run() }`).
pub fn run() -> RunRow {
    RunRow {
        target: "simulator".into(),
        profile: Some("synthetic".into()),
        seed: Some(1),
        clock: "virtual".into(),
        layout: "mastodon".into(),
        interval_ms: 1000,
        page_limit: 40,
        started_at_ms: 1_700_000_000_000,
        ended_at_ms: None,
        complete: true,
        end_reason: Some("duration reached".into()),
        config: "{}".into(),
        version: "synth".into(),
        id: 0,
    }
}

/// One request of a synthetic history; `ids` are the returned IDs, in response order.
#[derive(Clone, Debug, Default)]
pub struct SynthRequest {
    pub poller: usize,
    pub cycle: i64,
    pub page: i64,
    pub sent_at_ms: i64,
    pub received_at_ms: i64,
    pub since: Option<u128>,
    pub before: Option<u128>,
    pub retrieved_at_ms: Option<i64>,
    pub error: Option<String>,
    pub ids: Vec<u128>,
    pub new_items: i64,
    pub bytes: Option<i64>,
    pub overflow: bool,
}

/// A truth row of a synthetic run.
#[derive(Clone, Copy, Debug)]
pub struct SynthTruth {
    pub id: u128,
    pub posted_at_ms: i64,
    pub visible_at_ms: i64,
    pub deleted_at_ms: Option<i64>,
}

/// Creates a run database the way the experiment does ([`rundb::write::open`]).
pub fn create(path: &Path) -> Result<Connection, rundb::Error> {
    write::open(path, "--db")
}

/// Records one run; returns its id. Pollers are `(name, policy)`; their k is
/// taken from the policy. All inserts happen in one transaction.
pub fn write_run(
    conn: &mut Connection,
    run: &RunRow,
    pollers: &[(&str, &str)],
    requests: &[SynthRequest],
    truth: &[SynthTruth],
) -> Result<i64, rundb::Error> {
    let layout: Layout = run.layout.parse().expect("a known layout");
    let db = |e: rusqlite::Error| rundb::Error(format!("cannot write the run database: {e}"));
    let tx = conn.transaction().map_err(db)?;
    let pollers: Vec<rundb::PollerRow> = pollers
        .iter()
        .map(|(name, policy)| rundb::PollerRow {
            name: name.to_string(),
            policy: policy.to_string(),
            k_ms: policy
                .parse::<CursorPolicy>()
                .ok()
                .and_then(|p| p.k_ms())
                .map(|k| k as i64),
            ..rundb::PollerRow::default()
        })
        .collect();
    let (run_id, poller_ids) = write::add_run(&tx, run, &pollers)?;
    let fmt = |id: u128| layout.format(Id(id));
    let key = |id: u128| Id(id).sort_key();
    let mut seen = std::collections::HashSet::new();
    for r in requests {
        let request = rundb::RequestRow {
            poller_id: poller_ids[r.poller],
            cycle: r.cycle,
            page: r.page,
            sent_at_ms: r.sent_at_ms,
            received_at_ms: r.received_at_ms,
            since_id: r.since.map(fmt),
            since_key: r.since.map(key),
            before_id: r.before.map(fmt),
            before_key: r.before.map(key),
            page_limit: run.page_limit,
            retrieved_at_ms: r.retrieved_at_ms,
            http_status: Some(if r.error.is_some() { 503 } else { 200 }),
            error: r.error.clone(),
            items: r.ids.len() as i64,
            new_items: r.new_items,
            bytes: r.bytes,
            overflow: r.overflow,
            ..rundb::RequestRow::default()
        };
        let request_id = write::insert_request(&tx, run_id, &request)?;
        let ids: Vec<String> = r.ids.iter().map(|&id| fmt(id)).collect();
        write::insert_observations(&tx, request_id, &ids)?;
        let new: Vec<StatusRow> = r
            .ids
            .iter()
            .zip(ids)
            .filter(|(id, _)| seen.insert(**id))
            .map(|(&id, text)| StatusRow {
                id: text,
                id_key: key(id),
                id_time_ms: layout.ts_ms(Id(id)),
                created_at: None,
                author: None,
            })
            .collect();
        write::insert_statuses(&tx, run_id, &new.iter().collect::<Vec<_>>())?;
    }
    let truth: Vec<TruthRow> = truth
        .iter()
        .map(|s| TruthRow {
            id: fmt(s.id),
            id_key: key(s.id),
            id_time_ms: layout.ts_ms(Id(s.id)),
            posted_at_ms: s.posted_at_ms,
            visible_at_ms: s.visible_at_ms,
            deleted_at_ms: s.deleted_at_ms,
            origin: "local".into(),
        })
        .collect();
    write::insert_truth(&tx, run_id, &truth, write::OnConflict::Ignore)?;
    tx.commit().map_err(db)?;
    Ok(run_id)
}

/// A small deterministic PRNG (splitmix64): the synthetic runs must be reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Parameters of [`simulate`].
#[derive(Clone, Debug)]
pub struct SimSpec {
    pub seed: u64,
    pub start_ms: i64,
    pub ticks: i64,
    pub interval_ms: i64,
    pub page_limit: usize,
    /// Statuses created per second.
    pub rate_per_s: f64,
    /// Fraction of statuses that become visible late (0.2 s to `max_late_ms`).
    pub late_fraction: f64,
    pub max_late_ms: i64,
    /// Fraction of statuses whose ID time runs ahead of their posting (a
    /// generator with a fast clock), by up to `max_ahead_ms`.
    pub ahead_fraction: f64,
    pub max_ahead_ms: i64,
    /// Fraction of statuses deleted a little after they were posted.
    pub delete_fraction: f64,
    /// Probability that a request fails.
    pub error_rate: f64,
    /// Back-paging stops after this many pages (then the cycle overflows).
    pub max_pages: i64,
    /// Poller p sends `p * send_spread_ms` after the tick (real pollers never leave together).
    pub send_spread_ms: i64,
    pub policies: Vec<String>,
}

impl SimSpec {
    /// The pollers of a run of this spec, as [`write_run`] takes them: each
    /// named after its policy.
    pub fn pollers(&self) -> Vec<(&str, &str)> {
        self.policies
            .iter()
            .map(|p| (p.as_str(), p.as_str()))
            .collect()
    }
}

impl Default for SimSpec {
    fn default() -> Self {
        SimSpec {
            seed: 7,
            start_ms: 1_700_000_000_000,
            ticks: 120,
            interval_ms: 1000,
            page_limit: 40,
            rate_per_s: 10.0,
            late_fraction: 0.05,
            max_late_ms: 5000,
            delete_fraction: 0.01,
            error_rate: 0.0,
            max_pages: 20,
            ahead_fraction: 0.0,
            max_ahead_ms: 0,
            send_spread_ms: 3,
            policies: vec![
                "naive".into(),
                "compensated:k=1s".into(),
                "compensated:k=10s".into(),
            ],
        }
    }
}

/// Simulates a leaky timeline polled by `spec.policies` on one cadence, with
/// the mastodon layout (ID = ms << 16 | sequence). Returns the requests and the truth.
pub fn simulate(spec: &SimSpec) -> (Vec<SynthRequest>, Vec<SynthTruth>) {
    let layout: Layout = "mastodon".parse().expect("a known layout");
    let mut rng = Rng::new(spec.seed);
    let truth = simulate_truth(spec, &mut rng);
    let keys: Vec<u128> = truth.iter().map(|s| s.id).collect();

    let policies: Vec<CursorPolicy> = spec
        .policies
        .iter()
        .map(|p| p.parse().expect("a valid policy"))
        .collect();
    let mut requests = Vec::new();
    // Per poller: latest ID, since of the next cycle, retrieved_at of the last good cycle, seen set.
    let mut latest: Vec<Option<u128>> = vec![None; policies.len()];
    let mut since: Vec<Option<u128>> = vec![None; policies.len()];
    let mut retrieved: Vec<Option<i64>> = vec![None; policies.len()];
    let mut cycles = vec![0i64; policies.len()];
    let mut seen: Vec<std::collections::HashSet<u128>> = vec![Default::default(); policies.len()];
    for tick in 0..spec.ticks {
        let tick_ms = spec.start_ms + tick * spec.interval_ms;
        for (p, policy) in policies.iter().enumerate() {
            let cycle = cycles[p];
            cycles[p] += 1;
            let mut sent = tick_ms + p as i64 * spec.send_spread_ms;
            let mut before: Option<u128> = None;
            let mut page = 0i64;
            let mut cycle_max: Option<u128> = None;
            let mut failed = false;
            loop {
                let received = sent + 20;
                // What the request asked, whatever it got.
                let asked = SynthRequest {
                    poller: p,
                    cycle,
                    page,
                    sent_at_ms: sent,
                    received_at_ms: received,
                    since: since[p],
                    before,
                    retrieved_at_ms: retrieved[p],
                    ..Default::default()
                };
                if rng.f64() < spec.error_rate {
                    requests.push(SynthRequest {
                        error: Some("HTTP 503".into()),
                        ..asked
                    });
                    failed = true;
                    break;
                }
                // Visible items in (since, before), highest first, up to the limit.
                let lo = since[p].map_or(0, |s| keys.partition_point(|&k| k <= s));
                let hi = before.map_or(keys.len(), |b| keys.partition_point(|&k| k < b));
                let mut ids = Vec::with_capacity(spec.page_limit);
                for s in truth[lo..hi].iter().rev() {
                    if s.visible_at_ms <= sent && s.deleted_at_ms.is_none_or(|d| d > received) {
                        ids.push(s.id);
                        if ids.len() == spec.page_limit {
                            break;
                        }
                    }
                }
                let new_items = ids.iter().filter(|&&i| seen[p].insert(i)).count() as i64;
                cycle_max = cycle_max.max(ids.first().copied());
                let full = ids.len() == spec.page_limit;
                let low = ids.last().copied();
                // Cycle 0 has no since_id to page back to: it is the baseline.
                let go_on = full && since[p].is_some();
                let cut = go_on && page + 1 >= spec.max_pages;
                requests.push(SynthRequest {
                    bytes: Some(200 + 900 * ids.len() as i64),
                    ids,
                    new_items,
                    overflow: cut,
                    ..asked
                });
                if !go_on || cut {
                    break;
                }
                before = low;
                page += 1;
                sent = received + 5;
            }
            if !failed {
                latest[p] = latest[p].max(cycle_max);
                retrieved[p] = Some(tick_ms + p as i64 * spec.send_spread_ms);
                if let Some(l) = latest[p] {
                    since[p] = Some(
                        since_id::PolicyState::new(*policy)
                            .since_id(&layout, Id(l), retrieved[p].unwrap())
                            .0,
                    );
                }
            }
        }
    }
    (requests, truth)
}

/// The truth of [`simulate`]: IDs in ID order, with their visibility, drawn
/// from `rng` before any request.
fn simulate_truth(spec: &SimSpec, rng: &mut Rng) -> Vec<SynthTruth> {
    let end_ms = spec.start_ms + spec.ticks * spec.interval_ms;
    let mut truth = Vec::new();
    let mut t = spec.start_ms as f64 - 30_000.0; // a backlog before the first tick
    let mut seq = 0u128;
    while t < end_ms as f64 {
        t += -(1.0 - rng.f64()).ln() * 1000.0 / spec.rate_per_s;
        let ms = t as i64;
        seq = (seq + 1) & 0xffff;
        // Drawn only when asked for, so that other runs keep their stream.
        let ahead = if spec.ahead_fraction > 0.0 && rng.f64() < spec.ahead_fraction {
            (rng.f64() * spec.max_ahead_ms as f64) as i64
        } else {
            0
        };
        let id = ((ms + ahead) as u128) << 16 | seq;
        let lag = if rng.f64() < spec.late_fraction {
            200 + (rng.f64() * (spec.max_late_ms - 200).max(1) as f64) as i64
        } else {
            (rng.f64() * 30.0) as i64
        };
        let deleted =
            (rng.f64() < spec.delete_fraction).then(|| ms + lag + (rng.f64() * 3000.0) as i64);
        truth.push(SynthTruth {
            id,
            posted_at_ms: ms,
            visible_at_ms: ms + lag,
            deleted_at_ms: deleted,
        });
    }
    truth.sort_by_key(|s| s.id);
    truth
}

/// Simulates and records a run at `path` (created fresh); returns the run id.
pub fn simulate_to_db(path: &Path, spec: &SimSpec, complete: bool) -> Result<i64, rundb::Error> {
    simulate_to_db_with(path, spec, complete, true)
}

/// [`simulate_to_db`], with the truth recorded or left out (a run of a
/// target without truth).
pub fn simulate_to_db_with(
    path: &Path,
    spec: &SimSpec,
    complete: bool,
    with_truth: bool,
) -> Result<i64, rundb::Error> {
    let (requests, mut truth) = simulate(spec);
    if !with_truth {
        truth.clear();
    }
    let mut conn = create(path)?;
    let run = RunRow {
        seed: Some(spec.seed as i64),
        interval_ms: spec.interval_ms,
        page_limit: spec.page_limit as i64,
        started_at_ms: spec.start_ms,
        ended_at_ms: complete.then_some(spec.start_ms + spec.ticks * spec.interval_ms),
        complete,
        end_reason: complete.then(|| "duration reached".into()),
        ..run()
    };
    write_run(&mut conn, &run, &spec.pollers(), &requests, &truth)
}
