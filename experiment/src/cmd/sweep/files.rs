//! A plan's directory on disk: `plan.json`, `slurm.sh`, `job.yaml`,
//! `logs/` (the Slurm tasks' output) and `runs/`, where run INDEX ends as
//! `INDEX.db` when it finished or `INDEX.failed.json` when it failed. A
//! file is published by writing it aside under a name no reader takes
//! (`.INDEX.tmp-HOST-PID.db`), flushing it, and renaming it into place,
//! which replaces an old one atomically, with no moment at which it is
//! missing (rename(2)); the directory is flushed after the rename, since
//! fsync(2) of a file does not make its directory entry durable. A task
//! killed halfway leaves only its aside file, which the merge ignores and
//! the index's next attempt on that host removes.

use super::plan::{self, Plan};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One entry of `runs/`, by its name.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// `INDEX.db`: a finished run (if it says so inside).
    Done(usize),
    /// `INDEX.failed.json`: the last attempt failed.
    Failed(usize),
    /// `.INDEX.tmp-HOST-PID...`: an attempt under way, or one killed halfway.
    Partial {
        index: usize,
        host: String,
        pid: u32,
    },
    /// Anything else (ignored).
    Other,
}

/// The aside name of run `index`'s attempt by process `pid` on `host`.
pub fn partial_name(index: usize, host: &str, pid: u32, ext: &str) -> String {
    format!(".{index}.tmp-{host}-{pid}.{ext}")
}

/// What a name in `runs/` is.
pub fn entry(name: &str) -> Entry {
    if let Some(rest) = name.strip_prefix('.') {
        let Some((index, rest)) = rest.split_once(".tmp-") else {
            return Entry::Other;
        };
        // HOST-PID.EXT, the host possibly with dashes and dots, a journal's
        // suffix possibly after the extension: the last dash before digits.
        let split = rest.match_indices('-').rev().find_map(|(at, _)| {
            let pid = rest[at + 1..].split('.').next().unwrap_or("");
            (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then(|| (&rest[..at], pid))
        });
        let Some((host, pid)) = split else {
            return Entry::Other;
        };
        return match (index.parse(), pid.parse()) {
            (Ok(index), Ok(pid)) => Entry::Partial {
                index,
                host: host.to_string(),
                pid,
            },
            _ => Entry::Other,
        };
    }
    let index_of = |stem: &str| {
        (!stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()))
            .then(|| stem.parse().ok())
            .flatten()
    };
    if let Some(i) = name.strip_suffix(".failed.json").and_then(index_of) {
        return Entry::Failed(i);
    }
    match name.strip_suffix(".db").and_then(index_of) {
        Some(i) => Entry::Done(i),
        None => Entry::Other,
    }
}

pub fn plan_path(dir: &Path) -> PathBuf {
    dir.join("plan.json")
}

pub fn runs_dir(dir: &Path) -> PathBuf {
    dir.join("runs")
}

/// Reads and checks the plan in `dir`.
pub fn read_plan(dir: &Path) -> Result<Plan, String> {
    let path = plan_path(dir);
    let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "{}: no plan there (make one with `experiment sweep ... --plan {}`)",
            path.display(),
            dir.display()
        ),
        _ => format!("{}: {e}", path.display()),
    })?;
    plan::parse(&path.display().to_string(), &text)
}

/// Flushes the directory `dir`'s entries (fsync(2) on the directory).
pub fn sync_dir(dir: &Path) -> Result<(), String> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Publishes the finished file `aside` as `path`: flushed, renamed over
/// whatever was there, the directory flushed.
pub fn publish(aside: &Path, path: &Path) -> Result<(), String> {
    std::fs::File::open(aside)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("{}: {e}", aside.display()))?;
    std::fs::rename(aside, path).map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}",
            aside.display(),
            path.display()
        )
    })?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Writes `bytes` to `path` by an aside file and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or("file".into(), |n| n.to_string_lossy());
    let aside = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::File::create(&aside)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| format!("{}: {e}", aside.display()))?;
    publish(&aside, path)
}

/// Removes a SQLite database and its journals, if there.
pub fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

/// Whether process `pid` of this host is alive (kill(2) with signal 0:
/// ESRCH when there is no such process).
pub fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks the pid.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_of_runs_say_what_each_is() {
        assert_eq!(entry("12.db"), Entry::Done(12));
        assert_eq!(entry("3.failed.json"), Entry::Failed(3));
        assert_eq!(
            entry(&partial_name(4, "node-7.example", 912, "db")),
            Entry::Partial {
                index: 4,
                host: "node-7.example".into(),
                pid: 912
            }
        );
        assert_eq!(
            entry(".4.tmp-vm-912.db-journal"),
            Entry::Partial {
                index: 4,
                host: "vm".into(),
                pid: 912
            }
        );
        for other in [
            "x.db",
            "-1.db",
            "1.db-wal",
            "",
            "plan.json",
            ".x.tmp-a-1.db",
            "1.5.db",
        ] {
            assert_eq!(entry(other), Entry::Other, "{other}");
        }
    }
}
