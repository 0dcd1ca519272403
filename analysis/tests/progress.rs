//! `analyze`'s progress bar: on stderr on a terminal only. Piped, stderr
//! carries no progress and stdout is what it always was; under a
//! pseudo-terminal (util-linux's `script`, with TERM=xterm) the bar is drawn.
//! indicatif hides its stderr target when stderr is not a terminal or TERM is
//! unset or `dumb` (https://docs.rs/indicatif/0.18/indicatif/struct.ProgressDrawTarget.html).

use analysis::synth::{self, SimSpec};
use std::path::Path;
use std::process::Command;

mod common;

/// The words of the bar's template (`analysis::progress::counted`).
const BAR_TEXT: &str = "rows done";

fn spec() -> SimSpec {
    SimSpec {
        ticks: 60,
        late_fraction: 0.1,
        ..SimSpec::default()
    }
}

/// `analyze ARGS` with stdout and stderr piped, TERM set as on a terminal:
/// only the pipe keeps the bar away.
fn analyze_piped(args: &[&str]) -> (String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args(args)
        .env("TERM", "xterm")
        .output()
        .expect("analyze runs");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "{err}");
    (out, err)
}

/// `analyze ARGS > stdout_file` under a pseudo-terminal made by util-linux's
/// `script`: what the terminal received (stderr, where the bar draws).
fn analyze_in_terminal(args: &[&str], stdout_file: &Path) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = quote(env!("CARGO_BIN_EXE_analyze"));
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    line.push_str(" > ");
    line.push_str(&quote(stdout_file.to_str().unwrap()));
    let o = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("TERM", "xterm")
        .output()
        .expect("util-linux's script runs (the pseudo-terminal of this test)");
    let seen = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{seen}");
    seen
}

fn assert_no_progress(stderr: &str) {
    assert!(
        !stderr.contains('\r') && !stderr.contains(BAR_TEXT) && !stderr.contains("\x1b["),
        "progress reached a piped stderr: {stderr:?}"
    );
}

#[test]
fn piped_stderr_gets_no_progress_and_stdout_is_unchanged() {
    let dir = common::temp_dir("progress-piped");
    let db = dir.join("run.db");
    synth::simulate_to_db(&db, &spec(), true).unwrap();
    let db = db.to_str().unwrap();
    let out = dir.to_str().unwrap();
    let (text, err) = analyze_piped(&[db, "--out", out]);
    assert_no_progress(&err);
    assert!(text.starts_with("run 1 is complete"), "{text}");
    let (json, err) = analyze_piped(&[db, "--out", out, "--json"]);
    assert_no_progress(&err);
    let parsed: serde_json::Value = serde_json::from_str(&json).expect("stdout is JSON alone");
    assert!(parsed["pollers"].is_array(), "{json}");

    // The same commands on a terminal: stdout byte for byte the same.
    for (args, piped) in [
        (vec![db, "--out", out], &text),
        (vec![db, "--out", out, "--json"], &json),
    ] {
        let file = dir.join("stdout.txt");
        analyze_in_terminal(&args, &file);
        assert_eq!(&std::fs::read_to_string(&file).unwrap(), piped, "{args:?}");
    }
}

#[test]
fn a_terminal_gets_the_bar() {
    let dir = common::temp_dir("progress-terminal");
    let db = dir.join("run.db");
    synth::simulate_to_db(&db, &spec(), true).unwrap();
    let seen = analyze_in_terminal(
        &[db.to_str().unwrap(), "--out", dir.to_str().unwrap()],
        &dir.join("stdout.txt"),
    );
    assert!(seen.contains(BAR_TEXT), "no bar drawn: {seen:?}");
    assert!(seen.contains('\r'), "no bar redrawn in place: {seen:?}");
}
