//! The text report: an honest account of one run, checked, with a verdict.
//!
//! Modelled on Jepsen's output: first what was recorded (and whether the
//! recording is whole), then what each poller did, then every finding with
//! the evidence to check it by hand in run.db, then the verdicts. Long lists
//! are capped; the JSON has everything.

use crate::diff::{Analysis, Cause, Reference};
use crate::json::names;
use crate::load::{Loaded, ShownMiss};
use since_id::time::{format_duration_ms, rfc3339_ms};
use std::fmt::Write;

/// How many leaks (and other misses) the text lists before "... and N more".
pub const LIST_CAP: usize = 25;

/// Renders the report. `plots` are the files written; `plot_notes` says what was skipped.
pub fn render(loaded: &Loaded, a: &Analysis, plots: &[String], plot_notes: &[String]) -> String {
    let mut o = String::new();
    let width = name_width(loaded);
    render_header(&mut o, loaded, a);
    render_pollers(&mut o, loaded, a, width);
    render_leaks(&mut o, loaded, a);
    render_misses(&mut o, loaded, a, width);
    render_future_ids(&mut o, loaded, a);
    render_required_k(&mut o, a);
    render_costs(&mut o, loaded, a);
    render_verdicts(&mut o, loaded, a, width, plots, plot_notes);
    o
}

fn render_header(o: &mut String, loaded: &Loaded, a: &Analysis) {
    let run = &loaded.run;
    let h = &loaded.history;
    let end_ms = run.ended_at_ms.or(loaded.last_activity_ms);
    let duration = end_ms
        .map(|e| format_duration_ms((e - run.started_at_ms).max(0) as u64))
        .unwrap_or_else(|| "unknown".into());
    if run.complete {
        let _ = writeln!(
            o,
            "run {} is complete ({}).",
            run.id,
            run.end_reason
                .as_deref()
                .unwrap_or("no end reason recorded")
        );
    } else {
        let _ = writeln!(
            o,
            "run {} is INCOMPLETE (killed or still running): the findings cover only the {} recorded so far{}.",
            run.id,
            duration,
            run.end_reason
                .as_deref()
                .map(|r| format!(" (end reason: {r})"))
                .unwrap_or_default()
        );
    }
    o.push('\n');
    let mut target = run.target.clone();
    if run.profile.is_some() || run.seed.is_some() {
        let _ = write!(
            target,
            " (profile {}, seed {})",
            run.profile.as_deref().unwrap_or("-"),
            run.seed.map(|s| s.to_string()).unwrap_or("-".into())
        );
    }
    let _ = writeln!(o, "target     {target}");
    let _ = writeln!(
        o,
        "clock      {}, layout {}, every {} ms, page limit {}",
        run.clock, run.layout, run.interval_ms, run.page_limit
    );
    let _ = writeln!(
        o,
        "time       {} .. {} ({duration}{})",
        rfc3339_ms(run.started_at_ms),
        end_ms.map(rfc3339_ms).unwrap_or("?".into()),
        if run.ended_at_ms.is_none() {
            ", to the last recorded response"
        } else {
            ""
        }
    );
    let _ = writeln!(
        o,
        "history    {} requests, {} observations, {} distinct statuses seen",
        loaded
            .totals
            .as_ref()
            .map_or(h.requests.len() as u64, |t| t.requests),
        loaded
            .totals
            .as_ref()
            .map_or(h.observations.len() as u64, |t| t.observations),
        loaded
            .totals
            .as_ref()
            .map_or(seen_any(loaded) as u64, |t| t.seen),
    );
    let reference = match (a.reference, &h.truth) {
        (Reference::Truth, Some(t)) => format!(
            "truth: {} {}",
            loaded
                .totals
                .as_ref()
                .map_or(t.iter().filter(|v| v.is_some()).count() as u64, |t| t
                    .truth_rows),
            match loaded.run.target.as_str() {
                t if t.starts_with("postgres") => "rows committed in PostgreSQL",
                t if t.starts_with("mariadb") => "rows committed in MariaDB",
                t if t.starts_with("misskey-ftt") => "notes committed in PostgreSQL",
                _ => "statuses the simulator created",
            }
        ),
        (Reference::Union, _) => {
            "no truth: each poller is checked against the union of what the others saw".into()
        }
        _ => "none: no truth and a single poller, so misses cannot be measured".into(),
    };
    let _ = writeln!(o, "reference  {reference}");
    // The machine's load while a real-time run ran (issue 34): a figure
    // measured on a loaded machine says so here, before any finding.
    for line in loaded.machine_load().iter().flat_map(|m| m.header_lines()) {
        let _ = writeln!(o, "{line}");
    }
    o.push('\n');
}

fn render_pollers(o: &mut String, loaded: &Loaded, a: &Analysis, width: usize) {
    let _ = writeln!(
        o,
        "{:width$}  {:>8} {:>6} {:>9} {:>10} {:>8} {:>6} {:>6} {:>7} {:>6}  verdict",
        "poller",
        "requests",
        "failed",
        "seen",
        "duplicates",
        "dup/new",
        "pages+",
        "late",
        "missed",
        "leaks"
    );
    for i in by_client(loaded) {
        let (p, s, v) = (&loaded.pollers[i], &a.pollers[i], &a.verdicts[i]);
        let missed = if a.reference == Reference::None {
            "-".to_string()
        } else {
            s.missed().to_string()
        };
        let _ = writeln!(
            o,
            "{:width$}  {:>8} {:>6} {:>9} {:>10} {:>8.3} {:>6} {:>6} {:>7} {:>6}  {}",
            p.name,
            s.requests,
            s.errors,
            s.seen,
            s.duplicates,
            s.duplicates_per_new(),
            s.back_pages,
            s.late_arrivals,
            missed,
            s.leaks,
            v.as_str()
        );
    }
    let _ = writeln!(
        o,
        "(seen: distinct statuses returned; duplicates: observations of statuses the poller already had; \
pages+: back-paging requests; late: late arrivals the poller returned)"
    );
    let with_bytes: Vec<String> = loaded
        .pollers
        .iter()
        .zip(&a.pollers)
        .filter_map(|(p, s)| {
            s.duplicate_bytes
                .map(|b| format!("{} {}", p.name, human_bytes(b)))
        })
        .collect();
    if !with_bytes.is_empty() {
        let _ = writeln!(
            o,
            "duplicate bytes (estimate: response bytes x duplicate share of its items): {}",
            with_bytes.join(", ")
        );
    }
    o.push('\n');
}

fn render_leaks(o: &mut String, loaded: &Loaded, a: &Analysis) {
    if a.reference == Reference::None {
        let _ = writeln!(o, "leaks: not measurable without a reference.");
        o.push('\n');
        return;
    }
    // The first few as lines, and how many: read in order, one at a time
    // ([`Loaded::leaks`], on disk for a run judged streaming).
    let mut lines = String::new();
    let mut count = 0usize;
    for leak in loaded.leaks(a) {
        let leak = match leak {
            Ok(leak) => leak,
            Err(e) => {
                let _ = writeln!(lines, "  (cannot read the leaks back: {e})");
                break;
            }
        };
        count += 1;
        if count <= LIST_CAP {
            leak_line(&mut lines, loaded, &leak);
        }
    }
    if count == 0 {
        let _ = writeln!(o, "leaks: none.");
    } else {
        let _ = writeln!(
            o,
            "leaks: {count} statuses (one line each; id_skew_ms = ts(highest ID any poller had returned before it became visible) - ts(it); \
required_k_ms = the smallest k sure to have caught it, README \"Definitions\"):"
        );
        let _ = writeln!(
            o,
            "  {:<24} {:<24} {:<24} {:>10} {:>13}  seen by / missed by",
            "status", "ID time", "first surfaced", "id_skew_ms", "required_k_ms"
        );
    }
    o.push_str(&lines);
    if count > LIST_CAP {
        let _ = writeln!(o, "  ... and {} more (see --json)", count - LIST_CAP);
    }
    o.push('\n');
}

/// One leak's line in the text report.
fn leak_line(o: &mut String, loaded: &Loaded, leak: &crate::load::ShownFinding) {
    let i = &leak.finding;
    let seen = names(loaded, i.seen_by);
    let _ = writeln!(
        o,
        "  {:<24} {:<24} {:<24} {:>10} {:>13}  {} / {}",
        leak.id,
        rfc3339_ms(leak.id_time_ms),
        i.first_seen_ms
            .map(rfc3339_ms)
            .unwrap_or_else(|| "never returned".into()),
        opt(i.id_skew_ms),
        opt(i.required_k_ms),
        if seen.is_empty() {
            "nobody".to_string()
        } else {
            seen.join(", ")
        },
        names(loaded, i.leaked_by).join(", ")
    );
}

fn render_misses(o: &mut String, loaded: &Loaded, a: &Analysis, width: usize) {
    // Misses that are not leaks, and what was not owed.
    if a.reference != Reference::None {
        let _ = writeln!(
            o,
            "misses that are not leaks (never counted as leaks), and items not owed:"
        );
        for (p, s) in loaded.pollers.iter().zip(&a.pollers) {
            let _ = writeln!(
                o,
                "  {:width$}  {} from errors, {} from overflow, {} from a cursor on an ID from the future, {} unexplained; {} expired (dropped by the retention job before it read them); not owed: {} deleted before it could see them, {} below its baseline page",
                p.name,
                s.misses_error,
                s.misses_overflow,
                s.misses_future_id,
                s.misses_unexplained,
                s.expired,
                s.gone_before_seen,
                s.before_baseline
            );
        }
        for e in a.expired.iter().take(LIST_CAP) {
            let _ = writeln!(
                o,
                "  {} expired for {} (dropped by the retention job before it read it)",
                loaded.status_id(e.status),
                loaded.pollers[e.poller as usize].name
            );
        }
        if a.expired.len() > LIST_CAP {
            let _ = writeln!(
                o,
                "  ... and {} more expired (see --json)",
                a.expired.len() - LIST_CAP
            );
        }
        render_other_misses(o, loaded, a);
        o.push('\n');
    }
}

/// The misses with a cause, then the unexplained ones, a few of each: read
/// in order ([`Loaded::other_misses`], on disk for a run judged streaming),
/// counted from the pollers' figures.
fn render_other_misses(o: &mut String, loaded: &Loaded, a: &Analysis) {
    let name = |p: u8| &loaded.pollers[p as usize].name;
    let count = |f: fn(&crate::diff::PollerStats) -> u64| a.pollers.iter().map(f).sum::<u64>();
    let explained = count(|s| s.misses_error + s.misses_overflow + s.misses_future_id);
    let unexplained = count(|s| s.misses_unexplained);
    let list = |o: &mut String, wanted: bool, line: &dyn Fn(&mut String, ShownMiss)| {
        let misses = loaded.other_misses(a);
        let mut shown = 0;
        for m in misses {
            match m {
                Ok(m) if (m.cause == Cause::Unexplained) == wanted => {
                    line(o, m);
                    shown += 1;
                    if shown == LIST_CAP {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = writeln!(o, "  (cannot read the misses back: {e})");
                    break;
                }
            }
        }
    };
    list(o, false, &|o, m| {
        let _ = writeln!(
            o,
            "  {} missed by {} ({})",
            m.id,
            name(m.poller),
            m.cause.as_str()
        );
    });
    if explained > LIST_CAP as u64 {
        let _ = writeln!(
            o,
            "  ... and {} more (see --json)",
            explained - LIST_CAP as u64
        );
    }
    if unexplained > 0 {
        let _ = writeln!(
            o,
            "  !! {unexplained} UNEXPLAINED misses: visible, inside a clean request's window, yet not returned. \
This is a bug in the target, the poller or the recorder:"
        );
        list(o, true, &|o, m| {
            let _ = writeln!(o, "  !!   {} missed by {}", m.id, name(m.poller));
        });
        if unexplained > LIST_CAP as u64 {
            let _ = writeln!(o, "  !!   ... and {} more", unexplained - LIST_CAP as u64);
        }
    }
}

fn render_future_ids(o: &mut String, loaded: &Loaded, a: &Analysis) {
    // IDs from the future: a server's clock (or a hostile ID) far ahead.
    if !a.future_ids.is_empty() {
        let _ = writeln!(
            o,
            "!! {} statuses IDed more than {} s after the request that first returned them (IDs from the future):",
            a.future_ids.len(),
            crate::diff::FUTURE_TOLERANCE_MS / 1000
        );
        for &s in a.future_ids.iter().take(LIST_CAP) {
            let _ = writeln!(
                o,
                "  {} (ID time {})",
                loaded.status_id(s),
                rfc3339_ms(loaded.history.id_time_ms(s as usize))
            );
        }
        if a.future_ids.len() > LIST_CAP {
            let _ = writeln!(
                o,
                "  ... and {} more (see --json)",
                a.future_ids.len() - LIST_CAP
            );
        }
        o.push('\n');
    }
}

fn render_required_k(o: &mut String, a: &Analysis) {
    // The part-2 numbers.
    match a.k_to_catch_all_ms {
        Some(k) => {
            let _ = writeln!(o, "k to catch all leaks: {k} ms");
        }
        None => {
            let _ = writeln!(
                o,
                "k to catch all leaks: - (no leaks with a known required_k)"
            );
        }
    }
    match a.required_k {
        Some(d) => {
            let _ = writeln!(
                o,
                "required_k_ms over leaks and late arrivals (basis: {} statuses): p50 {}, p90 {}, p99 {}, max {}",
                d.basis, d.p50, d.p90, d.p99, d.max
            );
        }
        None => {
            let _ = writeln!(
                o,
                "required_k_ms: no leaks or late arrivals, nothing to measure (basis: 0)"
            );
        }
    }
    o.push('\n');
}

fn render_verdicts(
    o: &mut String,
    loaded: &Loaded,
    a: &Analysis,
    width: usize,
    plots: &[String],
    plot_notes: &[String],
) {
    let run = &loaded.run;
    // Verdicts.
    let _ = writeln!(o, "verdict:");
    for i in by_client(loaded) {
        let _ = writeln!(
            o,
            "  {:width$}  {} ({})",
            loaded.pollers[i].name,
            a.verdicts[i].as_str().to_uppercase(),
            a.verdict_reasons[i]
        );
    }
    if !run.complete {
        let _ = writeln!(
            o,
            "  (run {} is incomplete: the verdicts cover the recorded part only)",
            run.id
        );
    }
    o.push('\n');
    for n in plot_notes {
        let _ = writeln!(o, "plot note: {n}");
    }
    if plots.is_empty() {
        let _ = writeln!(o, "plots: none written.");
    } else {
        let _ = writeln!(o, "plots written:");
        for p in plots {
            let _ = writeln!(o, "  {p}");
        }
    }
}

/// Distinct statuses returned by any poller (truth-only statuses excluded).
fn seen_any(loaded: &Loaded) -> usize {
    let h = &loaded.history;
    let mut seen = vec![false; h.statuses.len()];
    for &s in &h.observations {
        seen[s as usize] = true;
    }
    seen.iter().filter(|&&x| x).count()
}

fn opt(v: Option<i64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

fn human_bytes(b: f64) -> String {
    if b >= 1048576.0 {
        format!("{:.1} MiB", b / 1048576.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// The oracle's line and, per poller, its cost against it and its detection delay.
fn render_costs(o: &mut String, loaded: &Loaded, a: &Analysis) {
    let costs = crate::oracle::costs_of(loaded, a);
    match costs.oracle {
        Some(oracle) => {
            let _ = writeln!(
                o,
                "oracle (knows what is visible; since_id just below the lowest status it has not returned, every tick): {} duplicates, {:.3} per new status",
                oracle.duplicates,
                oracle.duplicates_per_new()
            );
        }
        // Judged streaming: the oracle replays the whole run, which is not kept.
        None if loaded.totals.is_some() && a.reference == Reference::Truth => {
            let _ = writeln!(
                o,
                "oracle: not computed: needs the whole run (analyze --in-memory computes it)"
            );
        }
        None => return,
    }
    let width = name_width(loaded);
    let _ = writeln!(
        o,
        "{:width$}  {:>10} {:>7}  detection delay ms: {:>7} {:>7} {:>8}",
        "poller", "duplicates", "/oracle", "p50", "p99", "max"
    );
    for (i, (p, s)) in loaded.pollers.iter().zip(&a.pollers).enumerate() {
        let ratio = costs.ratios[i].map_or("-".to_string(), |r| format!("{r:.2}"));
        let (p50, p99, max) = costs.delays[i].map_or(("-".into(), "-".into(), "-".into()), |d| {
            (d.p50.to_string(), d.p99.to_string(), d.max.to_string())
        });
        let _ = writeln!(
            o,
            "{:width$}  {:>10} {:>7}  {:>27} {:>7} {:>8}",
            p.name, s.duplicates, ratio, p50, p99, max
        );
    }
    o.push('\n');
}

/// The pollers in the order the tables list them: the run's, except that a
/// recorded client's pollers (one a timeline, docs/judging.md) come
/// together, where its first one was.
fn by_client(loaded: &Loaded) -> Vec<usize> {
    let n = loaded.pollers.len();
    let first_of_its_client = |i: usize| {
        loaded
            .client_of(i)
            .and_then(|c| (0..n).find(|&j| loaded.client_of(j) == Some(c)))
            .unwrap_or(i)
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (first_of_its_client(i), i));
    order
}

/// The width of the poller column: the longest name, at least 6.
fn name_width(loaded: &Loaded) -> usize {
    loaded
        .pollers
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(6)
        .max(6)
}
