//! Throwaway servers a run starts from the system's binaries and removes at
//! its end. A server only one target uses lives in that target's folder
//! (MariaDB's in `targets/mariadb/server.rs`, Redis in
//! `targets/misskey_ftt/redis.rs`); PostgreSQL's is here because two targets
//! start it (`postgres` and `misskey_ftt`), and no target imports another to
//! get one. What every server shares (its directory, its stale sweep, its
//! kill) is this file's.

pub mod postgres;

use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};

/// Makes a fresh directory `PREFIX<pid>-<unique>` in the temporary
/// directory for one server (`what` names it in the error): the owner's pid
/// first, written in the same step as the directory, for [`stale_dirs`].
pub fn make_dir(prefix: &str, what: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!(
        "{prefix}{}-{}",
        std::process::id(),
        crate::clock::now_ms()
            .unsigned_abs()
            .wrapping_mul(1_000_003)
            .wrapping_add(unique())
    ));
    std::fs::create_dir(&dir)
        .map_err(|e| format!("cannot make the {what} directory {}: {e}", dir.display()))?;
    Ok(dir)
}

/// A per-process counter, so that two servers started in the same ms differ.
pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Kills and reaps a server process this run started, if it runs: a
/// throwaway server needs no clean shutdown on the way out.
pub fn kill(child: &mut Option<Child>) {
    if let Some(mut child) = child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// How a server process this run started ended, if it has.
pub fn exited(child: &mut Option<Child>) -> Option<ExitStatus> {
    child.as_mut().and_then(|c| c.try_wait().ok().flatten())
}

/// Removes a server's directory, with a warning when it cannot.
pub fn remove_dir(dir: &Path, what: &str) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        tracing::warn!(dir = %dir.display(), "removing the {what} directory: {e}");
    }
}

/// The directories a killed run left: those in the temporary directory named
/// `PREFIX<pid>-...` whose owner, the pid, is gone. The owner's pid is in the
/// name, written in the same step as the directory itself, so no sweep can
/// see a live server's directory without its owner; a name without a pid is
/// someone else's (a test's scratch directory may share the prefix) and is
/// never returned.
pub fn stale_dirs(prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let owner = name
                .to_string_lossy()
                .strip_prefix(prefix)
                .and_then(|rest| rest.split('-').next()?.parse::<u32>().ok());
            owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        })
        .map(|entry| entry.path())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_directories_of_dead_owners_are_stale() {
        let prefix = format!("snowleak-stale-test-{}-", std::process::id());
        // A pid that existed and is gone: a child that ran and was reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let tmp = std::env::temp_dir();
        let names = [
            format!("{prefix}{dead}-1"),
            format!("{prefix}{}-1", std::process::id()),
            format!("{prefix}scratch-1"),
        ];
        for name in &names {
            std::fs::create_dir_all(tmp.join(name)).unwrap();
        }
        let stale = super::stale_dirs(&prefix);
        for name in &names {
            std::fs::remove_dir_all(tmp.join(name)).unwrap();
        }
        assert_eq!(stale, vec![tmp.join(&names[0])]);
    }
}
