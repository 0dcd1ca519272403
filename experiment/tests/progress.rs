//! `experiment sweep`'s progress bar (seeds done of seeds total, with an
//! estimate): on stderr on a terminal only. Piped, stderr carries no progress
//! and stdout (table or --json) is what it always was; under a pseudo-terminal
//! (util-linux's `script`, with TERM=xterm) the bar is drawn. indicatif hides
//! its stderr target when stderr is not a terminal or TERM is unset or `dumb`
//! (https://docs.rs/indicatif/0.18/indicatif/struct.ProgressDrawTarget.html).

use std::path::Path;

mod common;

/// The words of the bar's template (`analysis::progress::counted`).
const BAR_TEXT: &str = "seeds done";

/// A short virtual sweep's flags, writing to `out`.
fn sweep_args(out: &Path, json: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        "sweep",
        "--seeds",
        "1-3",
        "--duration",
        "1m",
        "--poller",
        "naive",
        "--no-plots",
        "--jobs",
        "2",
        "--out",
    ]
    .map(String::from)
    .to_vec();
    args.push(out.to_str().unwrap().into());
    if json {
        args.push("--json".into());
    }
    args
}

/// `experiment ARGS` with stdout and stderr piped, TERM set as on a
/// terminal: only the pipe keeps the bar away.
fn piped(args: &[String]) -> (String, String) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = common::command(&args)
        .env("TERM", "xterm")
        .output()
        .expect("experiment runs");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "{err}");
    (out, err)
}

/// `experiment ARGS > stdout_file` under a pseudo-terminal made by
/// util-linux's `script`, with TERM=xterm: what the terminal received
/// (stderr, where the bar draws).
fn in_terminal(args: &[String], stdout_file: &Path) -> String {
    in_terminal_as("xterm", "warn", args, stdout_file)
}

/// [`in_terminal`] with this `TERM` and `RUST_LOG`.
fn in_terminal_as(term: &str, log: &str, args: &[String], stdout_file: &Path) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = format!("RUST_LOG={log} {}", quote(env!("CARGO_BIN_EXE_experiment")));
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    line.push_str(" > ");
    line.push_str(&quote(stdout_file.to_str().unwrap()));
    let o = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("TERM", term)
        .output()
        .expect("util-linux's script runs (the pseudo-terminal of this test)");
    let seen = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{seen}");
    seen
}

#[test]
fn piped_stderr_gets_no_progress_and_stdout_is_unchanged() {
    let scratch = common::temp_dir("progress-sweep");
    for json in [false, true] {
        let piped_out = scratch.join(format!("piped-{json}"));
        let (stdout, stderr) = piped(&sweep_args(&piped_out, json));
        assert!(
            !stderr.contains('\r') && !stderr.contains(BAR_TEXT) && !stderr.contains("\x1b["),
            "progress reached a piped stderr: {stderr:?}"
        );
        if json {
            let v: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is JSON alone");
            assert!(v["pollers"].is_array(), "{stdout}");
        } else {
            assert!(
                stdout.starts_with("sweep 1: 3 seeds x 1 pollers"),
                "{stdout}"
            );
        }
        // The same sweep on a terminal: the same stdout, but for its --out.
        let term_out = scratch.join(format!("terminal-{json}"));
        let file = scratch.join(format!("stdout-{json}.txt"));
        let seen = in_terminal(&sweep_args(&term_out, json), &file);
        assert!(
            seen.contains(BAR_TEXT),
            "no bar drawn on the terminal: {seen:?}"
        );
        let on_terminal = std::fs::read_to_string(&file)
            .unwrap()
            .replace(term_out.to_str().unwrap(), piped_out.to_str().unwrap());
        assert_eq!(on_terminal, stdout, "json: {json}");
    }
}

/// A run's own bar (`session::progress`): drawn on a terminal; where
/// indicatif hides it (TERM=dumb, even on a terminal) the run logs its
/// progress lines instead of showing nothing.
#[test]
fn a_runs_bar_on_a_terminal_and_log_lines_under_a_dumb_terminal() {
    let scratch = common::temp_dir("progress-run");
    let run = |term: &str| {
        let db = scratch.join(format!("{term}.db"));
        let args = ["--duration", "1m", "--clock", "virtual", "--db"]
            .map(String::from)
            .into_iter()
            .chain([db.to_str().unwrap().to_string()])
            .collect::<Vec<_>>();
        in_terminal_as(term, "info", &args, &scratch.join(format!("{term}.txt")))
    };
    let xterm = run("xterm");
    assert!(xterm.contains("(eta "), "no bar drawn: {xterm:?}");
    assert!(
        !xterm.contains(" elapsed: "),
        "log lines beside the bar: {xterm:?}"
    );
    let dumb = run("dumb");
    assert!(!dumb.contains("(eta "), "a bar under TERM=dumb: {dumb:?}");
    assert!(
        dumb.contains(" elapsed: "),
        "no progress lines under TERM=dumb: {dumb:?}"
    );
}

/// `experiment sweep merge`'s bar (runs read): none piped, the same stdout
/// (table and --json) on a terminal, where the bar is drawn.
#[test]
fn merge_shows_its_bar_on_a_terminal_only() {
    let scratch = common::temp_dir("progress-merge");
    let dir = scratch.join("plan");
    let d = dir.to_str().unwrap().to_string();
    let mut plan: Vec<String> = [
        "sweep",
        "--seeds",
        "1-2",
        "--duration",
        "1m",
        "--poller",
        "naive",
        "--plan",
    ]
    .map(String::from)
    .to_vec();
    plan.push(d.clone());
    piped(&plan);
    for index in ["0", "1"] {
        piped(&["sweep", "run", &d, "--index", index].map(String::from));
    }
    for json in [false, true] {
        let mut args = ["sweep", "merge", &d].map(String::from).to_vec();
        if json {
            args.push("--json".into());
        }
        let (stdout, stderr) = piped(&args);
        assert!(
            !stderr.contains('\r')
                && !stderr.contains("runs read done")
                && !stderr.contains("\x1b["),
            "progress reached a piped stderr: {stderr:?}"
        );
        let file = scratch.join(format!("merge-{json}.txt"));
        let seen = in_terminal(&args, &file);
        assert!(seen.contains("runs read done"), "no bar drawn: {seen:?}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            stdout,
            "json: {json}"
        );
    }
}
