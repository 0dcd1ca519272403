//! A sweep planned once and run anywhere (`experiment sweep ... --plan DIR`,
//! docs/campaigns.md, "On a cluster"): one entry per run (its index, its
//! cell, its seed and the flags it runs with), in a seeded random order so
//! that the cells interleave in time, with the plan's format version and its
//! id (the SHA-256 of everything else in it); and beside it the Slurm batch
//! script of a job array and the Kubernetes Indexed Job that run it, one run
//! per task. Pure: the text of each file, the checks a run makes of a plan,
//! and the index a task runs; `files.rs` reads and writes them.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What `plan.json` says it is.
pub const FORMAT: &str = "snowleak-sweep-plan";
/// The plan format this binary writes and reads.
pub const VERSION: u32 = 1;

/// A planned sweep: the file `plan.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub format: String,
    pub version: u32,
    /// The SHA-256 (hex) of the plan's compact JSON with this field empty:
    /// every run records it, and a merge refuses runs of another.
    pub id: String,
    /// The version of the `experiment` that planned it; a run refuses to be
    /// made by another.
    pub experiment: String,
    /// `virtual`: the simulator's sweep, each run judged in memory; or
    /// `campaign`: real runs on a database target, each run's database kept.
    pub kind: String,
    pub target: String,
    /// As given to `--seeds`.
    pub seeds: String,
    /// As given to `--duration` (`varied` when `--vary duration=...`).
    pub duration: String,
    /// The seed of the runs' order.
    pub order_seed: u64,
    /// The binary the Slurm script calls (the planner's own, by its absolute path).
    pub binary: String,
    /// The plan's directory when it was planned (absolute).
    pub dir: String,
    /// What the summary's header names.
    pub header: Header,
    /// The runs, by index.
    pub runs: Vec<PlannedRun>,
}

/// What the summary's header and JSON name, as `sweep` would on one machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Virtual: the profile, timeline, pollers and `--set` values.
    pub profile: Option<String>,
    pub timeline: Option<String>,
    pub pollers: Vec<String>,
    pub sets: Vec<String>,
    /// Campaign: the `--vary` options as given, and the number of cells.
    pub vary: Vec<String>,
    pub combinations: usize,
    /// Campaign: `--equivalence-margin`, stated with the plan, before the runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
}

/// One run of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedRun {
    /// Its index: the job array's task, the Indexed Job's completion index,
    /// the name of its result (`runs/INDEX.db`). Runs go in index order.
    pub index: usize,
    /// Its place in the one-machine sweep's order (cells outermost, then
    /// seeds): the order of the summary.
    pub position: usize,
    /// Its cell (`interval=1s,limit=200`; empty without `--vary`).
    pub combination: String,
    pub seed: u64,
    /// The `experiment` flags it runs with, but `--seed` (and `--db` for a
    /// campaign's run, and `--clock virtual` for a virtual one, which the
    /// run adds).
    pub flags: Vec<String>,
}

/// A run in the one-machine order, before the plan numbers it.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub combination: String,
    pub seed: u64,
    pub flags: Vec<String>,
}

/// Everything a plan holds but its runs' order and id.
pub struct Draft {
    pub kind: &'static str,
    pub target: String,
    pub seeds: String,
    pub duration: String,
    pub order_seed: u64,
    pub experiment: String,
    pub binary: String,
    pub dir: String,
    pub header: Header,
}

/// `0..n` in a seeded random order (Fisher-Yates, each draw from
/// SplitMix64 over the seed and the step, so the order depends on nothing
/// but the seed: no generator's version can change it).
pub fn order(seed: u64, n: usize) -> Vec<usize> {
    let mut out: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let draw = since_id::seed::stream(seed, 0x5357_4545_505f_4f52, i as u32);
        let j = (draw % (i as u64 + 1)) as usize;
        out.swap(i, j);
    }
    out
}

/// The plan of `cells` (in the one-machine order): index `i` runs the cell
/// at place `order(order_seed)[i]`; its id computed.
pub fn build(draft: Draft, cells: Vec<Cell>) -> Plan {
    let places = order(draft.order_seed, cells.len());
    let runs = places
        .iter()
        .enumerate()
        .map(|(index, &position)| {
            let c = &cells[position];
            PlannedRun {
                index,
                position,
                combination: c.combination.clone(),
                seed: c.seed,
                flags: c.flags.clone(),
            }
        })
        .collect();
    let mut plan = Plan {
        format: FORMAT.into(),
        version: VERSION,
        id: String::new(),
        experiment: draft.experiment,
        kind: draft.kind.into(),
        target: draft.target,
        seeds: draft.seeds,
        duration: draft.duration,
        order_seed: draft.order_seed,
        binary: draft.binary,
        dir: draft.dir,
        header: draft.header,
        runs,
    };
    plan.id = digest(&plan);
    plan
}

/// The SHA-256 (lower-case hex) of the plan's compact JSON with its id empty.
pub fn digest(plan: &Plan) -> String {
    let mut bare = plan.clone();
    bare.id = String::new();
    let text = serde_json::to_string(&bare).unwrap_or_default();
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The id's first 12 characters: the job's name.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// Reads `plan.json`'s text (`name` for the messages): its format and
/// version first, so that a plan of another version is named as such,
/// then the whole, whose id must be its digest. One line on error.
pub fn parse(name: &str, text: &str) -> Result<Plan, String> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("{name}: not a sweep plan (not JSON: {e})"))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(format!(
            "{name}: not a sweep plan (written by `experiment sweep ... --plan DIR`)"
        ));
    }
    match value.get("version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(VERSION) => {}
        Some(v) => {
            let by = value
                .get("experiment")
                .and_then(|e| e.as_str())
                .unwrap_or("another version");
            return Err(format!(
                "{name}: a plan of format {v} (by experiment {by}); this experiment reads format {VERSION}: plan again with it, or run the plan with the experiment that made it"
            ));
        }
        None => return Err(format!("{name}: a sweep plan without a version")),
    }
    let plan: Plan =
        serde_json::from_value(value).map_err(|e| format!("{name}: a damaged sweep plan: {e}"))?;
    if digest(&plan) != plan.id {
        return Err(format!(
            "{name}: the plan was changed after it was made (its content no longer has its id {}): plan again instead of editing it",
            short(&plan.id)
        ));
    }
    if plan.runs.iter().enumerate().any(|(i, r)| r.index != i) {
        return Err(format!(
            "{name}: a damaged sweep plan: its runs out of index order"
        ));
    }
    Ok(plan)
}

/// Checks that this `experiment` (`version`) may make the plan's runs.
pub fn check_runner(plan: &Plan, name: &str, version: &str) -> Result<(), String> {
    if plan.experiment != version {
        return Err(format!(
            "{name}: planned by experiment {}, this is {version}: runs of one plan are made by one version (run the plan's binary, {})",
            plan.experiment, plan.binary
        ));
    }
    Ok(())
}

/// The index a task runs: `--index`, else `SLURM_ARRAY_TASK_ID` (a Slurm
/// job array's task, sbatch(1)), else `JOB_COMPLETION_INDEX` (a Kubernetes
/// Indexed Job's pod, kubernetes.io/docs/concepts/workloads/controllers/job/);
/// checked against the plan's runs.
pub fn index_of(
    given: Option<usize>,
    slurm: Option<&str>,
    kubernetes: Option<&str>,
    runs: usize,
) -> Result<usize, String> {
    let index = match (given, slurm, kubernetes) {
        (Some(i), _, _) => i,
        (None, Some(s), _) => s.trim().parse().map_err(|_| {
            format!("SLURM_ARRAY_TASK_ID '{s}' is not an index (a task of a job array has one)")
        })?,
        (None, None, Some(k)) => k
            .trim()
            .parse()
            .map_err(|_| format!("JOB_COMPLETION_INDEX '{k}' is not an index"))?,
        (None, None, None) => {
            return Err(
                "which run? --index N, or SLURM_ARRAY_TASK_ID (a Slurm job array) or JOB_COMPLETION_INDEX (a Kubernetes Indexed Job)".into(),
            );
        }
    };
    if index >= runs {
        return Err(format!(
            "index {index} is out of range: the plan has {runs} run(s), 0 to {}",
            runs.saturating_sub(1)
        ));
    }
    Ok(index)
}

/// Minutes a run may take before the scheduler ends it: a virtual run an
/// hour whatever its virtual duration (it runs in seconds to minutes), a
/// real one its longest `--duration` and 15 minutes for its server's start
/// and the judging.
pub fn time_limit_minutes(plan: &Plan) -> u64 {
    if plan.kind == "virtual" {
        return 60;
    }
    let longest_ms = plan
        .runs
        .iter()
        .filter_map(|r| {
            let at = r.flags.iter().rposition(|f| f == "--duration")?;
            since_id::time::parse_duration_ms(r.flags.get(at + 1)?).ok()
        })
        .max()
        .unwrap_or(0);
    longest_ms.div_ceil(60_000) + 15
}

/// `'text'` for a POSIX shell (a `'` as `'\''`).
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The Slurm batch script (`slurm.sh`): a job array of one task per run,
/// each on a node of its own (`--exclusive`: no other job shares the node,
/// and `--mem=0` gives it all the node's memory, sbatch(1)), each calling
/// `experiment sweep run DIR`, which reads its index from
/// `SLURM_ARRAY_TASK_ID`.
pub fn slurm_script(plan: &Plan) -> String {
    let dir = &plan.dir;
    let n = plan.runs.len();
    let minutes = time_limit_minutes(plan);
    format!(
        r#"#!/bin/bash
# snowleak sweep plan {id}
# {n} run(s), {what}; one run per array task and one task per node at a time,
# since a run measures its machine.
#   submit:  sbatch {script}          (sbatch --wait ... blocks until every task ended)
#   then:    {bin} sweep merge {qdir}
#   redo some: sbatch --array=3,17 {script}   (a finished index does nothing when run again)
# {dir} must be on storage every node sees at the same path.
#SBATCH --job-name=snowleak-{short}
#SBATCH --array=0-{last}
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --exclusive
#SBATCH --mem=0
#SBATCH --time={hours}:{mins:02}:00
#SBATCH --output={dir}/logs/%A_%a.out
exec {bin} sweep run {qdir}
"#,
        id = plan.id,
        what = describe(plan),
        script = sh_quote(&format!("{dir}/slurm.sh")),
        bin = sh_quote(&plan.binary),
        qdir = sh_quote(dir),
        short = short(&plan.id),
        last = n.saturating_sub(1),
        hours = minutes / 60,
        mins = minutes % 60,
    )
}

/// `16 virtual runs of 1h on the simulator` / `real runs of 3m on postgres`.
fn describe(plan: &Plan) -> String {
    match plan.kind.as_str() {
        "virtual" => format!("virtual runs of {} on the simulator", plan.duration),
        _ => format!("real runs of {} on {}", plan.duration, plan.target),
    }
}

/// The Kubernetes Indexed Job (`job.yaml`): `completions` pods, index 0 to
/// n-1 in `JOB_COMPLETION_INDEX`, at most one of the plan's pods per node
/// (a required pod anti-affinity on `kubernetes.io/hostname`), each calling
/// `experiment sweep run DIR` with the plan's directory mounted at the same
/// path; the node's name from the downward API, for the run's record.
pub fn kubernetes_job(plan: &Plan) -> String {
    let n = plan.runs.len();
    format!(
        r#"# snowleak sweep plan {id}
# {n} run(s), {what}; one pod per run and at most one of them per node (the
# anti-affinity below), since a run measures its machine.
#   kubectl apply -f job.yaml
#   kubectl wait --for=condition=complete --timeout=-1s job/snowleak-{short}
#   then: experiment sweep merge {dir}
# Set the image (one holding this experiment, {version}, and the target's servers) and the
# claim (a ReadWriteMany volume holding this directory). backoffLimitPerIndex needs
# Kubernetes 1.29 or later (before: delete it; backoffLimit then counts every index's failures).
apiVersion: batch/v1
kind: Job
metadata:
  name: snowleak-{short}
spec:
  completionMode: Indexed
  completions: {n}
  parallelism: {n}
  backoffLimitPerIndex: 2
  template:
    metadata:
      labels:
        snowleak-plan: "{short}"
    spec:
      restartPolicy: Never
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchLabels:
                  snowleak-plan: "{short}"
              topologyKey: kubernetes.io/hostname
      containers:
        - name: run
          image: snowleak-experiment:{version}
          command: ["experiment", "sweep", "run", {qdir}]
          env:
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
          volumeMounts:
            - name: plan
              mountPath: {qdir}
      volumes:
        - name: plan
          persistentVolumeClaim:
            claimName: snowleak-campaign
"#,
        id = plan.id,
        what = describe(plan),
        short = short(&plan.id),
        dir = plan.dir,
        version = plan.experiment,
        qdir = serde_json::to_string(&plan.dir).unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(kind: &'static str) -> Draft {
        Draft {
            kind,
            target: "simulator".into(),
            seeds: "1-3".into(),
            duration: "10m".into(),
            order_seed: 1,
            experiment: "0.1.0".into(),
            binary: "/opt/bin/experiment".into(),
            dir: "/shared/plan".into(),
            header: Header::default(),
        }
    }

    fn cells(n: u64) -> Vec<Cell> {
        (1..=n)
            .map(|seed| Cell {
                combination: format!("interval={}s", seed % 2 + 1),
                seed,
                flags: vec!["--duration".into(), "3m".into()],
            })
            .collect()
    }

    #[test]
    fn the_order_is_a_seeded_permutation_that_interleaves() {
        let a = order(1, 40);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..40).collect::<Vec<_>>());
        assert_eq!(a, order(1, 40), "the same seed, the same order");
        assert_ne!(a, order(2, 40));
        assert_ne!(a, sorted, "not the one-machine order");
        // Two cells of 20 runs each (places 0-19 and 20-39): the first half
        // of the order holds runs of both.
        let first_half_of_cell_1 = a[..20].iter().filter(|&&p| p < 20).count();
        assert!((1..20).contains(&first_half_of_cell_1), "{a:?}");
        assert!(order(1, 0).is_empty());
        assert_eq!(order(1, 1), [0]);
    }

    #[test]
    fn a_plan_numbers_its_runs_by_the_order_and_reads_back() {
        let plan = build(draft("campaign"), cells(8));
        assert_eq!(plan.runs.len(), 8);
        for (i, r) in plan.runs.iter().enumerate() {
            assert_eq!(r.index, i);
            assert_eq!(r.seed, r.position as u64 + 1);
        }
        assert_eq!(plan.id.len(), 64);
        let text = serde_json::to_string_pretty(&plan).unwrap();
        assert_eq!(parse("plan.json", &text).unwrap(), plan);
        // Another seed of the order is another plan.
        let mut d = draft("campaign");
        d.order_seed = 2;
        assert_ne!(build(d, cells(8)).id, plan.id);
    }

    #[test]
    fn another_version_an_edit_or_another_file_is_refused_in_one_line() {
        let plan = build(draft("virtual"), cells(3));
        let text = serde_json::to_string_pretty(&plan).unwrap();
        let newer = text.replace("\"version\": 1", "\"version\": 2");
        let edited = text.replace("\"seed\": 2", "\"seed\": 9");
        for (bad, says) in [
            (newer.as_str(), "format 2"),
            (edited.as_str(), "changed after it was made"),
            ("{}", "not a sweep plan"),
            ("[1,", "not JSON"),
        ] {
            let e = parse("d/plan.json", bad).unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        assert!(check_runner(&plan, "p", "0.1.0").is_ok());
        let e = check_runner(&plan, "p", "0.2.0").unwrap_err();
        assert!(e.contains("planned by experiment 0.1.0"), "{e}");
    }

    #[test]
    fn the_index_comes_from_the_flag_slurm_or_kubernetes_and_must_be_in_range() {
        assert_eq!(index_of(Some(2), Some("5"), None, 8), Ok(2));
        assert_eq!(index_of(None, Some("5"), Some("1"), 8), Ok(5));
        assert_eq!(index_of(None, None, Some("7"), 8), Ok(7));
        for (given, slurm, k8s) in [
            (Some(8), None, None),
            (None, Some("x"), None),
            (None, None, Some("-1")),
            (None, None, None),
        ] {
            let e = index_of(given, slurm, k8s, 8).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
        assert!(
            index_of(Some(8), None, None, 8)
                .unwrap_err()
                .contains("0 to 7")
        );
    }

    #[test]
    fn the_scripts_run_one_task_per_run_and_node_calling_sweep_run() {
        let plan = build(draft("campaign"), cells(8));
        let s = slurm_script(&plan);
        for line in [
            "#SBATCH --array=0-7",
            "#SBATCH --exclusive",
            "#SBATCH --time=0:18:00",
            "#SBATCH --output=/shared/plan/logs/%A_%a.out",
            "exec '/opt/bin/experiment' sweep run '/shared/plan'",
        ] {
            assert!(s.lines().any(|l| l == line), "{line} in\n{s}");
        }
        let k = kubernetes_job(&plan);
        for line in [
            "  completionMode: Indexed",
            "  completions: 8",
            "              topologyKey: kubernetes.io/hostname",
            "          command: [\"experiment\", \"sweep\", \"run\", \"/shared/plan\"]",
        ] {
            assert!(k.lines().any(|l| l == line), "{line} in\n{k}");
        }
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(time_limit_minutes(&build(draft("virtual"), cells(2))), 60);
    }
}
