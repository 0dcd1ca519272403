//! The sweep's judging and summary: `experiment sweep` runs the virtual
//! experiment over many seeds and judges each seed's run with the same
//! checker as `analyze` ([`crate::diff`], [`crate::oracle`]), on a history
//! built in memory ([`crate::history_builder`]); this module turns each
//! judged run into one row per poller ([`judge`]), stores the rows in
//! `sweep.db` ([`store`]: a sweep of 100 hours writes kilobytes, not the
//! gigabytes of its observations) and summarises them per poller
//! ([`summarize`], [`render`]). It depends on no experiment code: the
//! experiment's binary depends on this library, not the other way round.

use crate::diff::{Distribution, analyze};
use crate::history::History;
use crate::interval::{OverRuns, over_runs};
use crate::oracle;
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What one seed's run says about one poller (a planned run stores it as
/// JSON, every value an integer, so it reads back exactly).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeedRow {
    pub seed: u64,
    pub poller: String,
    pub requests: u64,
    /// Statuses the poller returned (new ones).
    pub seen: u64,
    pub duplicates: u64,
    pub leaks: u64,
    pub missed: u64,
    /// The most requests of this poller within any 15 minutes of the run.
    pub max_requests_15min: u64,
    pub detection_p50_ms: Option<i64>,
    pub detection_p99_ms: Option<i64>,
    pub detection_max_ms: Option<i64>,
    pub oracle_duplicates: Option<u64>,
    pub oracle_new: Option<u64>,
    pub duration_ms: u64,
}

/// A whole seed: its rows, and the lateness of its statuses (for the plot).
pub struct SeedResult {
    pub rows: Vec<SeedRow>,
    /// visible_at - ID time of every status of the truth, ms.
    pub lateness_ms: Vec<i64>,
    /// The statuses of the truth (the simulator created them): the
    /// denominator of `lost_per_100k`.
    pub statuses: u64,
}

/// The most requests within any `window_ms` (sorted send times).
pub fn max_in_window(sent: &[i64], window_ms: i64) -> u64 {
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..sent.len() {
        while sent[hi] - sent[lo] >= window_ms {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best as u64
}

/// Judges one seed's run: one row per poller of `h` (named as in the run),
/// and the lateness of every status of the truth.
pub fn judge(h: &History, seed: u64, duration_ms: u64) -> SeedResult {
    let a = analyze(h);
    let costs = oracle::costs(h, &a);
    let mut sent: Vec<Vec<i64>> = vec![Vec::new(); h.pollers.len()];
    for r in &h.requests {
        sent[r.poller].push(r.sent_at_ms);
    }
    let rows = h
        .pollers
        .iter()
        .zip(&a.pollers)
        .enumerate()
        .map(|(i, (p, s))| {
            sent[i].sort_unstable();
            let d: Option<Distribution> = costs.delays[i];
            SeedRow {
                seed,
                poller: p.name.clone(),
                requests: s.requests,
                seen: s.seen,
                duplicates: s.duplicates,
                leaks: s.leaks,
                missed: s.missed(),
                max_requests_15min: max_in_window(&sent[i], 15 * 60 * 1000),
                detection_p50_ms: d.map(|d| d.p50),
                detection_p99_ms: d.map(|d| d.p99),
                detection_max_ms: d.map(|d| d.max),
                oracle_duplicates: costs.oracle.map(|o| o.duplicates),
                oracle_new: costs.oracle.map(|o| o.new),
                duration_ms,
            }
        })
        .collect();
    let lateness_ms: Vec<i64> = h.lateness_ms().collect();
    let statuses = lateness_ms.len() as u64;
    SeedResult {
        rows,
        lateness_ms,
        statuses,
    }
}

/// Per poller, across seeds: what the sweep prints and `--json` gives.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PollerSummary {
    pub name: String,
    pub seeds: usize,
    pub seeds_without_leaks: usize,
    pub leaks_mean: f64,
    /// The 95 % interval of the mean, `[low, high]`.
    pub leaks_ci95: [f64; 2],
    pub duplicates_per_new: f64,
    pub requests_per_minute: f64,
    pub max_requests_15min: u64,
    pub detection_delay_ms_p99: Option<i64>,
    pub oracle_ratio: Option<f64>,
    /// Leaks per 100,000 statuses of the truth, one value per run: mean,
    /// percentile-bootstrap 95 % interval over runs, min, median, max, runs
    /// ([`crate::interval::over_runs`], seed [`BOOTSTRAP_SEED`]).
    pub lost_per_100k: OverRuns,
}

/// The bootstrap's seed: fixed, so that the same sweep prints the same
/// interval every time.
pub const BOOTSTRAP_SEED: u64 = 1;

/// Leaks per 100,000 statuses of one run (0 for a run without statuses).
fn per_100k(leaks: u64, statuses: u64) -> f64 {
    if statuses == 0 {
        0.0
    } else {
        leaks as f64 * 100_000.0 / statuses as f64
    }
}

fn r3_over_runs(o: OverRuns) -> OverRuns {
    OverRuns {
        mean: r3(o.mean),
        ci95: (r3(o.ci95.0), r3(o.ci95.1)),
        min: r3(o.min),
        median: r3(o.median),
        max: r3(o.max),
        runs: o.runs,
    }
}

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom
/// (from any table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2); 1.96 beyond.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// Mean and its 95 % interval (Student's t; a single value has no spread).
/// Leak counts are never negative, so the interval is cut at 0.
pub fn mean_ci95(values: &[f64]) -> (f64, [f64; 2]) {
    let n = values.len();
    if n == 0 {
        return (0.0, [0.0, 0.0]);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (mean, [mean, mean]);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T975.get(n - 2).copied().unwrap_or(1.96);
    let half = t * (var / n as f64).sqrt();
    (mean, [(mean - half).max(0.0), mean + half])
}

/// Round to 3 decimals, for printing and JSON.
fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The per-poller summary, in the order the pollers were given. The
/// detection delay p99 is the worst seed's (the goal is per run); duplicates
/// per new status and the oracle ratio pool all seeds.
pub fn summarize(results: &[SeedResult]) -> Vec<PollerSummary> {
    let names: Vec<String> = results
        .first()
        .map(|r| r.rows.iter().map(|row| row.poller.clone()).collect())
        .unwrap_or_default();
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let rows: Vec<&SeedRow> = results.iter().filter_map(|r| r.rows.get(i)).collect();
            let rates: Vec<f64> = results
                .iter()
                .filter_map(|r| r.rows.get(i).map(|row| per_100k(row.leaks, r.statuses)))
                .collect();
            let leaks: Vec<f64> = rows.iter().map(|r| r.leaks as f64).collect();
            let (mean, ci) = mean_ci95(&leaks);
            let seen: u64 = rows.iter().map(|r| r.seen).sum();
            let dups: u64 = rows.iter().map(|r| r.duplicates).sum();
            let minutes: f64 = rows.iter().map(|r| r.duration_ms as f64 / 60_000.0).sum();
            let requests: u64 = rows.iter().map(|r| r.requests).sum();
            let oracle: u64 = rows.iter().filter_map(|r| r.oracle_duplicates).sum();
            PollerSummary {
                name: name.clone(),
                seeds: rows.len(),
                seeds_without_leaks: rows.iter().filter(|r| r.leaks == 0).count(),
                leaks_mean: r3(mean),
                leaks_ci95: [r3(ci[0]), r3(ci[1])],
                duplicates_per_new: r3(if seen == 0 {
                    0.0
                } else {
                    dups as f64 / seen as f64
                }),
                requests_per_minute: r3(if minutes > 0.0 {
                    requests as f64 / minutes
                } else {
                    0.0
                }),
                max_requests_15min: rows.iter().map(|r| r.max_requests_15min).max().unwrap_or(0),
                detection_delay_ms_p99: rows.iter().filter_map(|r| r.detection_p99_ms).max(),
                oracle_ratio: (oracle > 0).then(|| r3(dups as f64 / oracle as f64)),
                lost_per_100k: r3_over_runs(over_runs(&rates, BOOTSTRAP_SEED)),
            }
        })
        .collect()
}

/// The oracle's duplicates per new status, pooled over seeds.
pub fn oracle_duplicates_per_new(results: &[SeedResult]) -> Option<f64> {
    let rows: Vec<&SeedRow> = results.iter().filter_map(|r| r.rows.first()).collect();
    let dups: u64 = rows.iter().filter_map(|r| r.oracle_duplicates).sum();
    let new: u64 = rows.iter().filter_map(|r| r.oracle_new).sum();
    (new > 0).then(|| r3(dups as f64 / new as f64))
}

/// Writes the per-seed table to `path` (created if needed), as sweep N; returns N.
pub fn store(path: &Path, config: &str, results: &[SeedResult]) -> Result<i64, String> {
    let mut conn = Connection::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let sql = |e: rusqlite::Error| format!("{}: {e}", path.display());
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS sweeps (id INTEGER PRIMARY KEY, config TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS seed_results (
             sweep_id INTEGER NOT NULL REFERENCES sweeps(id), seed INTEGER NOT NULL,
             poller TEXT NOT NULL, requests INTEGER NOT NULL, seen INTEGER NOT NULL,
             duplicates INTEGER NOT NULL, leaks INTEGER NOT NULL, missed INTEGER NOT NULL,
             max_requests_15min INTEGER NOT NULL, detection_p50_ms INTEGER,
             detection_p99_ms INTEGER, detection_max_ms INTEGER, oracle_duplicates INTEGER,
             oracle_new INTEGER, duration_ms INTEGER NOT NULL,
             PRIMARY KEY (sweep_id, seed, poller));",
    )
    .map_err(sql)?;
    let tx = conn.transaction().map_err(sql)?;
    tx.execute("INSERT INTO sweeps (config) VALUES (?1)", [config])
        .map_err(sql)?;
    let id = tx.last_insert_rowid();
    {
        let mut st = tx
            .prepare(
                "INSERT INTO seed_results VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            )
            .map_err(sql)?;
        for r in results.iter().flat_map(|r| &r.rows) {
            st.execute(params![
                id,
                r.seed as i64,
                r.poller,
                r.requests as i64,
                r.seen as i64,
                r.duplicates as i64,
                r.leaks as i64,
                r.missed as i64,
                r.max_requests_15min as i64,
                r.detection_p50_ms,
                r.detection_p99_ms,
                r.detection_max_ms,
                r.oracle_duplicates.map(|v| v as i64),
                r.oracle_new.map(|v| v as i64),
                r.duration_ms as i64,
            ])
            .map_err(sql)?;
        }
    }
    tx.commit().map_err(sql)?;
    Ok(id)
}

/// Parses `1-100`, `7` or `1,5,9-12`.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("bad --seeds '{text}': expected A-B, N or a comma list of them");
    let mut seeds = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b || b - a >= 100_000 {
                    return Err(bad());
                }
                seeds.extend(a..=b);
            }
            None => seeds.push(part.parse().map_err(|_| bad())?),
        }
    }
    if seeds.is_empty() || seeds.len() > 100_000 {
        return Err(bad());
    }
    Ok(seeds)
}

/// The text table.
pub fn render(summary: &[PollerSummary], oracle: Option<f64>) -> String {
    use std::fmt::Write as _;
    let width = summary
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:width$}  {:>9} {:>10} {:>19} {:>8} {:>8} {:>9} {:>11} {:>8}",
        "poller",
        "no-leak",
        "leaks",
        "95% interval",
        "dup/new",
        "req/min",
        "max/15m",
        "detect p99",
        "/oracle"
    );
    for p in summary {
        let _ = writeln!(
            o,
            "{:width$}  {:>9} {:>10.2} {:>19} {:>8.3} {:>8.2} {:>9} {:>11} {:>8}",
            p.name,
            format!("{}/{}", p.seeds_without_leaks, p.seeds),
            p.leaks_mean,
            format!("[{:.2}, {:.2}]", p.leaks_ci95[0], p.leaks_ci95[1]),
            p.duplicates_per_new,
            p.requests_per_minute,
            p.max_requests_15min,
            p.detection_delay_ms_p99
                .map_or("-".into(), |d| format!("{d} ms")),
            p.oracle_ratio.map_or("-".into(), |r| format!("{r:.1}")),
        );
    }
    if let Some(o_dpn) = oracle {
        let _ = writeln!(
            o,
            "oracle: {o_dpn:.3} duplicates per new status, no leaks (the floor for pollers that detect at the first tick)"
        );
    }
    let _ = writeln!(
        o,
        "{:width$}  {:>10} {:>23} {:>10} {:>10} {:>10} {:>5}",
        "leaks per 100,000 statuses, over runs",
        "mean",
        "95% bootstrap interval",
        "min",
        "median",
        "max",
        "runs",
        width = width.max(37)
    );
    for p in summary {
        let l = &p.lost_per_100k;
        let _ = writeln!(
            o,
            "{:width$}  {:>10.2} {:>23} {:>10.2} {:>10.2} {:>10.2} {:>5}",
            p.name,
            l.mean,
            format!("[{:.2}, {:.2}]", l.ci95.0, l.ci95.1),
            l.min,
            l.median,
            l.max,
            l.runs,
            width = width.max(37)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse() {
        assert_eq!(parse_seeds("1-3").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_seeds("7").unwrap(), vec![7]);
        assert_eq!(parse_seeds("1,5,9-10").unwrap(), vec![1, 5, 9, 10]);
        for bad in ["", "3-1", "a", "1-", "0-1000000"] {
            assert!(parse_seeds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn interval_of_the_mean() {
        let (m, ci) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        // sd 1, n 3, t(2) = 4.303.
        assert!((ci[1] - (2.0 + 4.303 / 3f64.sqrt())).abs() < 1e-9);
        assert_eq!(mean_ci95(&[0.0; 100]), (0.0, [0.0, 0.0]));
    }

    fn row(poller: &str, leaks: u64) -> SeedRow {
        SeedRow {
            poller: poller.into(),
            leaks,
            ..SeedRow::default()
        }
    }

    /// Each run's leaks over its own statuses, then the bootstrap over runs.
    #[test]
    fn lost_per_100k_is_over_runs() {
        let results: Vec<SeedResult> = [(1, 10_000), (3, 20_000), (0, 10_000)]
            .into_iter()
            .map(|(leaks, statuses)| SeedResult {
                rows: vec![row("naive", leaks)],
                lateness_ms: Vec::new(),
                statuses,
            })
            .collect();
        let l = &summarize(&results)[0].lost_per_100k;
        assert_eq!((l.min, l.median, l.max, l.runs), (0.0, 10.0, 15.0, 3));
        assert!((l.mean - 25.0 / 3.0).abs() < 1e-3);
        assert!(l.ci95.0 <= l.mean && l.mean <= l.ci95.1);
        let text = render(&summarize(&results), None);
        assert!(text.contains("95% bootstrap interval"), "{text}");
    }

    #[test]
    fn fifteen_minute_window() {
        let sent: Vec<i64> = (0..2000).map(|i| i * 1000).collect();
        assert_eq!(max_in_window(&sent, 900_000), 900);
        assert_eq!(max_in_window(&[0, 1, 2, 900_000], 900_000), 3);
    }
}
