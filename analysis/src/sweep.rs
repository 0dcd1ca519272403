//! `sweep`: the virtual experiment over many seeds, judged by the same
//! checker as `analyze`, summarised per seed and poller.
//!
//! Each seed runs `experiment --clock virtual` (the `snowleak` library's
//! [`snowleak::run_experiment`]) into a scratch database, which is loaded
//! and judged exactly as `analyze` does ([`crate::load`], [`crate::diff`],
//! [`crate::oracle`]) and then deleted: only one row per seed and poller is
//! kept, in `sweep.db`, so a sweep of 100 hours writes kilobytes, not the
//! gigabytes of its observations. Seeds run in parallel on scoped threads,
//! one per core.
//!
//! It lives in the analysis crate because it needs both libraries: the
//! analysis crate already depends on the experiment crate, so
//! `experiment sweep` would make a cycle.

use crate::diff::{Distribution, analyze};
use crate::oracle;
use rusqlite::{Connection, params};
use serde::Serialize;
use snowleak::RunArgs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What one seed's run says about one poller.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
}

/// The `experiment` options of one seed's run, checked by the experiment's own parser.
pub fn run_args(base: &[String], seed: u64, db: &Path) -> Result<RunArgs, String> {
    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        run: RunArgs,
    }
    let mut argv: Vec<String> = vec!["experiment".into()];
    argv.extend(base.iter().cloned());
    argv.extend([
        "--clock".into(),
        "virtual".into(),
        "--seed".into(),
        seed.to_string(),
        "--db".into(),
        db.display().to_string(),
    ]);
    let parsed = <Wrapper as clap::Parser>::try_parse_from(argv).map_err(|e| {
        let text = e.to_string();
        text.lines().next().unwrap_or("bad arguments").to_string()
    })?;
    let mut run = parsed.run;
    run.quiet = true;
    Ok(run)
}

/// The most requests within any `window_ms` (sorted send times).
fn max_in_window(sent: &[i64], window_ms: i64) -> u64 {
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

/// Runs one seed in `scratch` (deleted after) and judges it.
pub fn run_seed(base: &[String], seed: u64, scratch: &Path) -> Result<SeedResult, String> {
    let db = scratch.join(format!("seed-{seed}.db"));
    remove_db(&db);
    let args = run_args(base, seed, &db)?;
    let duration_ms = args.duration;
    let result = (|| {
        let summary = snowleak::run_experiment(args)?;
        let conn = crate::load::open(&db).map_err(|e| e.to_string())?;
        let loaded = crate::load::load(&conn, summary.run_id).map_err(|e| e.to_string())?;
        drop(conn);
        Ok::<_, String>(loaded)
    })();
    remove_db(&db);
    let loaded = result?;
    let h = &loaded.history;
    let a = analyze(h);
    let costs = oracle::costs(h, &a);
    let mut sent: Vec<Vec<i64>> = vec![Vec::new(); h.pollers.len()];
    for r in &h.requests {
        sent[r.poller].push(r.sent_at_ms);
    }
    let rows = loaded
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
    let lateness_ms = match &h.truth {
        Some(t) => h
            .statuses
            .iter()
            .zip(t)
            .filter_map(|(s, v)| v.map(|v| v.visible_at_ms - s.id_time_ms))
            .collect(),
        None => Vec::new(),
    };
    Ok(SeedResult { rows, lateness_ms })
}

fn remove_db(db: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

/// Runs every seed on `jobs` threads; results in seed order. The first error
/// stops the sweep (seeds already started finish).
pub fn run_all(
    base: &[String],
    seeds: &[u64],
    jobs: usize,
    scratch: &Path,
    mut on_done: impl FnMut(usize, usize) + Send,
) -> Result<Vec<SeedResult>, String> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<SeedResult>>> =
        Mutex::new((0..seeds.len()).map(|_| None).collect());
    let error: Mutex<Option<String>> = Mutex::new(None);
    let done = Mutex::new((0usize, &mut on_done));
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    if error.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                        return;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&seed) = seeds.get(i) else { return };
                    match run_seed(base, seed, scratch) {
                        Ok(r) => {
                            results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                            let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
                            d.0 += 1;
                            let n = d.0;
                            (d.1)(n, seeds.len());
                        }
                        Err(e) => {
                            error
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_or_insert(format!("seed {seed}: {e}"));
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect())
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

    #[test]
    fn fifteen_minute_window() {
        let sent: Vec<i64> = (0..2000).map(|i| i * 1000).collect();
        assert_eq!(max_in_window(&sent, 900_000), 900);
        assert_eq!(max_in_window(&[0, 1, 2, 900_000], 900_000), 3);
    }

    /// The sweep's numbers are analyze's: a seed's row agrees with the
    /// checker run on the same virtual run by hand.
    #[test]
    fn a_seed_row_is_what_analyze_says() {
        let dir = std::env::temp_dir().join(format!("snowleak-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base: Vec<String> = [
            "--duration",
            "2m",
            "--poller",
            "naive",
            "--poller",
            "adaptive",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let r = run_seed(&base, 3, &dir).unwrap();
        assert!(
            !dir.join("seed-3.db").exists(),
            "the scratch run is deleted"
        );
        let db = dir.join("by-hand.db");
        remove_db(&db);
        let summary = snowleak::run_experiment(run_args(&base, 3, &db).unwrap()).unwrap();
        let conn = crate::load::open(&db).unwrap();
        let loaded = crate::load::load(&conn, summary.run_id).unwrap();
        let a = analyze(&loaded.history);
        for (row, s) in r.rows.iter().zip(&a.pollers) {
            assert_eq!(
                (row.requests, row.seen, row.duplicates, row.leaks),
                (s.requests, s.seen, s.duplicates, s.leaks)
            );
        }
        assert_eq!(r.rows[1].poller, "adaptive");
        assert!(!r.lateness_ms.is_empty());
        let results = vec![r];
        let id = store(&dir.join("sweep.db"), "{}", &results).unwrap();
        let n: i64 = Connection::open(dir.join("sweep.db"))
            .unwrap()
            .query_row(
                "SELECT count(*) FROM seed_results WHERE sweep_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 2);
        drop(conn);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
