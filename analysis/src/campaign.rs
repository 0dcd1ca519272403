//! A campaign's judging and summary (`experiment sweep --target postgres|
//! mariadb|misskey-ftt`, docs/campaigns.md): each run's database is judged
//! by the checker `analyze` uses ([`judge_run`]: the one reader here), and
//! the runs are summarised per combination of the varied flags and poller
//! ([`summarize`], [`render`]: pure, no I/O): the loss per 100,000 rows
//! (per 1,000 notes on misskey-ftt) over runs, and how many runs were
//! flagged for the machine's load ([`crate::machine`]).

use crate::diff::analyze;
use crate::interval::OverRuns;
use crate::machine::MachineLoad;
use serde::Serialize;
use std::path::Path;

/// One poller of one run: its loss as the report counts it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PollerLoss {
    pub poller: String,
    /// Leaks, misses with a cause and rows expired before the poller read
    /// them (`missed` + `expired` of the report).
    pub lost: u64,
    pub leaks: u64,
    pub verdict: String,
}

/// One run of a campaign, judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    pub pollers: Vec<PollerLoss>,
    /// Why its figures are not to be trusted as they stand (the machine's
    /// load, [`MachineLoad::flags`]); empty when they are.
    pub flags: Vec<String>,
    /// It ended on a signal (Ctrl-C, SIGTERM) rather than at its duration:
    /// the campaign stops there.
    pub interrupted: bool,
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
        .map(|((p, s), v)| PollerLoss {
            poller: p.name.clone(),
            lost: s.missed() + s.expired,
            leaks: s.leaks,
            verdict: v.as_str().to_string(),
        })
        .collect();
    Ok(RunResult {
        combination: combination.to_string(),
        seed,
        db: path.display().to_string(),
        target: loaded.run.target.clone(),
        rows,
        pollers,
        flags: loaded
            .machine_load()
            .map(|m: MachineLoad| m.flags())
            .unwrap_or_default(),
        interrupted: loaded.run.end_reason.as_deref() == Some("interrupted"),
    })
}

/// The loss of one poller under one combination, over its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub combination: String,
    pub poller: String,
    /// The loss rate's unit: "per 100,000 rows" or "per 1,000 notes".
    pub unit: String,
    pub lost: OverRuns,
    /// The runs' losses and rows, in seed order: the basis of `lost`.
    pub runs: Vec<(u64, u64, u64)>,
    /// Runs flagged for the machine's load.
    pub flagged: usize,
}

/// The bootstrap's seed: the same campaign prints the same interval.
const BOOTSTRAP_SEED: u64 = 1;

/// The loss rates of a row's runs over runs: mean, bootstrap 95 %
/// interval, min, median, max ([`crate::interval`]).
fn over_runs(rates: &[f64]) -> OverRuns {
    crate::interval::over_runs(rates, BOOTSTRAP_SEED)
}

/// The summary of a campaign.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub rows: Vec<Row>,
    pub runs: usize,
    /// Runs flagged for the machine's load: writers more than 5 % short of
    /// the asked rate, or a load average above the core count.
    pub flagged_runs: usize,
}

/// One row per combination and poller, in the order they first appear.
pub fn summarize(results: &[RunResult]) -> Summary {
    let mut rows: Vec<Row> = Vec::new();
    // Each row's runs as rates in its unit.
    let mut rates: Vec<Vec<f64>> = Vec::new();
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
                    lost: over_runs(&[]),
                    runs: Vec::new(),
                    flagged: 0,
                });
                rates.push(Vec::new());
                rows.len() - 1
            });
            rows[i].runs.push((r.seed, p.lost, r.rows));
            rows[i].flagged += usize::from(!r.flags.is_empty());
            rates[i].push(p.lost as f64 * scale / r.rows.max(1) as f64);
        }
    }
    for (row, rates) in rows.iter_mut().zip(&rates) {
        row.lost = over_runs(rates);
    }
    Summary {
        rows,
        runs: results.len(),
        flagged_runs: results.iter().filter(|r| !r.flags.is_empty()).count(),
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
        "{:cw$}  {:pw$}  {:>10} {:>21} {:>10} {:>10} {:>10} {:>5} {:>8}   (loss {unit}: leaks, misses and expired rows)\n",
        "combination",
        "poller",
        "mean",
        "95% CI (bootstrap)",
        "min",
        "median",
        "max",
        "runs",
        "flagged"
    );
    for r in &s.rows {
        o.push_str(&format!(
            "{:cw$}  {:pw$}  {:>10.2} {:>21} {:>10.2} {:>10.2} {:>10.2} {:>5} {:>8}\n",
            if r.combination.is_empty() {
                "-"
            } else {
                &r.combination
            },
            r.poller,
            r.lost.mean,
            format!("[{:.2}, {:.2}]", r.lost.ci95.0, r.lost.ci95.1),
            r.lost.min,
            r.lost.median,
            r.lost.max,
            r.lost.runs,
            r.flagged
        ));
    }
    o.push_str(&format!(
        "{} of {} runs flagged (writers more than 5% short of the asked rate, or a load average above the cores)\n",
        s.flagged_runs, s.runs
    ));
    o
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
            pollers: ["naive", "compensated:k=1s"]
                .iter()
                .zip(lost)
                .map(|(p, lost)| PollerLoss {
                    poller: p.to_string(),
                    lost,
                    leaks: lost,
                    verdict: "valid".into(),
                })
                .collect(),
            flags: if flagged {
                vec!["load average 3.00 > 2 cores".into()]
            } else {
                Vec::new()
            },
            interrupted: false,
        }
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let o = over_runs(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((o.min, o.median, o.max, o.runs), (1.0, 2.5, 4.0, 4));
        assert_eq!(over_runs(&[7.0, 1.0, 5.0]).median, 5.0);
        assert_eq!(over_runs(&[]).runs, 0);
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
        assert_eq!(s.rows[2].lost.max, 10.0);
        let text = render(&s);
        assert!(text.contains("per 100,000 rows"), "{text}");
        assert!(text.contains("1 of 4 runs flagged"), "{text}");
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
