//! `experiment sweep merge DIR --keep FILE` and `experiment sweep report
//! FILE`: a campaign's tables made from its runs, without their databases
//! (docs/campaigns.md, "Tables made from the runs"). The merge keeps, for
//! each finished run, what the summary is computed from (its record and its
//! judged result) and the SHA-256 of its database, a few KB a cell; the
//! report computes the merge's summary from that file alone, through the
//! same [`merge::merge_campaign`]: a table in docs/ is the report's output
//! over a file committed beside it, and anyone holding a run's database
//! can check it is the one summarised (`sha256sum runs/3.db`).

use super::merge::{self, Collected};
use super::plan::{self, Plan};
use super::store::RunRecord;
use analysis::campaign::RunResult;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// The file's format name and version.
const FORMAT: &str = "snowleak-campaign-runs";
const VERSION: u32 = 1;

/// A campaign's finished runs, as `--keep` writes them.
#[derive(Debug, Serialize, Deserialize)]
pub struct Kept {
    pub format: String,
    pub version: u32,
    /// The plan the runs belong to, whole: the report names its target,
    /// seeds, duration and runs from it, and counts those missing.
    pub plan: Plan,
    pub runs: Vec<KeptRun>,
}

/// One finished run: what its database says of it, judged.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeptRun {
    pub index: usize,
    pub record: RunRecord,
    pub result: RunResult,
    /// The SHA-256 (lower-case hex) of `runs/INDEX.db` when it was judged.
    pub db_sha256: String,
}

/// The runs a kept file at `path` already holds for `plan` whose databases
/// `c` (the runs directory) no longer has: the merge carries them over, so
/// that one file grows over a campaign whose databases were judged on
/// another machine, or lost with it, and a run made again replaces its old
/// summary. None when there is no file yet; a file of another plan refuses
/// the merge (one plan a file).
pub fn carried(path: &Path, plan: &Plan, c: &Collected<RunResult>) -> Result<Vec<KeptRun>, String> {
    if !path
        .try_exists()
        .map_err(|e| format!("{}: {e}", path.display()))?
    {
        return Ok(Vec::new());
    }
    let kept = read(path)?;
    if kept.plan.id != plan.id {
        return Err(format!(
            "{}: it keeps the runs of plan {}, not of this plan {}: keep each plan's runs in a file of its own",
            path.display(),
            plan::short(&kept.plan.id),
            plan::short(&plan.id)
        ));
    }
    Ok(kept
        .runs
        .into_iter()
        .filter(|r| !c.done.iter().any(|(index, _, _)| *index == r.index))
        .collect())
}

/// Writes the finished runs of `c` (of `plan`, in `dir`) to `path`, with
/// those `carried` from the file before.
pub fn keep(
    path: &Path,
    plan: &Plan,
    dir: &Path,
    c: &Collected<RunResult>,
    carried: Vec<KeptRun>,
) -> Result<(), String> {
    let mut runs = carried;
    for (index, record, result) in &c.done {
        let db = super::files::runs_dir(dir).join(format!("{index}.db"));
        runs.push(KeptRun {
            index: *index,
            record: record.clone(),
            result: RunResult {
                // The database's place on the machine that judged it says
                // nothing to a reader of the file: its index does.
                db: format!("runs/{index}.db"),
                ..result.clone()
            },
            db_sha256: sha256(&db)?,
        });
    }
    runs.sort_by_key(|r| r.index);
    let kept = Kept {
        format: FORMAT.into(),
        version: VERSION,
        plan: plan.clone(),
        runs,
    };
    let text = serde_json::to_string_pretty(&kept).map_err(|e| e.to_string())? + "\n";
    super::files::write_atomically(path, text.as_bytes())
}

/// `sweep report FILE`: the merge's summary (text, or `--json`) computed
/// from a kept file alone. Exit status as the merge's: 0 when every run of
/// the plan is in the file, 1 when some are missing.
pub fn report_command(path: &Path, json: bool) -> Result<u8, String> {
    let kept = read(path)?;
    let c = Collected {
        done: kept
            .runs
            .into_iter()
            .map(|r| (r.index, r.record, r.result))
            .collect(),
        failed: Vec::new(),
        partial: Vec::new(),
        rerun_at: None,
    };
    let merged = merge::merge_campaign(&kept.plan, &path.display().to_string(), &c);
    if json {
        println!("{}", merged.json);
    } else {
        print!("{}", merged.text);
    }
    Ok(if merged.complete { 0 } else { 1 })
}

/// Reads a kept file, checking that it is one, that its plan is whole (its
/// id is its digest) and that every run is of that plan, once, in range.
pub fn read(path: &Path) -> Result<Kept, String> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
    let kept: Kept = serde_json::from_str(&text)
        .map_err(|e| format!("{name}: not a file of `sweep merge --keep`: {e}"))?;
    if kept.format != FORMAT || kept.version != VERSION {
        return Err(format!(
            "{name}: format {} version {}, not {FORMAT} version {VERSION}",
            kept.format, kept.version
        ));
    }
    if plan::digest(&kept.plan) != kept.plan.id {
        return Err(format!(
            "{name}: its plan's id is not the plan's digest: the plan was edited"
        ));
    }
    if kept.plan.kind != "campaign" {
        return Err(format!(
            "{name}: a {} plan; only a campaign's runs are kept",
            kept.plan.kind
        ));
    }
    let mut seen = vec![false; kept.plan.runs.len()];
    for r in &kept.runs {
        let planned = kept.plan.runs.get(r.index);
        let fits = planned
            .is_some_and(|p| p.combination == r.result.combination && p.seed == r.result.seed)
            && r.record.plan == kept.plan.id
            && r.record.index == r.index;
        if !fits || std::mem::replace(&mut seen[r.index], true) {
            return Err(format!(
                "{name}: run {} is not the plan's run {} (another plan's, another cell's, or twice)",
                r.index, r.index
            ));
        }
    }
    Ok(kept)
}

/// The SHA-256 (lower-case hex) of the file at `path`, read in blocks.
fn sha256(path: &Path) -> Result<String, String> {
    let e = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut file = std::fs::File::open(path).map_err(e)?;
    let mut hasher = Sha256::new();
    let mut block = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut block).map_err(e)?;
        if n == 0 {
            break;
        }
        hasher.update(&block[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
