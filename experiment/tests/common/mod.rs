//! What the tests of the `experiment` binary share: a scratch directory removed when the test
//! ends, and the binary run as a user would run it. Each test crate uses a part of it, hence
//! the allowances.
#![allow(dead_code, unused_imports)]

use std::process::{Command, Output};

pub use testkit::{TempDir, temp_dir};

pub mod their_db;

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

/// (exit code, stdout, stderr) of a finished run; a run ended by a signal gives -1.
pub fn outcome(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The entries of the system's temporary directory a run with process id `pid` left
/// behind, named `{prefix}-{pid}-...` (the scratch directories of the servers it starts).
pub fn left_behind(prefix: &str, pid: u32) -> Vec<String> {
    let prefix = format!("{prefix}-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Runs `experiment ARGS` (a judge that starts its own server) to its end; returns
/// (exit code, stdout, stderr) and checks that the run left no scratch directory named
/// `{prefix}-{pid}-...` behind (`what` names those in the failure).
pub fn run_leaving_nothing(args: &[&str], prefix: &str, what: &str) -> (i32, String, String) {
    let child = command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("experiment judge runs");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let left = left_behind(prefix, pid);
    assert!(left.is_empty(), "{what} left behind: {left:?}");
    outcome(out)
}

/// Requires the outcome of bad input: exit 2 and exactly one `error:` line on stderr,
/// which contains `expected`.
pub fn assert_bad_input((code, stdout, stderr): (i32, String, String), expected: &str) {
    assert_eq!(code, 2, "bad input: exit 2\n{stdout}\n{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one line:\n{stderr}");
    assert!(errors[0].contains(expected), "{stderr}");
}

/// Runs a judge whose command commits, prints `ready` and then waits; at `ready` sends
/// Ctrl-C, as a user would. Returns (exit code, the rest of stdout, stderr) and checks
/// that the run left no scratch directory `{prefix}-{pid}-...` behind (`what` names it).
pub fn interrupt_when_ready(
    args: &[&str],
    prefix: &str,
    what: &str,
) -> (Option<i32>, String, String) {
    use std::io::BufRead;
    let mut child = command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("experiment judge runs");
    let pid = child.id();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while line.trim() != "ready" {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the command never said ready"
        );
    }
    signal(&child, "-INT");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(left_behind(prefix, pid).is_empty(), "the {what} is removed");
    (out.status.code(), rest, stderr)
}

/// The run's `end_reason` and the number of `log_truth` rows in the run.db at `db`
/// (which holds one run).
pub fn end_reason_and_truth_rows(db: &std::path::Path) -> (String, i64) {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT end_reason, (SELECT count(*) FROM log_truth) FROM runs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

/// (key, op, one integer column) of each `log_truth` row in the run.db at `db`, in
/// commit order; `column` names the integer (`commit_ms`, `xid`, ...).
pub fn truth_rows(db: &std::path::Path, column: &str) -> Vec<(String, String, i64)> {
    rusqlite::Connection::open(db)
        .unwrap()
        .prepare(&format!(
            "SELECT key, op, {column} FROM log_truth ORDER BY seq"
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Appends `ids`, one a line, to a relay's output file (made if missing), as a relay
/// delivers them.
pub fn append_ids<T: std::fmt::Display>(out: &std::path::Path, ids: &[T]) {
    use std::io::Write;
    let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(out)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

/// A running `experiment watch` and its stderr, past the banner.
pub type Watch = (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
);

/// Starts `experiment watch ARGS` and waits for its banner (it watches from there on);
/// a watch that ends first fails the test with its output.
pub fn start_watch(args: &[&str]) -> Watch {
    start_watch_command(command(args))
}

/// [`start_watch`] of a command the caller set up (its environment, say).
// The child is handed to the caller, which waits for it (`stop_watch`, `wait_watch`).
#[allow(clippy::zombie_processes)]
pub fn start_watch_command(mut command: Command) -> Watch {
    use std::io::BufRead;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("experiment watch runs");
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let out = child.wait_with_output().unwrap();
            panic!(
                "watch ended before it watched: {seen}{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        seen.push_str(&line);
        if line.starts_with("watching ") {
            return (child, stderr);
        }
    }
}

/// Waits for a watch to end by itself: its exit code (-1 for a signal), stdout and the
/// rest of stderr.
pub fn wait_watch((child, mut stderr): Watch) -> (i32, String, String) {
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        rest,
    )
}

/// Ends a watch with Ctrl-C: its exit code, stdout and the rest of stderr.
pub fn stop_watch(watch: Watch) -> (i32, String, String) {
    signal(&watch.0, "-INT");
    wait_watch(watch)
}

/// Runs `experiment watch ARGS` to its end: (exit code, stdout, stderr).
pub fn watch(args: &[&str]) -> (i32, String, String) {
    outcome(command(args).output().expect("experiment watch runs"))
}

/// Requires one refusal: exit 2 and a stderr of one line containing `expected`;
/// `case` names the case in a failure.
pub fn assert_refused((code, stdout, stderr): (i32, String, String), expected: &str, case: &str) {
    assert_eq!(code, 2, "{case}: exit 2\n{stdout}\n{stderr}");
    assert_eq!(
        stderr.trim().lines().count(),
        1,
        "{case}: one line\n{stderr}"
    );
    assert!(stderr.contains(expected), "{case}: {stderr}");
}

/// The line of a judge's or watch's report that names `key` lost (`lost key KEY ...`);
/// a report without one fails the test with the report.
pub fn lost_line<'a>(stdout: &'a str, key: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("lost key {key} ")))
        .unwrap_or_else(|| panic!("no lost key {key} in\n{stdout}"))
}

/// Requires the report on a consumer whose file has a line without a key and a key the
/// log never committed (99, on line 3 after line 2 `,no key`): both reported, not a crash.
pub fn assert_junk_reported(stdout: &str) {
    assert!(
        stdout.contains("keys the log never committed: 1 (first: 99)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("lines that name no key: 1 (first: line 2: ,no key)"),
        "{stdout}"
    );
}

/// `base` then `extra`, as one argument list.
pub fn joined<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

/// Requires the outcome of a watch that `--duration` ended with nothing committed:
/// exit 0 and a report of 0 rows.
pub fn assert_ended_empty((code, stdout, stderr): (i32, String, String)) {
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("(ended: duration): 0 rows"), "{stdout}");
}

/// The arguments of `experiment judge --log LOG --table outbox`, recording to
/// `db`, judging each `(name, file)` of `delivered`, draining for 0 s, around `program`
/// (the application: a program and its arguments).
pub fn judge_outbox_args(
    log: &str,
    db: &std::path::Path,
    delivered: &[(&str, &std::path::Path)],
    program: &[&str],
) -> Vec<String> {
    judge_outbox_args_with(log, db, delivered, &["--drain", "0s"], program)
}

/// [`judge_outbox_args`] with `flags` (the drain, faults, promises) in place of `--drain 0s`.
pub fn judge_outbox_args_with(
    log: &str,
    db: &std::path::Path,
    delivered: &[(&str, &std::path::Path)],
    flags: &[&str],
    program: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = ["judge", "--log", log, "--table", "outbox", "--db"]
        .map(String::from)
        .to_vec();
    args.push(db.display().to_string());
    for (name, file) in delivered {
        args.push("--delivered".into());
        args.push(format!("{name}={}", file.display()));
    }
    args.extend(flags.iter().map(|f| f.to_string()));
    args.push("--".into());
    args.extend(program.iter().map(|a| a.to_string()));
    args
}

/// `args` as the `&str`s a command takes.
pub fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The files of an application run by `judge_naive_and_junk`, and the judge's
/// (exit code, stdout, stderr).
pub struct AppRun {
    pub db: std::path::PathBuf,
    pub naive: std::path::PathBuf,
    pub facts: std::path::PathBuf,
    pub outcome: (i32, String, String),
}

/// Writes the shell script `app` in `dir` and judges it with `judge` on the outbox of
/// `log`, two consumers delivering to `naive.csv` and `junk.csv`; the script is run
/// as `sh app.sh NAIVE JUNK FACTS`, FACTS (named `facts`) the file where it writes what
/// the server reported, for the check.
pub fn judge_naive_and_junk(
    dir: &std::path::Path,
    log: &str,
    app: &str,
    facts: &str,
    judge: fn(&[&str]) -> (i32, String, String),
) -> AppRun {
    let script = dir.join("app.sh");
    std::fs::write(&script, app).unwrap();
    let (naive, junk, facts) = (dir.join("naive.csv"), dir.join("junk.csv"), dir.join(facts));
    let db = dir.join("judge.db");
    let args = judge_outbox_args(
        log,
        &db,
        &[("naive", naive.as_path()), ("junk", junk.as_path())],
        &[
            "sh",
            script.to_str().unwrap(),
            naive.to_str().unwrap(),
            junk.to_str().unwrap(),
            facts.to_str().unwrap(),
        ],
    );
    let outcome = judge(&strs(&args));
    AppRun {
        db,
        naive,
        facts,
        outcome,
    }
}

/// A loopback port free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on `addr` over HTTP/1.0: (the response's head, its body), or
/// `None` when nothing answers yet.
pub fn http_get(addr: &str, path: &str) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.to_string(), body.to_string()))
}

/// Calls `probe` every 200 ms until it returns something or `limit` passes.
pub fn poll<T>(limit: std::time::Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let until = std::time::Instant::now() + limit;
    loop {
        if let Some(found) = probe() {
            return Some(found);
        }
        if std::time::Instant::now() > until {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The value of the unlabelled metric `name` that watch serves on `addr`
/// (`--metrics`), once it serves one.
pub fn metric(addr: &str, name: &str) -> Option<i64> {
    let (_, body) = http_get(addr, "/metrics")?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as i64)
}

/// The `watch_state` run `run` of `run_db` stored last (committed), if any.
pub fn watch_state(run_db: &std::path::Path, run: i64) -> Option<serde_json::Value> {
    use rusqlite::OptionalExtension;
    let conn = rusqlite::Connection::open(run_db).ok()?;
    let state: Option<String> = conn
        .query_row(
            "SELECT state FROM watch_state WHERE run_id = ?1",
            [run],
            |r| r.get(0),
        )
        .optional()
        .ok()?;
    serde_json::from_str(&state?).ok()
}

/// What [`kill_and_resume`] saw: the rows the writer committed (keys 1 to
/// `committed`), the rows the killed watch's last stored state held
/// (`stored`), and the resumed watch's (exit code, stdout, stderr).
pub struct KilledAndResumed {
    pub committed: i64,
    pub stored: i64,
    pub outcome: (i32, String, String),
}

impl KilledAndResumed {
    /// Asserts that the resumed watch judged every row the writer committed
    /// once (all delivered, none the log never committed, none twice) and
    /// decoded exactly the transactions of `table` its killed run's stored
    /// state lacked; returns the resumed run's stdout.
    pub fn assert_judged_once(&self, table: &str) -> &str {
        let (code, stdout, stderr) = &self.outcome;
        let n = self.committed;
        assert_eq!(*code, 0, "{stdout}\n{stderr}");
        assert!(
            stdout.contains(&format!(
                "writers: valid (delivered every committed row up to the highest key it \
                 delivered; {n} of {n} committed rows delivered, 0 lost, 0 not reached, \
                 0 duplicated, 0 out of commit order)"
            )),
            "{stdout}"
        );
        assert!(!stdout.contains("never committed"), "{stdout}");
        assert!(
            stdout.contains(&format!(
                "{n} rows of {table} committed in {} transactions while it watched",
                n - self.stored
            )),
            "the killed watch stored {} rows\n{stdout}",
            self.stored
        );
        stdout
    }
}

/// A watch killed and started again (issue 52, item 3), with a writer
/// committing keys 1, 2, 3... one a transaction (`commit(k)`) and
/// appending each to its own file `out` once committed (a consumer that
/// delivers every row) throughout. `args` is watch's command line on an
/// empty `run_db`, `--delivered` naming `out`; `gone()` says whether the
/// killed watch's sessions have left the server (it holds no slot, no
/// dump), a condition polled before the second start.
///
/// Watch starts, the writer starts; once run.db holds a state of at least
/// 50 rows and watch has read 50 rows past its last state (its `/metrics`),
/// watch is killed (SIGKILL, no last write) while the writer commits on;
/// 50 rows later, with nobody watching, watch starts again with the same
/// flags, reads 50 rows more and is stopped (Ctrl-C) after the writer.
pub fn kill_and_resume(
    args: &[String],
    run_db: &std::path::Path,
    out: &std::path::Path,
    commit: &(dyn Fn(i64) + Sync),
    gone: &dyn Fn() -> bool,
) -> KilledAndResumed {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    use std::time::Duration;
    let limit = Duration::from_secs(120);
    let with_metrics = |addr: &str| -> Vec<String> {
        let mut all = args.to_vec();
        all.extend(["--metrics".to_string(), addr.to_string()]);
        all
    };
    let (stop, written) = (AtomicBool::new(false), AtomicI64::new(0));
    let written_past = |n: i64| {
        poll(limit, || {
            (written.load(Ordering::SeqCst) >= n).then_some(())
        })
        .expect("the writer commits")
    };
    std::thread::scope(|scope| {
        let first_addr = format!("127.0.0.1:{}", free_port());
        let first = start_watch(&strs(&with_metrics(&first_addr)));
        let writer = scope.spawn(|| {
            let mut key = 0;
            while !stop.load(Ordering::SeqCst) {
                key += 1;
                commit(key);
                append_ids(out, &[key]);
                written.store(key, Ordering::SeqCst);
                // Pacing, not synchronisation: a few hundred rows a second.
                std::thread::sleep(Duration::from_millis(2));
            }
            key
        });
        // A committed state of 50 rows or more, and 50 rows read past it.
        poll(limit, || {
            let stored = watch_state(run_db, 1)?["checker"]["committed"].as_i64()?;
            let read = metric(&first_addr, "snowleak_rows_committed_total")?;
            (stored >= 50 && read >= stored + 50).then_some(())
        })
        .expect("the first watch stores a state and reads past it");
        signal(&first.0, "-KILL");
        let (mut child, _) = first;
        child.wait().unwrap();
        // Nobody watches while 50 more rows commit.
        written_past(written.load(Ordering::SeqCst) + 50);
        poll(limit, || gone().then_some(())).expect("the killed watch's sessions end");
        let stored = watch_state(run_db, 1)
            .and_then(|s| s["checker"]["committed"].as_i64())
            .expect("the killed watch stored a state");
        let second_addr = format!("127.0.0.1:{}", free_port());
        let second = start_watch(&strs(&with_metrics(&second_addr)));
        let at_start = written.load(Ordering::SeqCst);
        poll(limit, || {
            let read = metric(&second_addr, "snowleak_rows_committed_total")?;
            (read >= at_start + 50).then_some(())
        })
        .expect("the resumed watch reads on");
        stop.store(true, Ordering::SeqCst);
        let committed = writer.join().unwrap();
        let outcome = stop_watch(second);
        KilledAndResumed {
            committed,
            stored,
            outcome,
        }
    })
}
