//! Benchmark of the whole chain at scale (issue 13): virtual runs of the
//! experiment, then `analyze` on each, with time and peak resident memory of
//! each process, and `analyze`'s time against SQLite's own scan of the run's
//! observations.
//!
//! ```text
//! cargo build --release --bins
//! cargo run --release -p analysis --example bench_scale                  # the three runs of the issue
//! cargo run --release -p analysis --example bench_scale -- --only day-3000
//! cargo run --release -p analysis --example bench_scale -- --rates 1000,2000,3000
//! ```
//!
//! Each run is a child process: its peak RSS is the kernel's count for that
//! process alone (`wait4`'s `ru_maxrss`), not this one's. The binaries are
//! taken from the directory of this example's own build (`target/release`).
//! `--rates` runs one virtual hour with the defaults (naive and k = 1 s) at each
//! rate and reports whether the harness kept up: no overflow, and the run's
//! wall time and memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// A run of the benchmark: name, duration, statuses per second.
const CASES: [(&str, &str, u32); 4] = [
    ("day-3", "24h", 3),
    ("hour-300", "1h", 300),
    ("hour-3000", "1h", 3000),
    ("day-3000", "24h", 3000),
];

/// Runs by default (the last one takes an hour and an 84 GB database: asked for by name).
const DEFAULT_CASES: usize = 3;

/// Time and peak resident memory of one child process.
struct Measured {
    secs: f64,
    max_rss_mib: f64,
    ok: bool,
}

/// Runs `cmd` to completion and measures it with `wait4`, which returns the
/// child's own resource usage (Linux counts `ru_maxrss` in KiB).
fn measure(mut cmd: Command) -> Measured {
    let start = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; both pointers are valid.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4: {}", std::io::Error::last_os_error());
    std::mem::forget(child); // reaped by wait4 above
    Measured {
        secs: start.elapsed().as_secs_f64(),
        max_rss_mib: usage.ru_maxrss as f64 / 1024.0,
        ok: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    }
}

fn bin_dir() -> PathBuf {
    let me = std::env::current_exe().expect("own path");
    // target/release/examples/bench_scale -> target/release
    me.parent()
        .and_then(Path::parent)
        .expect("target directory")
        .to_path_buf()
}

fn experiment(db: &Path, duration: &str, rate: u32, pollers: &[&str]) -> Measured {
    let mut cmd = Command::new(bin_dir().join("experiment"));
    cmd.env("RUST_LOG", "warn")
        .args(["--clock", "virtual", "--duration", duration, "--set"])
        .arg(format!("rate_per_s={rate}"))
        .arg("--db")
        .arg(db);
    for p in pollers {
        cmd.args(["--poller", p]);
    }
    measure(cmd)
}

/// SQLite's own scan of the observations, the floor under any reader of them:
/// the rows the loader reads, in the order it reads them, columns decoded.
fn sqlite_scan(db: &Path) -> (u64, f64) {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open");
    let start = Instant::now();
    let mut st = conn
        .prepare("SELECT request_id, status_id FROM observations ORDER BY rowid")
        .expect("prepare");
    let mut rows = st.query([]).expect("query");
    let (mut n, mut bytes) = (0u64, 0usize);
    while let Some(r) = rows.next().expect("row") {
        let _: i64 = r.get(0).expect("request_id");
        bytes += r
            .get_ref(1)
            .and_then(|v| Ok(v.as_bytes()?.len()))
            .expect("status_id");
        n += 1;
    }
    std::hint::black_box(bytes);
    (n, start.elapsed().as_secs_f64())
}

fn count(db: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open(db)
        .expect("open")
        .query_row(sql, [], |r| r.get(0))
        .expect("count")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let dir = PathBuf::from(value("--dir").unwrap_or_else(|| "/tmp/snowleak-scale".into()));
    std::fs::create_dir_all(&dir).expect("bench directory");
    for bin in ["experiment", "analyze"] {
        assert!(
            bin_dir().join(bin).exists(),
            "{} missing: cargo build --release --bins first",
            bin_dir().join(bin).display()
        );
    }
    if let Some(rates) = value("--rates") {
        println!(
            "| statuses/s | wall time of 1 h virtual | peak RSS | overflowed cycles | kept up |"
        );
        println!("| --- | --- | --- | --- | --- |");
        for rate in rates
            .split(',')
            .map(|r| r.trim().parse::<u32>().expect("a rate"))
        {
            let db = dir.join(format!("rate-{rate}.db"));
            let _ = std::fs::remove_file(&db);
            let run = experiment(&db, "1h", rate, &["naive", "compensated:k=1s"]);
            let overflow = count(&db, "SELECT count(*) FROM requests WHERE overflow = 1");
            let kept = run.ok && overflow == 0 && run.secs < 3600.0 && run.max_rss_mib < 256.0;
            println!(
                "| {rate} | {:.1} s | {:.0} MiB | {overflow} | {} |",
                run.secs,
                run.max_rss_mib,
                if kept { "yes" } else { "no" }
            );
            let _ = std::fs::remove_file(&db);
        }
        return;
    }
    let only: Vec<&str> = args
        .iter()
        .enumerate()
        .filter(|(i, _)| *i > 0 && args[i - 1] == "--only")
        .map(|(_, a)| a.as_str())
        .collect();
    println!(
        "| run (virtual; naive, k=1s, k=10s) | observations | experiment | analyze | SQLite scan | analyze / scan |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (i, (name, duration, rate)) in CASES.iter().enumerate() {
        let wanted = if only.is_empty() {
            i < DEFAULT_CASES
        } else {
            only.contains(name)
        };
        if !wanted {
            continue;
        }
        let db = dir.join(format!("{name}.db"));
        let _ = std::fs::remove_file(&db);
        let run = experiment(
            &db,
            duration,
            *rate,
            &["naive", "compensated:k=1s", "compensated:k=10s"],
        );
        assert!(run.ok, "{name}: the experiment failed");
        let mut cmd = Command::new(bin_dir().join("analyze"));
        cmd.arg(&db).arg("--json").arg("--out").arg(dir.join(name));
        let analyzed = measure(cmd);
        assert!(analyzed.ok, "{name}: analyze failed");
        let (observations, scan) = sqlite_scan(&db);
        println!(
            "| {duration} at {rate}/s | {observations} | {:.1} s, {:.0} MiB | {:.1} s, {:.0} MiB | {scan:.1} s | {:.1} |",
            run.secs,
            run.max_rss_mib,
            analyzed.secs,
            analyzed.max_rss_mib,
            analyzed.secs / scan
        );
        if !args.iter().any(|a| a == "--keep") {
            let _ = std::fs::remove_file(&db);
        }
    }
}
