//! What the tests of the `experiment` binary share: a scratch directory removed when the test
//! ends, and the binary run as a user would run it. Each test crate uses a part of it, hence
//! the `dead_code` allowance.
#![allow(dead_code)]

use std::ops::Deref;
use std::path::Path;
use std::process::{Command, Output};

/// A fresh directory for one test, removed (with what the test wrote) when dropped, even
/// when the test fails. Derefs to its path.
pub struct TempDir(tempfile::TempDir);

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
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

/// The `experiment` binary with `args`, logging warnings only, and with no API token in its
/// environment (a test that wants one sets it).
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_experiment"));
    cmd.args(args).env("RUST_LOG", "warn");
    for var in [
        "MASTODON_ACCESS_TOKEN",
        "X_BEARER_TOKEN",
        "MISSKEY_TOKEN",
        "DISCORD_BOT_TOKEN",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Sends `signal` (`-INT`, `-TERM`, `-KILL`) to a child process, as a user's `kill` would.
pub fn signal(child: &std::process::Child, signal: &str) {
    let sent = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill {signal} reaches the child");
}

/// Runs `experiment ARGS` to completion.
pub fn experiment(args: &[&str]) -> Output {
    command(args).output().expect("the experiment binary runs")
}

/// Runs `experiment ARGS` to completion and requires success (its stderr otherwise).
pub fn experiment_ok(args: &[&str]) -> Output {
    let out = experiment(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
