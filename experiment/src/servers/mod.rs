//! Throwaway servers a run starts from the system's binaries and removes at
//! its end: shared by the targets that need them, so that no target imports
//! another to get one.

pub mod mariadb;
pub mod postgres;
pub mod redis;

use std::path::{Path, PathBuf};

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
