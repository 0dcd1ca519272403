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
