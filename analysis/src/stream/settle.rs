//! When an open status settles, how each poller that never returned it is
//! judged (`diff`'s `classify`, on the window of requests), and the output.

use super::{Checker, Found, HandedFinding, InOrder, Names, Open, before_baseline};
use crate::diff::{
    Analysis, Cause, Distribution, FUTURE_TOLERANCE_MS, Finding, OtherMiss, Reference, Unread,
    Verdict,
};
use crate::history::{History, IdTimes, TruthTable, Visibility};
use since_id::id::{Id, Layout};
use since_id::policy::smallest_k_catching;
use std::collections::BTreeMap;

/// When a status was visible: `diff`'s `Vis`.
#[derive(Clone, Copy, Debug)]
enum Vis {
    Truth(Visibility),
    Sighted { from: i64, until: i64 },
}

impl Vis {
    fn visible_at(self, sent: i64, received: i64) -> bool {
        match self {
            Vis::Truth(v) => {
                v.visible_at_ms <= sent && v.deleted_at_ms.is_none_or(|d| d > received)
            }
            Vis::Sighted { from, until } => from < sent && sent <= until,
        }
    }

    fn ended_by(self, sent: i64) -> bool {
        match self {
            Vis::Truth(v) => v.deleted_at_ms.is_some_and(|d| sent >= d),
            Vis::Sighted { until, .. } => sent > until,
        }
    }

    fn start_after(self) -> i64 {
        match self {
            Vis::Truth(v) => v.visible_at_ms - 1,
            Vis::Sighted { from, .. } => from,
        }
    }
}

/// `diff`'s outcome of one (status, poller) pair.
#[derive(Clone, Copy, Debug)]
enum Unowed {
    NotOwed { deleted: bool },
    BeforeBaseline,
    Leak,
    Miss(Cause),
}

/// What a walk over the window found.
enum Walk {
    Final(Unowed),
    /// Later requests could change it: wait.
    Open,
}

#[derive(Clone, Copy, Default)]
struct Causes {
    clean: bool,
    failed: bool,
    overflow: bool,
}

impl Checker {
    fn reference(&self) -> Reference {
        if self.has_truth {
            Reference::Truth
        } else if self.pollers.len() >= 2 {
            Reference::Union
        } else {
            Reference::None
        }
    }

    /// Settles every open status whose fate later requests cannot change
    /// (the module docs); with `finishing`, every open status. They are
    /// tried in key order: those that waited at the last call, then those
    /// not tried yet ([`super::Resume`]), not every position again.
    pub(super) fn settle_ready(&mut self, finishing: bool) {
        let Some(bound) = self.settle_bound(finishing) else {
            return;
        };
        let range = self.open.through(bound);
        let mut r = std::mem::take(&mut self.resume);
        if r.version != self.open.version() {
            r = super::Resume {
                version: self.open.version(),
                waiting: Vec::new(),
                from: range.start,
            };
        }
        let tried = std::mem::take(&mut r.waiting);
        let new = r.from.max(range.start)..range.end.max(r.from);
        for i in tried.into_iter().chain(new) {
            let Some((key, &o)) = self.open.at(i) else {
                continue;
            };
            if key <= bound && self.try_settle(key, &o, finishing) {
                self.open.settle_at(i);
                self.settled_max = self.settled_max.max(Some(key));
            } else {
                r.waiting.push(i);
            }
        }
        r.from = r.from.max(range.end);
        // A compaction moves the positions: the next call starts afresh.
        self.open.tidy();
        self.resume = r;
    }

    /// The key through which open statuses may settle: every poller's
    /// cursor of its last closed cycle, and the truth read (`None`: none
    /// may yet); with `finishing`, all.
    fn settle_bound(&self, finishing: bool) -> Option<u128> {
        if finishing {
            return Some(u128::MAX);
        }
        let mut w = u128::MAX;
        for p in &self.polls {
            match p.closed_since {
                Some(Some(l)) => w = w.min(l),
                _ => return None,
            }
        }
        if self.has_truth {
            self.truth_through.map(|t| w.min(t))
        } else {
            Some(w)
        }
    }

    /// Judges open status `key`, `o`, if every walk is final; false to wait.
    fn try_settle(&mut self, key: u128, o: &Open, finishing: bool) -> bool {
        let n = self.pollers.len();
        let all_bits = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let missing = if self.reference() == Reference::None {
            0
        } else {
            all_bits & !o.mask & !o.unserved
        };
        let vis = match (o.truth, o.first) {
            (Some(v), _) => Some(Vis::Truth(v)),
            (None, Some((from, _))) => Some(Vis::Sighted {
                from,
                until: o.last_received.max(from + self.interval_ms * 3 / 2),
            }),
            (None, None) => None,
        };
        let mut outcomes = Vec::new();
        if let (true, Some(vis)) = (missing != 0, vis) {
            for p in (0..n).filter(|p| missing & (1 << p) != 0) {
                match self.walk(p, key, o, vis, finishing) {
                    Walk::Final(u) => outcomes.push((p, u)),
                    Walk::Open => return false,
                }
            }
        }
        self.record(key, o, &outcomes);
        true
    }

    /// Counts a settled status's outcomes and keeps what the report names.
    fn record(&mut self, key: u128, o: &Open, outcomes: &[(usize, Unowed)]) {
        let mut slot: Option<u32> = None;
        let layout = &self.layout;
        let mut name =
            |names: &mut Names| -> u32 { *slot.get_or_insert_with(|| names.add(layout, key, o)) };
        let mut leaked = 0u64;
        for &(p, outcome) in outcomes {
            let stats = &mut self.stats[p];
            let by_the_drop = matches!(
                outcome,
                Unowed::NotOwed { deleted: true } | Unowed::Miss(Cause::Error | Cause::Overflow)
            );
            if by_the_drop && o.expired {
                stats.expired += 1;
                self.expired.push((name(&mut self.named), p as u8));
                continue;
            }
            match outcome {
                Unowed::NotOwed { deleted: false } => {}
                Unowed::NotOwed { deleted: true } => {
                    stats.gone_before_seen += 1;
                    self.gone.push((name(&mut self.named), p as u8));
                }
                Unowed::BeforeBaseline => stats.before_baseline += 1,
                Unowed::Leak => {
                    leaked |= 1 << p;
                    stats.leaks += 1;
                }
                Unowed::Miss(cause) => {
                    stats.count_miss(cause);
                    if self.hand_over {
                        self.waiting_misses[p].push((key, cause));
                    } else {
                        self.other.push(OtherMiss {
                            status: name(&mut self.named),
                            poller: p as u8,
                            cause,
                        });
                    }
                }
            }
        }
        if o.is_from_the_future() {
            self.future.push(name(&mut self.named));
        }
        if leaked != 0 || o.late_for != 0 {
            let first_sent = o.first.map(|(sent, _)| sent);
            let truth_vis = o.truth.map(|v| v.visible_at_ms);
            let belongs = match (truth_vis, o.first) {
                (Some(v), Some((sent, tick_t))) if sent < v => Some((true, tick_t)),
                (Some(v), _) => Some((false, v)),
                (None, Some((_, tick_t))) => Some((true, tick_t)),
                (None, None) => None,
            };
            let f = HandedFinding {
                key,
                id_time_ms: o.id_time_ms,
                first_seen_ms: first_sent,
                visible_ms: truth_vis.or(first_sent),
                seen_by: o.mask,
                leaked_by: leaked,
                late_for: o.late_for,
                belongs,
            };
            if !self.hand_over {
                let kept = name(&mut self.named);
                self.found.push(Found { kept, f });
                return;
            }
            if self.found_handed_through.is_some_and(|t| f.order() <= t) && self.inexact.is_none() {
                self.inexact =
                    Some("a leak settled before one handed over (an ID time not its key's)".into());
            }
            self.waiting_found.push(InOrder(f));
        }
    }

    /// `diff`'s `classify` of (status `key`, poller `p`) on the poller's
    /// window, linear (its jumps only save time); `Open` when a request not
    /// yet fed, or of a cycle not yet over, could change the outcome.
    fn walk(&mut self, p: usize, key: u128, o: &Open, vis: Vis, finishing: bool) -> Walk {
        let start_after = vis.start_after();
        if self.polls[p].evicted_through > start_after && self.inexact.is_none() {
            self.inexact = Some(format!(
                "a status open longer than the horizon ({} ms) needed requests it had dropped",
                self.horizon_ms
            ));
        }
        let poll = &self.polls[p];
        let w = &poll.window;
        let deleted = matches!(vis, Vis::Truth(v) if v.deleted_at_ms.is_some());
        // From here on, every request of the window has the status below its
        // lower bound (later ones too, as the module assumes and checks).
        let passed = {
            let seg = poll.suffix_min.partition_point(|&(_, v)| v < Some(key));
            poll.suffix_min.get(seg).map_or(w.len(), |&(start, _)| {
                start.saturating_sub(poll.dropped) as usize
            })
        };
        let mut j = poll.sent.partition_point(|&sent| sent <= start_after);
        let mut owed_any = false;
        let mut below_future_cursor_only = true;
        let mut causes: Option<Causes> = None;
        let mut ended = false;
        while j < w.len() {
            let k = w[j];
            if !k.complete && !finishing {
                return Walk::Open;
            }
            j += 1;
            if !vis.visible_at(k.sent, k.received) {
                if vis.ended_by(k.sent) {
                    ended = true;
                    break;
                }
                continue;
            }
            let below = k.lower.is_some_and(|s| key <= s);
            let above = k.upper.is_some_and(|b| key >= b);
            if above && !below {
                continue;
            }
            if k.since_key.is_none()
                && !causes.is_some_and(|c| c.clean)
                && before_baseline(&poll.baseline, key, o, k.sent)
            {
                return Walk::Final(Unowed::BeforeBaseline);
            }
            owed_any = true;
            if below {
                below_future_cursor_only &= k
                    .since_time_ms
                    .is_some_and(|t| t > k.sent.saturating_add(FUTURE_TOLERANCE_MS));
            }
            if !below {
                let c = causes.get_or_insert_default();
                c.clean |= !k.failed && !k.overflow;
                c.failed |= k.failed;
                c.overflow |= k.overflow;
                if c.clean {
                    ended = true;
                    break;
                }
                // The rest of the cycle owes it alike (`Kept::rest`): each
                // request would change nothing, unless its visibility ended
                // there (which only grows with the send time).
                if k.rest > 0 && k.rest_since && k.rest_lower.is_none_or(|m| key > m) {
                    let last = j - 1 + k.rest as usize;
                    if vis.ended_by(w[last].sent) {
                        ended = true;
                        break;
                    }
                    j = last + 1;
                }
            } else if j > passed {
                ended = true;
                break;
            }
        }
        if !ended && !finishing {
            return Walk::Open;
        }
        Walk::Final(match (owed_any, causes) {
            (false, _) => Unowed::NotOwed { deleted },
            (true, None) if below_future_cursor_only => Unowed::Miss(Cause::FutureId),
            (true, None) => Unowed::Leak,
            (true, Some(c)) if c.clean => Unowed::Miss(Cause::Unexplained),
            (true, Some(c)) if c.failed => Unowed::Miss(Cause::Error),
            (true, Some(_)) => Unowed::Miss(Cause::Overflow),
        })
    }

    /// The [`Analysis`] and the compact history it points into (its
    /// statuses in the order they settled; each list sorted as `diff` sorts
    /// it, ties broken by the loader's order: [`Names::rank`]).
    pub(super) fn output(mut self) -> super::Streamed {
        let resolve = Resolve {
            layout: self.layout.clone(),
            ticks: Ticks::of(&mut self.page0_sends, &self.tick_tops, self.interval_ms),
            running_hist: std::mem::take(&mut self.running_hist),
        };
        let names = &self.named;
        let id_time = |s: u32| names.id_time(&self.layout, s);
        let mut items: Vec<Finding> = self
            .found
            .iter()
            .map(|f| resolve.finding(f.kept, &f.f))
            .collect();
        items.sort_by_key(|i| (id_time(i.status), names.rank(i.status)));
        let reference = self.reference();
        let mut ks = RequiredKs::default();
        items.iter().for_each(|i| ks.add(i));
        let (k_to_catch_all_ms, required_k) = ks.finish();
        let (verdicts, verdict_reasons): (Vec<Verdict>, Vec<String>) = self
            .stats
            .iter()
            .map(|s| crate::diff::judge(reference, s))
            .unzip();
        let key_of = |s: u32| names.statuses[s as usize].key;
        let mut other_misses = std::mem::take(&mut self.other);
        other_misses.sort_unstable_by_key(|m| (m.poller, key_of(m.status)));
        let unread = |v: &[(u32, u8)]| {
            let mut v: Vec<Unread> = v
                .iter()
                .map(|&(status, poller)| Unread { status, poller })
                .collect();
            v.sort_by_key(|m| (m.poller, key_of(m.status)));
            v
        };
        let expired = unread(&self.expired);
        let gone = unread(&self.gone);
        let mut future_ids = std::mem::take(&mut self.future);
        future_ids.sort_unstable_by_key(|&s| names.rank(s));
        let detection_delays = if self.has_truth {
            std::mem::replace(&mut self.delays, super::delays::Delays::new(0, 1)).finish()
        } else {
            vec![None; self.pollers.len()]
        };
        let mut last_misses = Vec::new();
        self.open = super::ring::Ring::default();
        self.misses_in_order(&mut last_misses);
        let mut last_findings = Vec::new();
        self.hand_findings_before(None, &mut last_findings);
        let mut lateness: Vec<(i64, u64)> = self.lateness.drain().collect();
        lateness.sort_unstable();
        let history = self.compact_history();
        super::Streamed {
            analysis: Analysis {
                reference,
                pollers: self.stats,
                verdicts,
                verdict_reasons,
                items,
                other_misses,
                expired,
                gone,
                k_to_catch_all_ms,
                required_k,
                future_ids,
            },
            history,
            truth_rows: self.truth_rows,
            inexact: self.inexact,
            peak_open: self.peak_open,
            returned: self.returned,
            detection_delays,
            lateness,
            last_misses,
            last_findings,
            resolve,
        }
    }

    /// A [`History`] of the named statuses only: their keys and ID times,
    /// what the report reads of them. No truth rows (an empty table when the
    /// run has truth): the report reads the run's counts from
    /// [`crate::load::Totals`].
    fn compact_history(&mut self) -> History {
        let names = std::mem::take(&mut self.named);
        let id_times = if names.odd_times.is_empty() {
            IdTimes::FromKeys
        } else {
            IdTimes::Recorded(
                (0..names.statuses.len() as u32)
                    .map(|i| names.id_time(&self.layout, i))
                    .collect(),
            )
        };
        let unserved = if names.unserved.is_empty() {
            Vec::new()
        } else {
            (0..names.statuses.len() as u32)
                .map(|i| names.unserved.get(&i).copied().unwrap_or(0))
                .collect()
        };
        let mut expired = names.expired;
        expired.sort_unstable();
        History {
            layout: self.layout.clone(),
            id_times,
            statuses: names.statuses,
            truth: self.has_truth.then(TruthTable::default),
            pollers: self.pollers.clone(),
            requests: Vec::new(),
            observations: Vec::new(),
            interval_ms: self.interval_ms,
            unserved,
            expired,
        }
    }
}

/// What a leak's or late arrival's `id_skew_ms` and `required_k_ms` are
/// read from once the run's ticks are known: the tick table and the
/// running highest key, a few words a tick (`diff`'s
/// `leaks_and_late_arrivals`).
pub struct Resolve {
    layout: Layout,
    ticks: Ticks,
    /// (send time, highest key so far, its ID time), as it rose.
    running_hist: Vec<(i64, u128, i64)>,
}

impl Resolve {
    /// `f` as `diff` reports it, as status `status` of the history the
    /// analysis points into.
    pub fn finding(&self, status: u32, f: &HandedFinding) -> Finding {
        let id_skew_ms = f.visible_ms.and_then(|t| {
            let n = self.running_hist.partition_point(|&(sent, _, _)| sent < t);
            n.checked_sub(1)
                .map(|i| self.running_hist[i].2 - f.id_time_ms)
        });
        let sent = &self.ticks.sent;
        let c = f.belongs.and_then(|(by_request, t)| {
            if by_request {
                sent.partition_point(|&x| x <= t).checked_sub(1)
            } else {
                Some(sent.partition_point(|&x| x < t))
            }
        });
        Finding {
            status,
            first_seen_ms: f.first_seen_ms,
            visible_ms: f.visible_ms,
            seen_by: f.seen_by,
            leaked_by: f.leaked_by,
            late_for: f.late_for,
            id_skew_ms,
            required_k_ms: c.and_then(|c| self.ticks.required_k(&self.layout, c, f.key)),
        }
    }
}

/// `k_to_catch_all_ms` (the largest `required_k_ms` of a leak) and the
/// distribution of `required_k_ms` over the leaks and late arrivals, from
/// the findings one at a time: a count per distinct value, whose
/// nearest-rank percentiles are [`Distribution::of`]'s.
#[derive(Debug, Default)]
pub struct RequiredKs {
    catch_all: Option<i64>,
    counts: BTreeMap<i64, u64>,
}

impl RequiredKs {
    pub fn add(&mut self, f: &Finding) {
        let Some(k) = f.required_k_ms else { return };
        *self.counts.entry(k).or_insert(0) += 1;
        if f.leaked_by != 0 {
            self.catch_all = self.catch_all.max(Some(k));
        }
    }

    /// (`k_to_catch_all_ms`, `required_k`).
    pub fn finish(&self) -> (Option<i64>, Option<Distribution>) {
        (self.catch_all, super::delays::distribution(&self.counts))
    }
}

/// `diff`'s `Ticks`, from the page-0 sends and each cycle's highest key.
struct Ticks {
    sent: Vec<i64>,
    last: Vec<i64>,
    latest_before: Vec<Option<u128>>,
}

impl Ticks {
    fn of(page0: &mut [i64], tops: &[(i64, u128)], interval_ms: i64) -> Ticks {
        page0.sort_unstable();
        let (mut sent, mut last): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
        for &t in page0.iter() {
            if sent.last().is_none_or(|&first| t > first + interval_ms / 2) {
                sent.push(t);
                last.push(t);
            } else if let Some(l) = last.last_mut() {
                *l = t;
            }
        }
        let mut highest_in: Vec<Option<u128>> = vec![None; sent.len()];
        for &(t, top) in tops {
            if let Some(c) = sent.partition_point(|&x| x <= t).checked_sub(1) {
                highest_in[c] = highest_in[c].max(Some(top));
            }
        }
        let mut latest_before = vec![None; sent.len() + 1];
        for (c, highest) in highest_in.into_iter().enumerate() {
            latest_before[c + 1] = latest_before[c].max(highest);
        }
        Ticks {
            sent,
            last,
            latest_before,
        }
    }

    /// `diff`'s `Ticks::required_k`.
    fn required_k(&self, layout: &since_id::id::Layout, c: usize, key: u128) -> Option<i64> {
        let retrieved_at = *self.last.get(c.checked_sub(1)?)?;
        let latest = self.latest_before.get(c).copied().flatten()?;
        smallest_k_catching(layout, Id(latest), retrieved_at, Id(key))
            .map(|k| k.min(i64::MAX as u64) as i64)
    }
}
