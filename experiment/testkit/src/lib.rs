//! What the tests of both packages (`experiment`, `analysis`) share; a dev-dependency only.
//! Each test suite's `tests/common/mod.rs` adds what only it needs (its binaries).

use std::ops::Deref;
use std::path::Path;

/// A fresh directory for one test, removed (with what the test wrote) when dropped, even
/// when the test fails. Derefs to its path.
pub struct TempDir(tempfile::TempDir);

impl Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// A fresh directory for one test, named `snowleak-NAME-...` in the system's temporary
/// directory (`TMPDIR`).
pub fn temp_dir(name: &str) -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("snowleak-{name}-"))
        .tempdir()
        .expect("a temporary directory");
    TempDir(dir)
}

/// Our own SQL for the statuses deleted before a poller could see them (`?1`: its name), the
/// checker's "gone" (docs/analysis.md, "visible"): deleted, never returned to the poller, and no
/// request of it sent once the status was visible, answered before its deletion and with the
/// status in its window. For the tests of both packages, each with its own run.db.
pub const GONE_BY_SQL: &str =
    "SELECT t.id FROM truth t WHERE t.run_id = 1 AND t.deleted_at_ms IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM observations o JOIN requests r ON r.id = o.request_id
         JOIN pollers p ON p.id = r.poller_id WHERE p.name = ?1 AND o.status_id = t.id)
   AND NOT EXISTS (SELECT 1 FROM requests r JOIN pollers p ON p.id = r.poller_id
         WHERE p.name = ?1 AND r.sent_at_ms >= t.visible_at_ms
           AND r.received_at_ms < t.deleted_at_ms
           AND (r.before_key IS NULL OR r.before_key > t.id_key
                OR (r.since_key IS NOT NULL AND r.since_key >= t.id_key)))";

#[cfg(test)]
mod tests {
    #[test]
    fn the_directory_goes_with_its_guard() {
        let dir = super::temp_dir("kit");
        std::fs::write(dir.join("file"), "x").unwrap();
        let path = dir.to_path_buf();
        assert!(path.is_dir());
        assert!(
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("snowleak-kit-")
        );
        drop(dir);
        assert!(!path.exists());
    }
}
