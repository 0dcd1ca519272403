//! `experiment sweep merge DIR`'s summary, from the runs a plan's tasks
//! finished (pure: `collect.rs` reads them). The summary is the one `sweep`
//! prints on one machine (`analysis::sweep` for the simulator's sweep,
//! `analysis::campaign` for a campaign), over the finished runs put back in
//! the one-machine order, so that a plan run index by index in any order
//! gives the same summary, byte for byte. Beside it: which machines ran
//! each row's runs (a column), each machine's description, and, where more
//! than one machine ran a row's runs, their means and a permutation test of
//! whether the machine matters; the indices missing or failed are listed
//! and never averaged over.

use super::machine::Machine;
use super::plan::{self, Plan};
use super::store::RunRecord;
use analysis::campaign::{RunResult, Summary};
use analysis::sweep::{PollerSummary, SeedResult};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What the runs directory holds for a plan.
pub struct Collected<R> {
    /// Finished runs: index, record, result.
    pub done: Vec<(usize, RunRecord, R)>,
    /// Failed indices (none finished): index, node, error.
    pub failed: Vec<(usize, String, String)>,
    /// Aside files of attempts that did not finish: index, file name.
    pub partial: Vec<(usize, String)>,
    /// The plan's directory as given, where the runs not done can run
    /// again; none for the runs of a kept file (`sweep report`), which can
    /// run nothing.
    pub rerun_at: Option<String>,
}

/// The merge's output: its text, its JSON, and whether every run finished.
pub struct Merged {
    pub text: String,
    pub json: String,
    pub complete: bool,
}

/// A machine that ran some of the plan's runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineRuns {
    pub node: String,
    pub host: String,
    pub cpu_model: String,
    pub cores: u32,
    pub kernel: String,
    /// The indices it ran.
    pub runs: Vec<usize>,
    /// The highest 1-minute load average at the start of its runs.
    pub max_load_at_start: f64,
    /// How many boots its runs ran in (distinct boot ids; 0 where none was
    /// recorded): more than one, and the machine restarted, or another took
    /// its name, between them.
    pub boots: usize,
    /// How many of its runs recorded a boot id (older records have none), so
    /// that one boot among some of its runs is not read as one for all.
    pub runs_with_boot: usize,
    #[serde(skip)]
    pub machine: Machine,
}

/// What one finished run recorded of where and when it ran.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunMachine {
    pub index: usize,
    pub node: String,
    /// The 1-, 5- and 15-minute load averages when it started.
    pub load_at_start: [f64; 3],
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
    pub job: Option<String>,
}

/// The finished runs in the one-machine order: by place in the plan.
fn in_plan_order<'a, R>(plan: &Plan, c: &'a Collected<R>) -> Vec<&'a (usize, RunRecord, R)> {
    let mut done: Vec<&(usize, RunRecord, R)> = c.done.iter().collect();
    done.sort_by_key(|(i, _, _)| plan.runs[*i].position);
    done
}

fn run_machines<R>(c: &Collected<R>) -> Vec<RunMachine> {
    let mut out: Vec<RunMachine> = c
        .done
        .iter()
        .map(|(index, r, _)| RunMachine {
            index: *index,
            node: r.machine.node.clone(),
            load_at_start: r.machine.load_at_start,
            started_at_ms: r.started_at_ms,
            ended_at_ms: r.ended_at_ms,
            job: r.job.clone(),
        })
        .collect();
    out.sort_by_key(|r| r.index);
    out
}

/// One row of the summary and the machines that ran its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    pub combination: String,
    pub poller: String,
    pub machines: Vec<String>,
}

/// One machine's mean over a row's runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineMean {
    pub node: String,
    pub runs: usize,
    pub mean: f64,
}

/// Whether the machine matters for one row: each machine's mean of the
/// row's per-run rate, and a permutation test of the machines' means.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Effect {
    pub combination: String,
    pub poller: String,
    /// The rate's unit (`leaks per 100,000 statuses`, `per 100,000 rows`).
    pub unit: String,
    pub means: Vec<MachineMean>,
    /// The share of permutations of the runs among the machines whose
    /// between-machine sum of squares is at least the observed one.
    pub p_value: f64,
    pub permutations: u32,
    /// `p_value` below 0.05.
    pub differs: bool,
}

/// A run that did not finish.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotDone {
    pub index: usize,
    pub combination: String,
    pub seed: u64,
    /// Failed: where, and why; missing: none.
    pub node: Option<String>,
    pub error: Option<String>,
    /// Aside files its unfinished attempts left in `runs/` (ignored).
    pub partial: Vec<String>,
}

/// The permutations of the machine test.
pub const PERMUTATIONS: u32 = 9_999;

/// The between-groups sum of squares, `sum n_g (mean_g - mean)^2`.
fn between(groups: &[&[f64]]) -> f64 {
    let n: usize = groups.iter().map(|g| g.len()).sum();
    if n == 0 {
        return 0.0;
    }
    let all = groups.iter().flat_map(|g| g.iter()).sum::<f64>() / n as f64;
    groups
        .iter()
        .filter(|g| !g.is_empty())
        .map(|g| {
            let m = g.iter().sum::<f64>() / g.len() as f64;
            g.len() as f64 * (m - all).powi(2)
        })
        .sum()
}

/// A permutation test of whether the groups' means differ (one-way, the
/// between-groups sum of squares as the statistic, which for a fixed
/// total orders the permutations as the F statistic does): the share of
/// `permutations` random reassignments of the values to groups of the same
/// sizes, and the observed one, whose statistic is at least the observed.
/// Seeded (SplitMix64 draws), so the same runs give the same p.
pub fn permutation_p(groups: &[Vec<f64>], permutations: u32, seed: u64) -> f64 {
    let sizes: Vec<usize> = groups.iter().map(Vec::len).collect();
    let mut pooled: Vec<f64> = groups.iter().flatten().copied().collect();
    let borrowed: Vec<&[f64]> = groups.iter().map(Vec::as_slice).collect();
    let observed = between(&borrowed);
    let tolerance = 1e-9 * observed.abs().max(1e-12);
    let mut at_least = 0u32;
    for p in 0..permutations {
        for i in (1..pooled.len()).rev() {
            let draw = since_id::seed::stream(seed, u64::from(p), i as u32);
            pooled.swap(i, (draw % (i as u64 + 1)) as usize);
        }
        let mut rest = pooled.as_slice();
        let mut parts: Vec<&[f64]> = Vec::with_capacity(sizes.len());
        for &s in &sizes {
            let (head, tail) = rest.split_at(s);
            parts.push(head);
            rest = tail;
        }
        if between(&parts) >= observed - tolerance {
            at_least += 1;
        }
    }
    (1.0 + f64::from(at_least)) / (1.0 + f64::from(permutations))
}

/// The test's seed: the same runs print the same p.
const TEST_SEED: u64 = 1;

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Each row's runs (node, rate) to the row's [`Effect`], when more than
/// one machine ran them.
fn effect(combination: &str, poller: &str, unit: &str, runs: &[(String, f64)]) -> Option<Effect> {
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (node, rate) in runs {
        by.entry(node).or_default().push(*rate);
    }
    if by.len() < 2 {
        return None;
    }
    let groups: Vec<Vec<f64>> = by.values().cloned().collect();
    let p = permutation_p(&groups, PERMUTATIONS, TEST_SEED);
    Some(Effect {
        combination: combination.into(),
        poller: poller.into(),
        unit: unit.into(),
        means: by
            .iter()
            .map(|(node, v)| MachineMean {
                node: node.to_string(),
                runs: v.len(),
                mean: r3(v.iter().sum::<f64>() / v.len() as f64),
            })
            .collect(),
        p_value: (p * 10_000.0).round() / 10_000.0,
        permutations: PERMUTATIONS,
        differs: p < 0.05,
    })
}

/// The machines of the finished runs, by node, each with its runs.
fn machines<R>(c: &Collected<R>) -> Vec<MachineRuns> {
    let mut by: BTreeMap<String, MachineRuns> = BTreeMap::new();
    let mut boots: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (index, record, _) in &c.done {
        if !record.machine.boot_id.is_empty() {
            boots
                .entry(record.machine.node.as_str())
                .or_default()
                .insert(record.machine.boot_id.as_str());
        }
        let m = by
            .entry(record.machine.node.clone())
            .or_insert_with(|| MachineRuns {
                node: record.machine.node.clone(),
                host: record.machine.host.clone(),
                cpu_model: record.machine.cpu_model.clone(),
                cores: record.machine.cores,
                kernel: record.machine.kernel.clone(),
                machine: record.machine.clone(),
                runs: Vec::new(),
                max_load_at_start: 0.0,
                boots: 0,
                runs_with_boot: 0,
            });
        m.runs.push(*index);
        m.runs_with_boot += usize::from(!record.machine.boot_id.is_empty());
        m.max_load_at_start = m.max_load_at_start.max(record.machine.load_at_start[0]);
    }
    let mut out: Vec<MachineRuns> = by.into_values().collect();
    for m in &mut out {
        m.runs.sort_unstable();
        m.boots = boots.get(m.node.as_str()).map_or(0, BTreeSet::len);
    }
    out
}

/// One machine's line under the summary: what it is, which runs it ran, the
/// highest load at their starts, and the boots they spanned where recorded.
fn machine_line(m: &MachineRuns) -> String {
    let boots = match m.boots {
        0 => String::new(),
        1 => ", one boot".into(),
        n => format!(", {n} boots (restarted or replaced between its runs)"),
    };
    let boots = if m.boots > 0 && m.runs_with_boot < m.runs.len() {
        format!(
            "{boots} among the {} of its runs that recorded one",
            m.runs_with_boot
        )
    } else {
        boots
    };
    format!(
        "  {}: {} run(s) ({}), load at most {:.2}{boots}\n",
        m.machine.describe(),
        m.runs.len(),
        ranges(&m.runs),
        m.max_load_at_start
    )
}

/// The runs that did not finish, in index order.
fn not_done<R>(plan: &Plan, c: &Collected<R>) -> Vec<NotDone> {
    plan.runs
        .iter()
        .filter(|r| !c.done.iter().any(|(i, _, _)| *i == r.index))
        .map(|r| {
            let failed = c.failed.iter().find(|(i, _, _)| *i == r.index);
            NotDone {
                index: r.index,
                combination: r.combination.clone(),
                seed: r.seed,
                node: failed.map(|(_, n, _)| n.clone()),
                error: failed.map(|(_, _, e)| e.clone()),
                partial: c
                    .partial
                    .iter()
                    .filter(|(i, _)| *i == r.index)
                    .map(|(_, name)| name.clone())
                    .collect(),
            }
        })
        .collect()
}

/// `0-3,5,7-9`.
pub fn ranges(indices: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let mut j = i;
        while j + 1 < indices.len() && indices[j + 1] == indices[j] + 1 {
            j += 1;
        }
        out.push(match j > i {
            true => format!("{}-{}", indices[i], indices[j]),
            false => indices[i].to_string(),
        });
        i = j + 1;
    }
    out.join(",")
}

/// `text` with a column appended to its header line (the first) and to
/// the `values.len()` lines after it: the summary's table rows.
fn with_column(text: &str, title: &str, values: &[String]) -> String {
    let width = values
        .iter()
        .map(String::len)
        .chain([title.len()])
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (n, line) in text.lines().enumerate() {
        out.push_str(line);
        match n {
            0 => out.push_str(&format!("  {title:>width$}")),
            n if n <= values.len() => out.push_str(&format!("  {:>width$}", values[n - 1])),
            _ => {}
        }
        out.push('\n');
    }
    out
}

/// A row's machines as the column shows them: the node, or how many.
fn column(machines: &[String]) -> String {
    match machines {
        [one] => one.clone(),
        many => format!("{} machines", many.len()),
    }
}

/// The lines after the table: machines, the machine test, what did not finish.
fn tail(
    plan: &Plan,
    rerun_at: Option<&str>,
    machines: &[MachineRuns],
    effects: &[Effect],
    not_done: &[NotDone],
) -> String {
    let mut o = String::from("machines (load average when a run started):\n");
    for m in machines {
        o.push_str(&machine_line(m));
    }
    if !effects.is_empty() {
        o.push_str(&format!(
            "does the machine matter? each machine's mean and a permutation test of the machines' means ({} permutations; p < 0.05: it does)\n",
            PERMUTATIONS
        ));
        for e in effects {
            let means: Vec<String> = e
                .means
                .iter()
                .map(|m| format!("{} {:.2} ({} runs)", m.node, m.mean, m.runs))
                .collect();
            o.push_str(&format!(
                "  {}{}: {}; p = {:.4}: {} ({})\n",
                match e.combination.is_empty() {
                    true => String::new(),
                    false => format!("{} ", e.combination),
                },
                e.poller,
                means.join(", "),
                e.p_value,
                if e.differs {
                    "the machine matters"
                } else {
                    "no difference seen"
                },
                e.unit
            ));
        }
    }
    let failed: Vec<&NotDone> = not_done.iter().filter(|n| n.error.is_some()).collect();
    let missing: Vec<&NotDone> = not_done.iter().filter(|n| n.error.is_none()).collect();
    let describe = |n: &NotDone| match n.combination.is_empty() {
        true => format!("{} (seed {})", n.index, n.seed),
        false => format!("{} ({} seed {})", n.index, n.combination, n.seed),
    };
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|n| describe(n)).collect();
        o.push_str(&format!(
            "missing {} of {} runs, not in the summary: {}\n",
            missing.len(),
            plan.runs.len(),
            names.join(", ")
        ));
    }
    for n in &failed {
        o.push_str(&format!(
            "failed, not in the summary: {} on {}: {}\n",
            describe(n),
            n.node.as_deref().unwrap_or("?"),
            n.error.as_deref().unwrap_or("")
        ));
    }
    let partial: Vec<&String> = not_done.iter().flat_map(|n| &n.partial).collect();
    if !partial.is_empty() {
        let names: Vec<&str> = partial.iter().map(|s| s.as_str()).collect();
        o.push_str(&format!(
            "unfinished attempts left in runs/ (ignored): {}\n",
            names.join(", ")
        ));
    }
    if let (false, Some(at)) = (not_done.is_empty(), rerun_at) {
        let indices: Vec<usize> = not_done.iter().map(|n| n.index).collect();
        o.push_str(&format!(
            "run them again: sbatch --array={} {at}/slurm.sh (or experiment sweep run {at} --index N each)\n",
            ranges(&indices)
        ));
    }
    o
}

/// The plan's identity in the JSON.
#[derive(Serialize)]
struct PlanJson<'a> {
    id: &'a str,
    dir: &'a str,
    runs: usize,
    finished: usize,
}

/// The merge's own fields in the JSON, after either kind's summary.
#[derive(Serialize)]
struct MergeJson<'a> {
    plan: PlanJson<'a>,
    machines: &'a [MachineRuns],
    run_machines: Vec<RunMachine>,
    cells: &'a [Cell],
    machine_effect: &'a [Effect],
    missing: Vec<&'a NotDone>,
    failed: Vec<&'a NotDone>,
}

/// What either kind's merge adds to its summary: the machines, each row's
/// machines and the machine test, and the runs that did not finish.
struct Beside<'a, R> {
    plan: &'a Plan,
    dir: &'a str,
    collected: &'a Collected<R>,
    finished: usize,
    machines: Vec<MachineRuns>,
    cells: Vec<Cell>,
    effects: Vec<Effect>,
    not_done: Vec<NotDone>,
}

impl<'a, R> Beside<'a, R> {
    fn new(
        plan: &'a Plan,
        dir: &'a str,
        collected: &'a Collected<R>,
        machines: Vec<MachineRuns>,
        cells: Vec<Cell>,
        effects: Vec<Effect>,
    ) -> Self {
        Beside {
            plan,
            dir,
            collected,
            finished: collected.done.len(),
            machines,
            cells,
            effects,
            not_done: not_done(plan, collected),
        }
    }

    /// The text: `head`, the kind's `table` with the machines column, the tail.
    fn text(&self, head: String, table: &str) -> String {
        let column_values: Vec<String> = self.cells.iter().map(|c| column(&c.machines)).collect();
        let mut text = head;
        text.push_str(&with_column(table, "machines", &column_values));
        text.push_str(&tail(
            self.plan,
            self.collected.rerun_at.as_deref(),
            &self.machines,
            &self.effects,
            &self.not_done,
        ));
        text
    }

    /// The merge's own fields of the JSON.
    fn json(&self) -> MergeJson<'_> {
        MergeJson {
            plan: PlanJson {
                id: &self.plan.id,
                dir: self.dir,
                runs: self.plan.runs.len(),
                finished: self.finished,
            },
            machines: &self.machines,
            run_machines: run_machines(self.collected),
            cells: &self.cells,
            machine_effect: &self.effects,
            missing: self.not_done.iter().filter(|n| n.error.is_none()).collect(),
            failed: self.not_done.iter().filter(|n| n.error.is_some()).collect(),
        }
    }

    /// The merge's output, `json` the kind's whole JSON.
    fn merged(&self, text: String, json: &impl Serialize) -> Merged {
        Merged {
            text,
            json: serde_json::to_string_pretty(json).unwrap_or_default(),
            complete: self.not_done.is_empty(),
        }
    }
}

/// A virtual plan's merge: the summary of `sweep --json` on one machine
/// (its `oracle_duplicates_per_new` and `pollers` byte for byte), then the
/// merge's own fields.
#[derive(Serialize)]
struct VirtualJson<'a> {
    schema: u32,
    seeds: &'a str,
    duration: &'a str,
    profile: &'a str,
    sets: &'a [String],
    oracle_duplicates_per_new: Option<f64>,
    pollers: &'a [PollerSummary],
    #[serde(flatten)]
    merge: MergeJson<'a>,
}

/// Merges a virtual plan's finished runs.
pub fn merge_virtual(plan: &Plan, dir: &str, c: &Collected<SeedResult>) -> Merged {
    let done = in_plan_order(plan, c);
    let results: Vec<SeedResult> = done
        .iter()
        .map(|(_, _, r)| SeedResult {
            rows: r.rows.clone(),
            lateness_ms: Vec::new(),
            statuses: r.statuses,
        })
        .collect();
    let summary = analysis::sweep::summarize(&results);
    let oracle = analysis::sweep::oracle_duplicates_per_new(&results);
    let machines = machines(c);
    let all_nodes: Vec<String> = machines.iter().map(|m| m.machine.node.clone()).collect();
    let cells: Vec<Cell> = summary
        .iter()
        .map(|p| Cell {
            combination: String::new(),
            poller: p.name.clone(),
            machines: all_nodes.clone(),
        })
        .collect();
    let unit = "leaks per 100,000 statuses";
    let effects: Vec<Effect> = summary
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let runs: Vec<(String, f64)> = done
                .iter()
                .filter_map(|(_, record, r)| {
                    let row = r.rows.get(i)?;
                    let rate = match r.statuses {
                        0 => 0.0,
                        s => row.leaks as f64 * 100_000.0 / s as f64,
                    };
                    Some((record.machine.node.clone(), rate))
                })
                .collect();
            effect("", &p.name, unit, &runs)
        })
        .collect();
    let beside = Beside::new(plan, dir, c, machines, cells, effects);
    let profile = plan.header.profile.clone().unwrap_or_default();
    let head = format!(
        "sweep merge of plan {} ({dir}): {} of {} runs ({} seeds x {} pollers, {} each, profile {}) on {} machine(s)\n",
        plan::short(&plan.id),
        done.len(),
        plan.runs.len(),
        plan.runs.len(),
        plan.header.pollers.len(),
        plan.duration,
        profile,
        beside.machines.len()
    );
    let text = beside.text(head, &analysis::sweep::render(&summary, oracle));
    let json = VirtualJson {
        schema: 1,
        seeds: &plan.seeds,
        duration: &plan.duration,
        profile: &profile,
        sets: &plan.header.sets,
        oracle_duplicates_per_new: oracle,
        pollers: &summary,
        merge: beside.json(),
    };
    beside.merged(text, &json)
}

/// A campaign plan's merge: `sweep --target ... --json`'s fields on one
/// machine (`out` the runs directory, `runs` each finished run's judged
/// database), then the merge's own.
#[derive(Serialize)]
struct CampaignJson<'a> {
    schema: u32,
    target: &'a str,
    seeds: &'a str,
    duration: &'a str,
    jobs: usize,
    vary: &'a [String],
    out: String,
    summary: &'a Summary,
    runs: &'a [RunResult],
    #[serde(flatten)]
    merge: MergeJson<'a>,
}

/// Merges a campaign plan's finished runs, each judged from its database.
pub fn merge_campaign(plan: &Plan, dir: &str, c: &Collected<RunResult>) -> Merged {
    let done = in_plan_order(plan, c);
    let results: Vec<RunResult> = done.iter().map(|(_, _, r)| r.clone()).collect();
    let summary = analysis::campaign::summarize_with(&results, plan.header.margin);
    let machines = machines(c);
    let mut cells = Vec::new();
    let mut effects = Vec::new();
    for row in &summary.rows {
        let runs: Vec<(String, f64)> = done
            .iter()
            .filter(|(_, _, r)| r.combination == row.combination)
            .filter_map(|(_, record, r)| {
                let p = r.pollers.iter().find(|p| p.poller == row.poller)?;
                let (scale, _) = analysis::campaign::per(&r.target);
                Some((
                    record.machine.node.clone(),
                    p.lost as f64 * scale / r.rows.max(1) as f64,
                ))
            })
            .collect();
        let mut nodes: Vec<String> = runs.iter().map(|(n, _)| n.clone()).collect();
        nodes.sort();
        nodes.dedup();
        cells.push(Cell {
            combination: row.combination.clone(),
            poller: row.poller.clone(),
            machines: nodes,
        });
        effects.extend(effect(&row.combination, &row.poller, &row.unit, &runs));
    }
    let beside = Beside::new(plan, dir, c, machines, cells, effects);
    let head = format!(
        "campaign merge of plan {} ({dir}): --target {}, {} of {} runs ({} combination(s) x seeds {}, {} each), one run a machine at a time on {} machine(s)\n",
        plan::short(&plan.id),
        plan.target,
        done.len(),
        plan.runs.len(),
        plan.header.combinations,
        plan.seeds,
        plan.duration,
        beside.machines.len()
    );
    let text = beside.text(head, &analysis::campaign::render(&summary));
    let json = CampaignJson {
        schema: 3,
        target: &plan.target,
        seeds: &plan.seeds,
        duration: &plan.duration,
        jobs: 1,
        vary: &plan.header.vary,
        out: format!("{dir}/runs"),
        summary: &summary,
        runs: &results,
        merge: beside.json(),
    };
    beside.merged(text, &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_permutation_test_tells_apart_machines_that_differ() {
        let same = [vec![1.0, 2.0, 3.0, 4.0], vec![1.5, 2.5, 3.5, 2.0]];
        let apart = [vec![1.0, 1.2, 0.9, 1.1, 1.0], vec![5.0, 5.2, 4.9, 5.1, 5.3]];
        let p_same = permutation_p(&same, PERMUTATIONS, 1);
        let p_apart = permutation_p(&apart, PERMUTATIONS, 1);
        assert!(p_same > 0.3, "{p_same}");
        // 10 values in two groups of 5: 252 splits, 2 as extreme as this one.
        assert!(p_apart < 0.02, "{p_apart}");
        assert_eq!(p_apart, permutation_p(&apart, PERMUTATIONS, 1), "seeded");
        // No spread at all: every permutation is as extreme, p = 1.
        assert_eq!(permutation_p(&[vec![2.0; 3], vec![2.0; 3]], 99, 1), 1.0);
        let e = effect(
            "",
            "naive",
            "u",
            &[
                ("a".into(), 1.0),
                ("b".into(), 5.0),
                ("a".into(), 1.1),
                ("b".into(), 5.1),
            ],
        )
        .unwrap();
        assert_eq!(e.means.len(), 2);
        assert_eq!((e.means[0].node.as_str(), e.means[0].mean), ("a", 1.05));
        assert!(effect("", "naive", "u", &[("a".into(), 1.0), ("a".into(), 2.0)]).is_none());
    }

    #[test]
    fn a_machine_s_runs_are_counted_by_boot_where_recorded() {
        let record = |index: usize, node: &str, boot: &str| {
            let machine = Machine {
                node: node.into(),
                host: node.into(),
                cpu_model: "cpu".into(),
                cores: 2,
                kernel: "6.1".into(),
                load_at_start: [0.5, 0.0, 0.0],
                boot_id: boot.into(),
            };
            let r = RunRecord {
                plan: "p".into(),
                index,
                combination: String::new(),
                seed: index as u64 + 1,
                experiment: "0".into(),
                machine,
                started_at_ms: 0,
                ended_at_ms: 1,
                job: None,
            };
            (index, r, ())
        };
        let c = Collected {
            done: vec![
                record(0, "vm", "a"),
                record(1, "vm", "b"),
                record(2, "vm", "a"),
                record(3, "n1", "c"),
                record(4, "old", ""),
                record(5, "mixed", ""),
                record(6, "mixed", "d"),
            ],
            failed: vec![],
            partial: vec![],
            rerun_at: None,
        };
        let m = machines(&c);
        let boots: Vec<(&str, usize)> = m.iter().map(|m| (m.node.as_str(), m.boots)).collect();
        assert_eq!(boots, [("mixed", 1), ("n1", 1), ("old", 0), ("vm", 2)]);
        // One boot among some of its runs is not said of them all.
        assert!(
            machine_line(&m[0]).ends_with(
                "load at most 0.50, one boot among the 1 of its runs that recorded one\n"
            )
        );
        let m = &m[1..];
        assert_eq!(
            machine_line(&m[2]),
            "  vm: cpu, 2 cores, Linux 6.1: 3 run(s) (0-2), load at most 0.50, 2 boots (restarted or replaced between its runs)\n"
        );
        assert!(machine_line(&m[0]).ends_with("load at most 0.50, one boot\n"));
        // A record made before boots were recorded prints as it did.
        assert!(machine_line(&m[1]).ends_with("load at most 0.50\n"));
        let old: Machine = serde_json::from_str(
            r#"{"node":"vm","host":"vm","cpu_model":"c","cores":2,"kernel":"k","load_at_start":[0,0,0]}"#,
        )
        .unwrap();
        assert_eq!(old.boot_id, "");
    }

    #[test]
    fn a_column_is_added_to_the_header_and_the_rows_only() {
        let t = "poller  leaks\nnaive      3\nk=1s       1\noracle: none\n";
        assert_eq!(
            with_column(t, "machines", &["vm".into(), "2 machines".into()]),
            "poller  leaks    machines\nnaive      3          vm\nk=1s       1  2 machines\noracle: none\n"
        );
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(ranges(&[]), "");
    }
}
