//! A campaign's judging and summary (`experiment sweep --target postgres|
//! mariadb|misskey-ftt`, docs/campaigns.md): each run's database is judged
//! by the checker `analyze` uses ([`judge_run`]: the one reader here), and
//! the runs are summarised per combination of the varied flags and poller
//! ([`summarize`], [`render`]: pure, no I/O): the loss per 100,000 rows
//! (per 1,000 notes on misskey-ftt) over runs, and how many runs were
//! flagged for the machine's load ([`crate::machine`]).

use crate::diff::analyze;
use crate::interval::{Difference, Rate, median};
use crate::machine::MachineLoad;
use crate::ticks::AtTicks;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One poller of one run: its loss as the report counts it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PollerLoss {
    pub poller: String,
    /// Leaks, misses with a cause and rows expired before the poller read
    /// them (`missed` + `expired` of the report).
    pub lost: u64,
    pub leaks: u64,
    pub verdict: String,
    /// `lost` by the half of the run's time the rows became visible in
    /// ([`crate::halves`]); absent in results judged before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_halves: Option<[u64; 2]>,
}

/// One run of a campaign, judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The combination of varied flags it ran (`interval=1s,limit=200`;
    /// empty without `--vary`).
    pub combination: String,
    pub seed: u64,
    /// Its database.
    pub db: String,
    pub target: String,
    /// Rows (notes) the target committed: the truth.
    pub rows: u64,
    /// `rows` by the half of the run's time they became visible in
    /// ([`crate::halves`]); absent in results judged before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_halves: Option<[u64; 2]>,
    pub pollers: Vec<PollerLoss>,
    /// Why its figures are not to be trusted as they stand (the machine's
    /// load, [`MachineLoad::flags`]); empty when they are.
    pub flags: Vec<String>,
    /// It ended on a signal (Ctrl-C, SIGTERM) rather than at its duration:
    /// the campaign stops there.
    pub interrupted: bool,
    /// When it started (ms since the epoch, from its `runs` row): the
    /// campaign's time, which the drift check orders the runs by.
    pub started_at_ms: i64,
    /// The writers' commit latency in the run (from the transaction's start
    /// to COMMIT returned, `machine_load.writers`): its median and 99th
    /// percentile, ms; `None` where the target has no writers' brackets.
    pub commit_p50_ms: Option<i64>,
    pub commit_p99_ms: Option<i64>,
    /// The row lock waits the server counted over the run
    /// ([`crate::machine::LockWaits`]); `None` where it counts none
    /// (PostgreSQL) or the run did not read them.
    pub lock_waits: Option<u64>,
    /// The writers' transactions in flight at the first poller's ticks
    /// against any instant ([`crate::ticks`]); absent without writers'
    /// brackets, and in results judged before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ticks: Option<AtTicks>,
}

/// The unit a target's loss is counted per: 1,000 notes for misskey-ftt
/// (its notes are fewer), 100,000 rows for the SQL tables.
pub fn per(target: &str) -> (f64, &'static str) {
    if target.starts_with("misskey-ftt") {
        (1_000.0, "per 1,000 notes")
    } else {
        (100_000.0, "per 100,000 rows")
    }
}

/// Reads run 1 of the database at `path` (a campaign gives each run its
/// own database) and judges it as `analyze` does.
pub fn judge_run(path: &Path, combination: &str, seed: u64) -> Result<RunResult, String> {
    let conn = crate::load::open(path).map_err(|e| e.to_string())?;
    let run_id = rundb::read::run_ids(&conn)
        .map_err(|e| e.to_string())?
        .last()
        .copied()
        .ok_or_else(|| format!("{}: no run", path.display()))?;
    let loaded = crate::load::load(&conn, run_id).map_err(|e| e.to_string())?;
    let a = analyze(&loaded.history);
    let halves = crate::halves::of(&loaded.history, &a);
    let rows = loaded
        .history
        .truth
        .as_ref()
        .map_or(0, |t| t.iter().filter(|v| v.is_some()).count() as u64);
    let pollers = loaded
        .pollers
        .iter()
        .zip(&a.pollers)
        .zip(&a.verdicts)
        .enumerate()
        .map(|(i, ((p, s), v))| PollerLoss {
            poller: p.name.clone(),
            lost: s.missed() + s.expired,
            leaks: s.leaks,
            verdict: v.as_str().to_string(),
            lost_halves: halves.as_ref().map(|h| h.lost[i]),
        })
        .collect();
    let writers = loaded.machine_load().and_then(|m| m.writers);
    let brackets: Vec<(i64, i64)> =
        rundb::read::side_rows::<rundb::WriterBracketRow>(&conn, run_id)
            .map_err(|e| e.to_string())?
            .iter()
            .map(|b| (b.xact_start_ms, b.commit_returned_ms))
            .collect();
    // Every poller ticks on one cadence: the first one's ticks are the run's.
    let ticks: Vec<i64> = loaded
        .history
        .requests
        .iter()
        .filter(|r| r.poller == 0 && r.page == 0)
        .map(|r| r.sent_at_ms)
        .collect();
    Ok(RunResult {
        combination: combination.to_string(),
        seed,
        db: path.display().to_string(),
        target: loaded.run.target.clone(),
        rows,
        rows_halves: halves.as_ref().map(|h| h.rows),
        pollers,
        flags: loaded
            .machine_load()
            .map(|m: MachineLoad| m.flags())
            .unwrap_or_default(),
        interrupted: loaded.run.end_reason.as_deref() == Some("interrupted"),
        started_at_ms: loaded.run.started_at_ms,
        commit_p50_ms: writers.as_ref().and_then(|w| w.commit_p50_ms),
        commit_p99_ms: writers.as_ref().and_then(|w| w.commit_p99_ms),
        lock_waits: writers.as_ref().and_then(|w| w.lock_waits).map(|l| l.waits),
        at_ticks: crate::ticks::at_ticks(&brackets, &ticks),
    })
}

/// The loss of one poller under one combination, over its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub combination: String,
    pub poller: String,
    /// The loss rate's unit: "per 100,000 rows" or "per 1,000 notes".
    pub unit: String,
    /// The loss rate over the runs with its 95 % interval
    /// ([`crate::interval::rate_over_runs`]).
    pub lost: Rate,
    /// The runs' losses and rows, in seed order: the basis of `lost`.
    pub runs: Vec<(u64, u64, u64)>,
    /// Runs flagged for the machine's load.
    pub flagged: usize,
    /// Spearman's rank correlation of the runs' loss with their commit p99
    /// (at least 4 runs with both): does the loss follow the writers'
    /// latency more than the cell's setting?
    pub loss_vs_p99: Option<f64>,
}

/// A run whose writers' commit p99 departs from its cell's: more than
/// twice, or less than half, the cell's median. Its loss is then as much
/// the latency's as the setting's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyOutlier {
    pub combination: String,
    pub seed: u64,
    pub commit_p99_ms: i64,
    pub cell_p99_ms: f64,
}

/// The summary of a campaign.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub rows: Vec<Row>,
    pub runs: usize,
    /// Runs flagged for the machine's load: writers more than 5 % short of
    /// the asked rate, or a load average above the core count.
    pub flagged_runs: usize,
    /// Each cell against its reference (`compare`).
    pub comparisons: Vec<Comparison>,
    /// The equivalence margin stated before the runs (`--equivalence-margin`,
    /// in the rows' unit): "no difference" is claimed only inside it.
    pub margin: Option<f64>,
    /// Each combination's writers: what the runs did to them, whichever
    /// pollers ran (a `--no-pollers` cell too).
    pub writers: Vec<CellWriters>,
    /// Runs whose writers' commit p99 departs from their cell's.
    pub latency_outliers: Vec<LatencyOutlier>,
    /// Whether the loss drifted over the campaign's time ([`Drift`]);
    /// `None` with fewer than 4 runs that lost anything in their cell.
    pub drift: Option<Drift>,
    /// Each cell's second half against its first, paired by run
    /// ([`crate::halves`]); empty when the results do not split by half.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub halves: Vec<Comparison>,
}

/// The loss against the campaign's time: Spearman's rank correlation of
/// each run's start with its loss relative to its cells (the mean over its
/// pollers of the run's rate over its cell's rate; cells that lost nothing
/// left out), and the correlation's two-sided p value (exact over up to 9
/// runs, [`crate::interval::spearman_p`]). A campaign whose
/// later runs lose more (or less) than its earlier ones, whatever their
/// cell, has something besides the cells moving its figures: a machine
/// that grew busier, a build that changed, the night.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Drift {
    pub rho: f64,
    pub p: f64,
    pub runs: usize,
}

/// One cell (a combination and poller) against its reference, in the rows'
/// unit: the difference of their loss rates as an interval and a p value,
/// and what may be said of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub combination: String,
    pub poller: String,
    /// The reference: the same poller in the combination with one varied
    /// key at its first value (`independent`: other runs), or the first
    /// poller of the same combination (`paired`: the same runs).
    pub against_combination: String,
    pub against_poller: String,
    /// `independent` or `paired`.
    pub design: String,
    /// The cell's mean per-run loss rate minus the reference's, with its
    /// 95 % interval and p value ([`crate::interval::welch`] for an
    /// independent design, [`crate::interval::paired`] for a paired one);
    /// `None` with fewer than two runs on a side.
    pub difference: Option<Difference>,
    /// `differs` (p below 0.05), `equivalent` (its 90 % interval inside the
    /// margin), or `inconclusive` (neither, or too few runs).
    pub finding: String,
    /// The runs behind each side (the pairs, for a paired design).
    pub runs: usize,
    pub against_runs: usize,
}

/// One row per combination and poller, in the order they first appear,
/// with no equivalence margin (see [`summarize_with`]).
pub fn summarize(results: &[RunResult]) -> Summary {
    summarize_with(results, None)
}

/// One row per combination and poller, in the order they first appear;
/// `margin` is the equivalence margin stated before the runs, in the rows'
/// unit: a comparison is called `equivalent` only inside it.
pub fn summarize_with(results: &[RunResult], margin: Option<f64>) -> Summary {
    let mut rows: Vec<Row> = Vec::new();
    let mut scales: Vec<f64> = Vec::new();
    for r in results {
        let (scale, unit) = per(&r.target);
        for p in &r.pollers {
            let at = rows
                .iter()
                .position(|row| row.combination == r.combination && row.poller == p.poller);
            let i = at.unwrap_or_else(|| {
                rows.push(Row {
                    combination: r.combination.clone(),
                    poller: p.poller.clone(),
                    unit: unit.to_string(),
                    lost: crate::interval::rate_over_runs(&[], scale),
                    runs: Vec::new(),
                    flagged: 0,
                    loss_vs_p99: None,
                });
                scales.push(scale);
                rows.len() - 1
            });
            rows[i].runs.push((r.seed, p.lost, r.rows));
            rows[i].flagged += usize::from(!r.flags.is_empty());
        }
    }
    for (row, &scale) in rows.iter_mut().zip(&scales) {
        let counts: Vec<(u64, u64)> = row.runs.iter().map(|&(_, c, n)| (c, n)).collect();
        row.lost = crate::interval::rate_over_runs(&counts, scale);
    }
    let writers = writers(results);
    let latency_outliers = latency(results, &writers, &mut rows);
    // The first combination run, not the first row's: a combination of the
    // writers alone (no poller) has no row, and is still every key's first value.
    let first = results.first().map_or("", |r| r.combination.as_str());
    let comparisons = compare(first, &rows, &scales, margin);
    let drift = drift(results, &rows);
    let halves = halves(results, &rows, &scales, margin);
    Summary {
        halves,
        rows,
        writers,
        runs: results.len(),
        flagged_runs: results.iter().filter(|r| !r.flags.is_empty()).count(),
        drift,
        latency_outliers,
        comparisons,
        margin,
    }
}

/// One combination's writers over its runs: the medians
/// ([`crate::interval::median`]) of the runs' commit latency (from the
/// transaction's start to COMMIT returned) and row lock waits, over the
/// runs that have them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CellWriters {
    pub combination: String,
    /// The runs with the writers' latency.
    pub runs: usize,
    pub commit_p50_ms: Option<f64>,
    pub commit_p99_ms: Option<f64>,
    /// `None` where the server counts none (PostgreSQL).
    pub lock_waits: Option<f64>,
    /// The mean latency of the transactions in flight at a tick, and of the
    /// one in flight at any instant ([`crate::ticks::AtTicks`]), ms: medians
    /// over the runs that have them, `tick_runs` (fewer than `runs` where
    /// some results were kept before they existed).
    pub at_ticks_ms: Option<f64>,
    pub any_time_ms: Option<f64>,
    pub tick_runs: usize,
}

/// Each combination's [`CellWriters`], in the order the runs name them;
/// none when no run has writers (misskey-ftt's notes are timed apart).
fn writers(results: &[RunResult]) -> Vec<CellWriters> {
    let mut cells: Vec<CellWriters> = Vec::new();
    for r in results {
        if cells.iter().any(|c| c.combination == r.combination) {
            continue;
        }
        let runs: Vec<&RunResult> = results
            .iter()
            .filter(|o| o.combination == r.combination && o.commit_p99_ms.is_some())
            .collect();
        if runs.is_empty() {
            continue;
        }
        cells.push(CellWriters {
            combination: r.combination.clone(),
            runs: runs.len(),
            commit_p50_ms: median(runs.iter().filter_map(|r| Some(r.commit_p50_ms? as f64))),
            commit_p99_ms: median(runs.iter().filter_map(|r| Some(r.commit_p99_ms? as f64))),
            lock_waits: median(runs.iter().filter_map(|r| Some(r.lock_waits? as f64))),
            at_ticks_ms: median(runs.iter().filter_map(|r| r.at_ticks?.at_ticks_ms)),
            any_time_ms: median(runs.iter().filter_map(|r| Some(r.at_ticks?.any_time_ms))),
            tick_runs: runs.iter().filter(|r| r.at_ticks.is_some()).count(),
        });
    }
    cells
}

/// Each row's loss's rank correlation with its runs' commit p99, and the
/// runs whose p99 departs from their cell's median (more than twice, or
/// under half).
fn latency(results: &[RunResult], cells: &[CellWriters], rows: &mut [Row]) -> Vec<LatencyOutlier> {
    for row in rows.iter_mut() {
        let runs: Vec<(i64, f64)> = results
            .iter()
            .filter(|r| r.combination == row.combination)
            .filter_map(|r| {
                let p = r.pollers.iter().find(|p| p.poller == row.poller)?;
                Some((r.commit_p99_ms?, p.lost as f64 / r.rows.max(1) as f64))
            })
            .collect();
        if runs.len() >= 4 {
            let x: Vec<f64> = runs.iter().map(|&(p, _)| p as f64).collect();
            let y: Vec<f64> = runs.iter().map(|&(_, l)| l).collect();
            row.loss_vs_p99 = Some(crate::interval::spearman(&x, &y));
        }
    }
    let mut outliers = Vec::new();
    for cell in cells {
        let Some(median) = cell.commit_p99_ms else {
            continue;
        };
        for r in results.iter().filter(|r| r.combination == cell.combination) {
            if let Some(p99) = r.commit_p99_ms
                && (p99 as f64 > 2.0 * median || 2.0 * (p99 as f64) < median)
            {
                outliers.push(LatencyOutlier {
                    combination: r.combination.clone(),
                    seed: r.seed,
                    commit_p99_ms: p99,
                    cell_p99_ms: median,
                });
            }
        }
    }
    outliers
}

/// The drift check of [`Drift`]: one point per run, its start and its
/// loss relative to its cells.
fn drift(results: &[RunResult], rows: &[Row]) -> Option<Drift> {
    let points: Vec<(f64, f64)> = results
        .iter()
        .filter_map(|r| {
            let (scale, _) = per(&r.target);
            let relative: Vec<f64> = r
                .pollers
                .iter()
                .filter_map(|p| {
                    let cell = rows
                        .iter()
                        .find(|c| c.combination == r.combination && c.poller == p.poller)?;
                    let rate = p.lost as f64 * scale / r.rows.max(1) as f64;
                    (cell.lost.rate > 0.0).then(|| rate / cell.lost.rate)
                })
                .collect();
            (!relative.is_empty()).then(|| {
                let mean = relative.iter().sum::<f64>() / relative.len() as f64;
                (r.started_at_ms as f64, mean)
            })
        })
        .collect();
    let n = points.len();
    if n < 4 {
        return None;
    }
    let (x, y): (Vec<f64>, Vec<f64>) = points.into_iter().unzip();
    Some(Drift {
        rho: crate::interval::spearman(&x, &y),
        p: crate::interval::spearman_p(&x, &y),
        runs: n,
    })
}

/// A combination's label as its settings: `interval=1s,limit=200` as
/// `[("interval", "1s"), ("limit", "200")]`. A `--vary` value holds no
/// comma (the values are split at commas) and a key no `=`, so the label
/// reads back unambiguously.
fn settings(label: &str) -> Vec<(&str, &str)> {
    if label.is_empty() {
        return Vec::new();
    }
    label
        .split(',')
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .collect()
}

/// Each cell against its reference, in the rows' order:
///
/// - across combinations, for each varied key whose value in the cell is not
///   its first (the first `--vary` value, which the first combination run
///   holds): the same poller with that key at its first value and every
///   other key as in the cell. One key moves at a time, so a difference is
///   that key's, and the first value is the baseline (list the control
///   first: `--vary limit=200,1000`). Other runs: an independent design.
/// - across combinations, for a poller in a set of several (a key of
///   [`POLLER_SETS`], `poller=naive+xmin`): the same poller at each largest
///   smaller set of that key that still holds it ([`fewer_beside`]), unless
///   the rule above already named that cell. So a plan that varies one set
///   (`--vary poller=none,naive,xmin,naive+xmin`) compares naive beside xmin
///   with naive alone, which the set's first value, `none`, cannot.
/// - within a combination, each poller against the combination's first
///   poller (the first `--poller`): the same runs, paired by seed.
///
/// `scales[i]` is row i's unit's row count (100,000 or 1,000); `margin`
/// the equivalence margin stated before the runs.
fn compare(first: &str, rows: &[Row], scales: &[f64], margin: Option<f64>) -> Vec<Comparison> {
    let baseline = settings(first);
    let find = |combination: &str, poller: &str| {
        rows.iter()
            .position(|r| r.combination == combination && r.poller == poller)
    };
    let rate = |i: usize, (_, lost, n): (u64, u64, u64)| lost as f64 * scales[i] / n.max(1) as f64;
    let rates = |i: usize| {
        rows[i]
            .runs
            .iter()
            .map(|&run| rate(i, run))
            .collect::<Vec<f64>>()
    };
    // A cell's Poisson variance of its pooled rate, at least one row lost.
    let floor = |i: usize| {
        let r = &rows[i].lost;
        r.lost.max(1) as f64 * (scales[i] / r.rows.max(1) as f64).powi(2)
    };
    // Row i against row j, the same poller in another combination: other runs.
    let across = |i: usize, j: usize| {
        let d = crate::interval::welch(&rates(i), &rates(j), floor(i), floor(j));
        Comparison {
            combination: rows[i].combination.clone(),
            poller: rows[i].poller.clone(),
            against_combination: rows[j].combination.clone(),
            against_poller: rows[j].poller.clone(),
            design: "independent".into(),
            finding: finding(d.as_ref(), margin).into(),
            difference: d,
            runs: rows[i].runs.len(),
            against_runs: rows[j].runs.len(),
        }
    };
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let cell = settings(&row.combination);
        // Across combinations: one varied key back at its first value.
        for (k, &(key, value)) in cell.iter().enumerate() {
            let Some(&(_, first_value)) = baseline.iter().find(|(b, _)| *b == key) else {
                continue;
            };
            if value == first_value {
                continue;
            }
            let reference = relabel(&cell, k, first_value);
            if let Some(j) = find(&reference, &row.poller) {
                out.push(across(i, j));
            }
        }
        // A poller in a set (`poller=naive+xmin`): against the same poller
        // in each largest smaller set of that key that still holds it, the
        // other keys as in the cell (naive beside xmin against naive alone),
        // where the rule above finds none (the first value, `none`, has no row).
        for j in fewer_beside(rows, i) {
            if !out.iter().any(|c: &Comparison| {
                c.combination == row.combination
                    && c.poller == row.poller
                    && c.against_combination == rows[j].combination
            }) {
                out.push(across(i, j));
            }
        }
        // Within the combination: against its first poller, run by run.
        let Some(j) = rows.iter().position(|r| r.combination == row.combination) else {
            continue;
        };
        if j == i {
            continue;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        // The rows on which the two differ, at least (per run, the
        // difference of their counts), and the pairs' rows.
        let (mut apart, mut pair_rows) = (0u64, 0u64);
        for &run in &row.runs {
            if let Some(&other) = rows[j].runs.iter().find(|&&(s, _, _)| s == run.0) {
                a.push(rate(i, run));
                b.push(rate(j, other));
                apart += run.1.abs_diff(other.1);
                pair_rows += run.2;
            }
        }
        let floor = apart.max(1) as f64 * (scales[i] / pair_rows.max(1) as f64).powi(2);
        let d = crate::interval::paired(&a, &b, floor);
        out.push(Comparison {
            combination: row.combination.clone(),
            poller: row.poller.clone(),
            against_combination: row.combination.clone(),
            against_poller: rows[j].poller.clone(),
            design: "paired".into(),
            finding: finding(d.as_ref(), margin).into(),
            difference: d,
            runs: a.len(),
            against_runs: b.len(),
        });
    }
    out
}

/// A combination's label with its `k`th key at `value`, the others as in `cell`.
fn relabel(cell: &[(&str, &str)], k: usize, value: &str) -> String {
    cell.iter()
        .enumerate()
        .map(|(m, &(key, v))| format!("{key}={}", if m == k { value } else { v }))
        .collect::<Vec<_>>()
        .join(",")
}

/// The keys whose values are sets of pollers, `+` joining the pollers of a run.
const POLLER_SETS: [&str; 2] = ["poller", "id-poller"];

/// The rows of row i's poller beside fewer pollers: for each key of
/// [`POLLER_SETS`] whose value in row i's combination is a set of several
/// pollers, the rows of the same poller whose combination differs only in
/// that key, at a smaller set that still holds the poller, and the largest
/// such (no other between them): what the other pollers of the set add.
fn fewer_beside(rows: &[Row], i: usize) -> Vec<usize> {
    let cell = settings(&rows[i].combination);
    let members = |set: &str| set.split('+').map(str::to_string).collect::<Vec<_>>();
    let mut out = Vec::new();
    for (k, &(key, value)) in cell.iter().enumerate() {
        let set = members(value);
        if !POLLER_SETS.contains(&key) || set.len() < 2 {
            continue;
        }
        // Each candidate: its row and its set, a proper subset holding the poller.
        let smaller: Vec<(usize, Vec<String>)> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.poller == rows[i].poller)
            .filter_map(|(j, r)| {
                let (_, value) = *settings(&r.combination).get(k)?;
                let same_elsewhere = r.combination == relabel(&cell, k, value);
                let sub = members(value);
                (same_elsewhere
                    && sub.len() < set.len()
                    && sub.contains(&rows[i].poller)
                    && sub.iter().all(|p| set.contains(p)))
                .then_some((j, sub))
            })
            .collect();
        out.extend(
            smaller
                .iter()
                .filter(|(_, sub)| {
                    !smaller
                        .iter()
                        .any(|(_, s)| s.len() > sub.len() && sub.iter().all(|p| s.contains(p)))
                })
                .map(|&(j, _)| j),
        );
    }
    out
}

/// Each cell's second half against its first ([`crate::halves`]): the
/// paired t over its runs of each run's loss rate in the second half of
/// its time minus its rate in the first (design `halves`). A run's loss
/// that grows or shrinks within it, a warm-up or tables that slow the
/// server as they grow, shows here where a mean over whole runs hides it.
/// The variance of the mean difference is at least the Poisson variance of
/// the cell's lost rows (at least one), as for two pollers of one run. Only
/// cells whose every run splits by half; none for results judged before
/// the halves were kept.
fn halves(
    results: &[RunResult],
    rows: &[Row],
    scales: &[f64],
    margin: Option<f64>,
) -> Vec<Comparison> {
    let mut out = Vec::new();
    for (row, &scale) in rows.iter().zip(scales) {
        let split: Option<Vec<([u64; 2], [u64; 2])>> = results
            .iter()
            .filter(|r| r.combination == row.combination)
            .filter_map(|r| {
                let p = r.pollers.iter().find(|p| p.poller == row.poller)?;
                Some(p.lost_halves.zip(r.rows_halves))
            })
            .collect();
        let Some(split) = split.filter(|s| !s.is_empty()) else {
            continue;
        };
        let rate = |lost: u64, n: u64| lost as f64 * scale / n.max(1) as f64;
        let second: Vec<f64> = split.iter().map(|(l, n)| rate(l[1], n[1])).collect();
        let first: Vec<f64> = split.iter().map(|(l, n)| rate(l[0], n[0])).collect();
        let lost: u64 = split.iter().map(|(l, _)| l[0] + l[1]).sum();
        let half_rows: u64 = split.iter().map(|(_, n)| (n[0] + n[1]) / 2).sum();
        let floor = lost.max(1) as f64 * (scale / half_rows.max(1) as f64).powi(2);
        let d = crate::interval::paired(&second, &first, floor);
        out.push(Comparison {
            combination: row.combination.clone(),
            poller: row.poller.clone(),
            against_combination: row.combination.clone(),
            against_poller: row.poller.clone(),
            design: "halves".into(),
            finding: finding(d.as_ref(), margin).into(),
            difference: d,
            runs: split.len(),
            against_runs: split.len(),
        });
    }
    out
}

/// What a comparison shows: `equivalent` when its 90 % interval lies inside
/// the margin, `differs` when p < 0.05, else `inconclusive` (so with no
/// margin, "no difference" is never claimed).
fn finding(d: Option<&Difference>, margin: Option<f64>) -> &'static str {
    match (d, margin) {
        (Some(d), Some(m)) if d.within(m) => "equivalent",
        (Some(d), _) if d.p < 0.05 => "differs",
        _ => "inconclusive",
    }
}

/// The summary as a table, one row per combination and poller.
pub fn render(s: &Summary) -> String {
    let cw = s
        .rows
        .iter()
        .map(|r| r.combination.len())
        .chain([11])
        .max()
        .unwrap_or(11);
    let pw = s
        .rows
        .iter()
        .map(|r| r.poller.len())
        .chain([6])
        .max()
        .unwrap_or(6);
    let unit = s.rows.first().map_or("", |r| r.unit.as_str());
    let mut o = format!(
        "{:cw$}  {:pw$}  {:>10} {:>24} {:>10} {:>10} {:>10} {:>5} {:>8} {:>8}   (loss {unit}: leaks, misses and expired rows; loss~p99: Spearman's rho of the runs' loss and the writers' commit p99)\n",
        "combination",
        "poller",
        "rate",
        "95% CI (quasi-Poisson)",
        "min",
        "median",
        "max",
        "runs",
        "flagged",
        "loss~p99"
    );
    for r in &s.rows {
        o.push_str(&format!(
            "{:cw$}  {:pw$}  {:>10.2} {:>24} {:>10.2} {:>10.2} {:>10.2} {:>5} {:>8} {:>8}\n",
            if r.combination.is_empty() {
                "-"
            } else {
                &r.combination
            },
            r.poller,
            r.lost.rate,
            interval(&r.lost),
            r.lost.min,
            r.lost.median,
            r.lost.max,
            r.lost.runs,
            r.flagged,
            r.loss_vs_p99
                .map_or_else(|| "-".to_string(), |rho| format!("{rho:.2}")),
        ));
    }
    o.push_str(&render_writers(s, cw));
    o.push_str(&format!(
        "{} of {} runs flagged (writers more than 5% short of the asked rate, or a load average above the cores)\n",
        s.flagged_runs, s.runs
    ));
    for l in &s.latency_outliers {
        o.push_str(&format!(
            "{} seed {}: the writers' commit p99 was {} ms, its cell's median {} ms: its loss is as much the latency's as the setting's\n",
            if l.combination.is_empty() { "-" } else { &l.combination },
            l.seed,
            l.commit_p99_ms,
            l.cell_p99_ms
        ));
    }
    if let Some(d) = &s.drift {
        o.push_str(&format!(
            "drift over the campaign's time: Spearman's rho {:.2} over {} runs (p {:.3}){}\n",
            d.rho,
            d.runs,
            d.p,
            if d.p < 0.05 {
                ": the later runs lost more or less than the earlier ones whatever their cell; read the cells with care"
            } else {
                ""
            }
        ));
    }
    o.push_str(&render_comparisons(s, unit, cw, pw));
    o
}

/// The writers' figures, a line per combination (none without writers):
/// what the runs did to them, whichever pollers ran.
fn render_writers(s: &Summary, cw: usize) -> String {
    if s.writers.is_empty() {
        return String::new();
    }
    // A median of an even count may end in .5; a whole one prints whole.
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v} ms"));
    // A tick figure over fewer runs than the line's says over how many.
    let tenths = |v: Option<f64>, c: &CellWriters| match v {
        None => "-".to_string(),
        Some(v) if c.tick_runs < c.runs => format!("{v:.1} ms ({})", c.tick_runs),
        Some(v) => format!("{v:.1} ms"),
    };
    let mut o = format!(
        "{:cw$}  {:>5} {:>10} {:>10} {:>10} {:>12} {:>12}   (the writers, median over the runs: commit latency from the transaction's start to COMMIT returned; the server's row lock waits in a run, - where it counts none; the mean latency of the transactions in flight at a poller's tick, and of the one in flight at any instant, sum(L^2)/sum(L), over (n) runs where fewer have them)\n",
        "writers", "runs", "commit p50", "commit p99", "lock waits", "at a tick", "any time"
    );
    for c in &s.writers {
        o.push_str(&format!(
            "{:cw$}  {:>5} {:>10} {:>10} {:>10} {:>12} {:>12}\n",
            if c.combination.is_empty() {
                "-"
            } else {
                &c.combination
            },
            c.runs,
            ms(c.commit_p50_ms),
            ms(c.commit_p99_ms),
            c.lock_waits
                .map_or_else(|| "-".to_string(), |w| w.to_string()),
            tenths(c.at_ticks_ms, c),
            tenths(c.any_time_ms, c),
        ));
    }
    o
}

/// A rate's interval as the table prints it: `[low, high]`, or `0, at most
/// X` when nothing was lost.
fn interval(r: &Rate) -> String {
    if r.lost == 0 && r.rows > 0 {
        format!("0, at most {:.2}", r.ci95.1)
    } else {
        format!("[{:.2}, {:.2}]", r.ci95.0, r.ci95.1)
    }
}

/// The comparisons as a table: a cell, its reference (a combination for an
/// independent design, a poller of the same runs for a paired one), the
/// difference with its 95 % interval and p value, and the finding; then how
/// many comparisons there were (at 5 % each, about one in twenty differs
/// by chance alone) and the margin. Empty without comparisons.
fn render_comparisons(s: &Summary, unit: &str, cw: usize, pw: usize) -> String {
    let heading =
        format!("against the reference ({unit}): the difference with its 95% interval and p value");
    let halves = format!(
        "the halves ({unit}): each cell's second half against its first, paired by run, with its 95% interval and p value"
    );
    comparison_table(&s.comparisons, &heading, s.margin, cw, pw)
        + &comparison_table(&s.halves, &halves, s.margin, cw, pw)
}

/// One table of [`render_comparisons`] under `heading`, with the count of
/// its comparisons and the margin; empty without comparisons.
fn comparison_table(
    cs: &[Comparison],
    heading: &str,
    margin: Option<f64>,
    cw: usize,
    pw: usize,
) -> String {
    if cs.is_empty() {
        return String::new();
    }
    let aw = cs
        .iter()
        .map(|c| against(c).len())
        .chain([7])
        .max()
        .unwrap_or(7);
    let mut o = format!(
        "\n{heading}\n{:cw$}  {:pw$}  {:aw$}  {:11} {:>10} {:>20} {:>7}  {:12} {:>6}\n",
        "combination",
        "poller",
        "against",
        "design",
        "difference",
        "95% CI",
        "p",
        "finding",
        "runs"
    );
    for c in cs {
        let (d, ci, p) = c.difference.as_ref().map_or_else(
            || ("-".to_string(), "-".to_string(), "-".to_string()),
            |d| {
                (
                    format!("{:.2}", d.difference),
                    format!("[{:.2}, {:.2}]", d.ci95.0, d.ci95.1),
                    format!("{:.3}", d.p),
                )
            },
        );
        o.push_str(&format!(
            "{:cw$}  {:pw$}  {:aw$}  {:11} {:>10} {:>20} {:>7}  {:12} {:>6}\n",
            if c.combination.is_empty() {
                "-"
            } else {
                &c.combination
            },
            c.poller,
            against(c),
            c.design,
            d,
            ci,
            p,
            c.finding,
            if c.design == "independent" {
                format!("{}+{}", c.runs, c.against_runs)
            } else {
                c.runs.to_string()
            }
        ));
    }
    o.push_str(&format!(
        "{} comparison{}, each at 5% (about {:.1} would differ by chance alone); {}\n",
        cs.len(),
        if cs.len() == 1 { "" } else { "s" },
        cs.len() as f64 * 0.05,
        match margin {
            Some(m) =>
                format!("equivalent: the 90% interval inside +-{m} (stated before the runs)"),
            None =>
                "no equivalence margin was stated, so no comparison is called equivalent".into(),
        }
    ));
    o
}

/// A comparison's reference as the table names it.
fn against(c: &Comparison) -> &str {
    match c.design.as_str() {
        "paired" => &c.against_poller,
        "halves" => "first half",
        _ => &c.against_combination,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(combination: &str, seed: u64, lost: [u64; 2], rows: u64, flagged: bool) -> RunResult {
        RunResult {
            combination: combination.into(),
            seed,
            db: String::new(),
            target: "postgres".into(),
            rows,
            rows_halves: None,
            pollers: ["naive", "compensated:k=1s"]
                .iter()
                .zip(lost)
                .map(|(p, lost)| PollerLoss {
                    poller: p.to_string(),
                    lost,
                    leaks: lost,
                    verdict: "valid".into(),
                    lost_halves: None,
                })
                .collect(),
            flags: if flagged {
                vec!["load average 3.00 > 2 cores".into()]
            } else {
                Vec::new()
            },
            interrupted: false,
            started_at_ms: seed as i64 * 1_000,
            commit_p50_ms: Some(5),
            commit_p99_ms: Some(40),
            lock_waits: None,
            at_ticks: None,
        }
    }

    /// One median in a report: the loss's and the writers' alike.
    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let results: Vec<RunResult> = [(4, 10), (1, 40), (3, 20), (2, 31)]
            .iter()
            .zip(1..)
            .map(|(&(lost, p99), seed)| RunResult {
                commit_p99_ms: Some(p99),
                ..run("", seed, [lost, 0], 100_000, false)
            })
            .collect();
        let s = summarize(&results);
        let o = &s.rows[0].lost;
        assert_eq!((o.min, o.median, o.max, o.runs), (1.0, 2.5, 4.0, 4));
        assert_eq!((o.rate, o.lost, o.rows), (2.5, 10, 400_000));
        assert_eq!(s.writers[0].commit_p99_ms, Some(25.5));
        assert!(render(&s).contains("5 ms    25.5 ms"), "{}", render(&s));
    }

    #[test]
    fn one_row_per_combination_and_poller_with_the_loss_per_100k_rows_and_the_flagged_runs() {
        let results = [
            run("interval=1s", 1, [2, 0], 20_000, false),
            run("interval=1s", 2, [6, 0], 20_000, true),
            run("interval=2s", 1, [1, 0], 10_000, false),
            run("interval=2s", 2, [0, 0], 10_000, false),
        ];
        let s = summarize(&results);
        assert_eq!(s.rows.len(), 4);
        assert_eq!((s.runs, s.flagged_runs), (4, 1));
        let naive_1s = &s.rows[0];
        assert_eq!(
            (naive_1s.combination.as_str(), naive_1s.poller.as_str()),
            ("interval=1s", "naive")
        );
        assert_eq!(
            (naive_1s.lost.min, naive_1s.lost.median, naive_1s.lost.max),
            (10.0, 20.0, 30.0)
        );
        assert_eq!(naive_1s.flagged, 1);
        // Pooled: 8 of 40,000 rows.
        assert_eq!(naive_1s.lost.rate, 20.0);
        assert_eq!(s.rows[2].lost.max, 10.0);
        let text = render(&s);
        assert!(text.contains("per 100,000 rows"), "{text}");
        assert!(text.contains("1 of 4 runs flagged"), "{text}");
    }

    fn comparison<'a>(
        s: &'a Summary,
        combination: &str,
        poller: &str,
        against: &str,
    ) -> &'a Comparison {
        s.comparisons
            .iter()
            .find(|c| {
                c.combination == combination
                    && c.poller == poller
                    && (c.against_combination == against || c.against_poller == against)
            })
            .unwrap_or_else(|| panic!("no {combination} {poller} against {against}: {s:?}"))
    }

    /// The writers alone first (no poller, so no row): each poller set is
    /// still compared with the set one key back at its first value, `none`.
    #[test]
    fn a_first_combination_without_pollers_is_still_the_reference() {
        let mut results = Vec::new();
        for (combination, pollers) in [
            ("poller=none,id-poller=none", 0),
            ("poller=none,id-poller=incrementing", 1),
            ("poller=naive,id-poller=none", 1),
            ("poller=naive,id-poller=incrementing", 2),
        ] {
            for seed in 1..=3 {
                let mut r = run(combination, seed, [seed, seed], 100_000, false);
                r.pollers.truncate(pollers);
                if combination.ends_with("id-poller=incrementing") {
                    r.pollers.last_mut().unwrap().poller = "incrementing".into();
                }
                results.push(r);
            }
        }
        let s = summarize(&results);
        let against = |combination: &str, poller: &str| -> Vec<String> {
            s.comparisons
                .iter()
                .filter(|c| c.combination == combination && c.poller == poller)
                .map(|c| format!("{} {}", c.against_combination, c.against_poller))
                .collect()
        };
        assert_eq!(
            against("poller=naive,id-poller=none", "naive"),
            Vec::<String>::new()
        );
        assert_eq!(
            against("poller=naive,id-poller=incrementing", "naive"),
            ["poller=naive,id-poller=none naive"]
        );
        assert_eq!(
            against("poller=naive,id-poller=incrementing", "incrementing"),
            [
                "poller=none,id-poller=incrementing incrementing",
                "poller=naive,id-poller=incrementing naive"
            ]
        );
        assert_eq!(s.writers.len(), 4, "the writers alone have their line");
    }

    /// One key of poller sets (F3's plan, docs/campaigns.md): a poller in a
    /// set is compared with the same poller in the largest smaller set that
    /// holds it, other keys as in the cell; never with a set that lacks it,
    /// and once, however many rules name the cell.
    #[test]
    fn a_poller_in_a_set_is_compared_with_it_beside_fewer() {
        let mut results = Vec::new();
        for interval in ["50ms", "1s"] {
            for set in ["none", "naive", "xmin+cure", "naive+xmin+cure"] {
                for seed in 1..=3 {
                    let mut r = run(
                        &format!("poller={set},interval={interval}"),
                        seed,
                        [seed, 0],
                        100_000,
                        false,
                    );
                    let members: Vec<&str> = set.split('+').filter(|p| *p != "none").collect();
                    r.pollers = members
                        .iter()
                        .map(|p| PollerLoss {
                            poller: p.to_string(),
                            ..r.pollers[0].clone()
                        })
                        .collect();
                    results.push(r);
                }
            }
        }
        let s = summarize(&results);
        let against = |combination: &str, poller: &str| -> Vec<String> {
            s.comparisons
                .iter()
                .filter(|c| {
                    c.design == "independent" && c.combination == combination && c.poller == poller
                })
                .map(|c| c.against_combination.clone())
                .collect()
        };
        assert_eq!(
            against("poller=naive+xmin+cure,interval=1s", "naive"),
            [
                "poller=naive+xmin+cure,interval=50ms",
                "poller=naive,interval=1s"
            ]
        );
        assert_eq!(
            against("poller=naive+xmin+cure,interval=50ms", "cure"),
            ["poller=xmin+cure,interval=50ms"]
        );
        assert_eq!(
            against("poller=naive,interval=50ms", "naive"),
            Vec::<String>::new(),
            "alone, and the first value has no row"
        );
        assert_eq!(
            against("poller=xmin+cure,interval=50ms", "xmin"),
            Vec::<String>::new(),
            "no smaller set holds xmin"
        );
    }

    /// Two keys varied: each cell is compared with the cell one key back at
    /// its first value, the same poller, never with a cell two keys away.
    #[test]
    fn each_cell_against_the_cell_with_one_key_at_its_first_value() {
        let mut results = Vec::new();
        for mode in ["0", "1"] {
            for interval in ["1s", "50ms"] {
                for seed in 1..=3 {
                    // naive: 10, 20, 30 per 100,000 at mode 0, 10 more at mode 1.
                    let base = 10 * seed + if mode == "1" { 10 } else { 0 };
                    results.push(run(
                        &format!("autoinc-lock-mode={mode},interval={interval}"),
                        seed,
                        [base, 0],
                        100_000,
                        false,
                    ));
                }
            }
        }
        let s = summarize(&results);
        let c = comparison(
            &s,
            "autoinc-lock-mode=1,interval=50ms",
            "naive",
            "autoinc-lock-mode=0,interval=50ms",
        );
        assert_eq!(
            (c.design.as_str(), c.runs, c.against_runs),
            ("independent", 3, 3)
        );
        let d = c.difference.as_ref().unwrap();
        assert!((d.difference - 10.0).abs() < 1e-9, "{c:?}");
        // Welch: each side 10, 20, 30 (variance of the mean 100/3), 4 df:
        // t = 10 / 8.165 = 1.22, p = 0.29; 10 ± 2.776 · 8.165.
        assert!((d.p - 0.288).abs() < 0.002, "{c:?}");
        assert!((d.ci95.1 - (10.0 + 2.776 * 8.165)).abs() < 0.01, "{c:?}");
        assert_eq!(c.finding, "inconclusive");
        let c = comparison(
            &s,
            "autoinc-lock-mode=1,interval=50ms",
            "naive",
            "autoinc-lock-mode=1,interval=1s",
        );
        assert!(
            c.difference.as_ref().unwrap().difference.abs() < 1e-9,
            "{c:?}"
        );
        // Per poller, the cells off the baseline: (0,50ms) once, (1,1s)
        // once, (1,50ms) twice; the first cell is nobody's subject.
        let independent = |p: &str| {
            s.comparisons
                .iter()
                .filter(|c| c.design == "independent" && c.poller == p)
                .count()
        };
        assert_eq!(independent("naive"), 4);
        assert!(!s.comparisons.iter().any(|c| c.against_combination
            == "autoinc-lock-mode=0,interval=1s"
            && c.combination == "autoinc-lock-mode=1,interval=50ms"));
    }

    /// Pollers of one combination share its runs: compared run by run, the
    /// load that moves both cancels out.
    #[test]
    fn pollers_of_a_combination_are_paired_by_seed() {
        let results = [
            run("", 1, [30, 28], 100_000, false),
            run("", 2, [60, 58], 100_000, false),
            run("", 3, [90, 88], 100_000, false),
        ];
        let s = summarize(&results);
        assert_eq!(s.comparisons.len(), 1);
        let c = comparison(&s, "", "compensated:k=1s", "naive");
        assert_eq!((c.design.as_str(), c.runs), ("paired", 3));
        let d = c.difference.as_ref().unwrap();
        // The differences do not vary (k = 1 s lost exactly two rows fewer
        // in every run), so the Poisson floor of the 6 rows apart is left:
        // se sqrt(6) / 300,000 rows, per 100,000 (0.82), on 2 df.
        assert!((d.difference + 2.0).abs() < 1e-9, "{d:?}");
        let se = 6f64.sqrt() / 3.0;
        assert!((d.ci95.1 - (-2.0 + 4.303 * se)).abs() < 0.01, "{d:?}");
        assert_eq!(c.finding, "inconclusive");
    }

    /// Nothing lost in any run: each cell is "0, at most" its rule-of-three
    /// bound, and the difference is not called none unless a margin was
    /// stated before the runs and the 90 % interval lies inside it.
    #[test]
    fn no_loss_is_at_most_a_bound_and_equivalent_only_inside_a_margin() {
        let results: Vec<RunResult> = ["limit=200", "limit=1000"]
            .iter()
            .flat_map(|c| (1..=10).map(move |seed| run(c, seed, [0, 0], 54_000, false)))
            .collect();
        let s = summarize(&results);
        let c = comparison(&s, "limit=1000", "naive", "limit=200");
        let d = c.difference.as_ref().unwrap();
        assert_eq!((d.difference, d.p), (0.0, 1.0));
        // The Poisson floor of one row in 540,000 keeps the interval open.
        assert!(d.ci95.0 < -0.2 && d.ci95.1 > 0.2, "{d:?}");
        assert_eq!(c.finding, "inconclusive");
        let text = render(&s);
        // 3.0 / 540,000 rows, per 100,000, widened by 1.332 (10 runs).
        assert!(
            text.lines()
                .any(|l| l.starts_with("limit=200") && l.contains("0, at most 0.74")),
            "{text}"
        );
        assert!(text.contains("no equivalence margin was stated"), "{text}");
        assert!(
            text.lines().any(|l| l.starts_with("limit=1000")
                && l.contains("limit=200")
                && l.contains("independent")
                && l.contains("inconclusive")
                && l.ends_with("10+10")),
            "{text}"
        );
        let s = summarize_with(&results, Some(1.0));
        let c = comparison(&s, "limit=1000", "naive", "limit=200");
        assert_eq!(c.finding, "equivalent");
        assert!(render(&s).contains("inside +-1"), "{}", render(&s));
        let s = summarize_with(&results, Some(0.1));
        assert_eq!(
            comparison(&s, "limit=1000", "naive", "limit=200").finding,
            "inconclusive"
        );
    }

    #[test]
    fn one_run_has_no_difference_to_report() {
        let s = summarize(&[run("", 1, [3, 0], 1_000, false)]);
        let c = comparison(&s, "", "compensated:k=1s", "naive");
        assert_eq!(
            (c.difference.as_ref(), c.finding.as_str()),
            (None, "inconclusive")
        );
        let text = render(&s);
        let line = text.lines().rev().nth(1).unwrap();
        assert!(line.contains("paired") && line.contains(" - "), "{text}");
        assert!(text.ends_with("1 comparison, each at 5% (about 0.1 would differ by chance alone); no equivalence margin was stated, so no comparison is called equivalent\n"), "{text}");
    }

    /// Later runs losing more, whatever their cell, is drift; the same
    /// losses in a shuffled time order are not.
    #[test]
    fn drift_over_the_campaigns_time_is_checked() {
        let losses = [10u64, 12, 15, 18, 20, 25, 28, 30, 35, 40];
        let rising: Vec<RunResult> = losses
            .iter()
            .zip(1..)
            .flat_map(|(&l, seed)| {
                ["limit=200", "limit=1000"].map(|c| run(c, seed, [l, l / 2], 100_000, false))
            })
            .collect();
        let s = summarize(&rising);
        let d = s.drift.as_ref().unwrap();
        assert_eq!((d.rho, d.runs), (1.0, 20));
        assert!(d.p < 0.001, "{d:?}");
        assert!(
            render(&s).contains("read the cells with care"),
            "{}",
            render(&s)
        );
        // The same runs, started in an order unrelated to their loss.
        let mut shuffled = rising.clone();
        for (r, at) in shuffled
            .iter_mut()
            .zip([7, 2, 9, 4, 1, 10, 6, 3, 8, 5].iter().cycle().zip(0..))
        {
            r.started_at_ms = (at.0 * 100 + at.1) as i64;
        }
        let s = summarize(&shuffled);
        let d = s.drift.as_ref().unwrap();
        assert!(d.p > 0.05, "{d:?}");
        assert!(!render(&s).contains("read the cells with care"));
        // Too few runs with a loss: no check.
        assert_eq!(summarize(&rising[..2]).drift, None);
    }

    /// Each cell's writers' commit p99 beside its loss, the loss's rank
    /// correlation with it, and a run whose p99 departs from its cell's.
    #[test]
    fn the_writers_latency_stands_beside_each_cell() {
        let mut results: Vec<RunResult> = (1..=5)
            .map(|seed| run("", seed, [seed * 10, 0], 100_000, false))
            .collect();
        let waits = [Some(9), None, Some(1), Some(4), Some(7)];
        for ((r, p99), waits) in results.iter_mut().zip([30, 35, 40, 45, 200]).zip(waits) {
            r.commit_p99_ms = Some(p99);
            r.lock_waits = waits;
        }
        // The writers at the ticks: the medians over the runs that have
        // them (2.0 of 1.0, 2.0, 3.5; 1.5 of 1.2, 1.5, 1.5, 1.6).
        let at = [Some(1.0), Some(3.5), None, Some(2.0), None];
        let any = [1.2, 1.5, 1.6, 1.5, 0.0];
        for (i, r) in results.iter_mut().enumerate().take(4) {
            r.at_ticks = Some(AtTicks {
                in_flight: u64::from(at[i].is_some()),
                at_ticks_ms: at[i],
                any_time_ms: any[i],
            });
        }
        // A control cell: the writers alone (`--no-pollers`), no loss row.
        let mut alone = run("no-pollers", 1, [0, 0], 100_000, false);
        alone.pollers.clear();
        alone.commit_p99_ms = Some(12);
        results.push(alone);
        let s = summarize(&results);
        assert_eq!(
            s.writers,
            [
                CellWriters {
                    combination: String::new(),
                    runs: 5,
                    commit_p50_ms: Some(5.0),
                    commit_p99_ms: Some(40.0),
                    // The median of the runs that counted them (1, 4, 7,
                    // 9): the mean of the middle two.
                    lock_waits: Some(5.5),
                    at_ticks_ms: Some(2.0),
                    any_time_ms: Some(1.5),
                    tick_runs: 4,
                },
                CellWriters {
                    combination: "no-pollers".into(),
                    runs: 1,
                    commit_p50_ms: Some(5.0),
                    commit_p99_ms: Some(12.0),
                    lock_waits: None,
                    at_ticks_ms: None,
                    any_time_ms: None,
                    tick_runs: 0,
                }
            ]
        );
        assert!(
            s.rows.iter().all(|r| r.combination.is_empty()),
            "no loss row for the control"
        );
        // Loss rises with the p99, run by run.
        assert_eq!(s.rows[0].loss_vs_p99, Some(1.0));
        assert_eq!(
            s.latency_outliers,
            [LatencyOutlier {
                combination: String::new(),
                seed: 5,
                commit_p99_ms: 200,
                cell_p99_ms: 40.0,
            }],
            "one line per run, not per poller"
        );
        let text = render(&s);
        assert!(
            text.contains("- seed 5: the writers' commit p99 was 200 ms, its cell's median 40 ms"),
            "{text}"
        );
        assert!(text.lines().nth(1).unwrap().ends_with("1.00"), "{text}");
        assert!(
            text.contains(
                "\n-                5       5 ms      40 ms        5.5   2.0 ms (4)   1.5 ms (4)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\nno-pollers       1       5 ms      12 ms          -            -            -\n"
            ),
            "{text}"
        );
        // A target without writers' brackets: no writers' lines.
        for r in &mut results {
            r.commit_p99_ms = None;
            r.lock_waits = None;
        }
        let s = summarize(&results);
        assert_eq!((s.writers.len(), s.latency_outliers.len()), (0, 0));
        assert!(!render(&s).contains("commit p50"));
    }

    /// A cell whose runs lose more in their second half than in their
    /// first differs from it; one whose halves lose alike does not; results
    /// kept before the halves print no halves at all.
    #[test]
    fn each_cells_second_half_is_compared_with_its_first() {
        let split = |r: &mut RunResult, naive: [u64; 2], compensated: [u64; 2]| {
            r.rows_halves = Some([50_000, 50_000]);
            r.pollers[0].lost_halves = Some(naive);
            r.pollers[1].lost_halves = Some(compensated);
        };
        let mut results: Vec<RunResult> = (1..=10)
            .map(|seed| {
                let extra = seed % 3;
                let mut r = run("", seed, [12 + extra, 4 + extra], 100_000, false);
                split(&mut r, [2, 10 + extra], [2, 2 + extra]);
                r
            })
            .collect();
        let s = summarize_with(&results, Some(3.0));
        let naive = s.halves.iter().find(|c| c.poller == "naive").unwrap();
        let d = naive.difference.as_ref().unwrap();
        // Per 100,000 rows: (10 + extra - 2) per 50,000 rows a half.
        assert!((d.difference - 2.0 * 9.0).abs() < 1e-9, "{d:?}");
        assert_eq!((naive.finding.as_str(), naive.runs), ("differs", 10));
        let compensated = s.halves.iter().find(|c| c.poller != "naive").unwrap();
        assert_ne!(compensated.finding, "differs", "{compensated:?}");
        let text = render(&s);
        assert!(
            text.contains(
                "the halves (per 100,000 rows): each cell's second half against its first"
            ),
            "{text}"
        );
        assert!(
            text.lines().any(|l| l.starts_with("-")
                && l.contains("naive")
                && l.contains("first half")
                && l.contains("halves")
                && l.contains("differs")),
            "{text}"
        );
        // One run without halves: its cell prints none.
        results[3].rows_halves = None;
        assert!(summarize(&results).halves.is_empty());
        let before = run("", 1, [3, 0], 1_000, false);
        assert!(!render(&summarize(&[before.clone(), before])).contains("the halves"));
    }

    #[test]
    fn misskey_ftt_counts_per_1000_notes() {
        let mut r = run("", 1, [3, 0], 600, false);
        r.target = "misskey-ftt".into();
        let s = summarize(&[r]);
        assert_eq!(s.rows[0].unit, "per 1,000 notes");
        assert_eq!(s.rows[0].lost.median, 5.0);
    }
}
