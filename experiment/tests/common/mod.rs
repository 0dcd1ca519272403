//! What the tests of the `experiment` binary share: a scratch directory removed when the test
//! ends, and the binary run as a user would run it. Each test crate uses a part of it, hence
//! the allowances.
#![allow(dead_code, unused_imports)]

use std::process::{Command, Output};

pub use testkit::{TempDir, temp_dir};

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

/// The base URL `experiment serve` prints in its banner, read from its
/// standard output up to the banner's last line (`Ctrl-C ...`).
pub fn read_banner(stdout: &mut impl std::io::BufRead) -> String {
    let mut base = None;
    loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the server ended before it printed its banner"
        );
        if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
            let host = url.trim_start_matches("http://").split('/').next().unwrap();
            base.get_or_insert_with(|| format!("http://{host}"));
        }
        if line.starts_with("Ctrl-C") {
            return base.expect("the banner names the server's address");
        }
    }
}
