//! A real-time run's running tally on stderr (experiment/src/session/real_time.rs,
//! docs/analysis.md "Following a run"): one line at the start, every 10 s and
//! at the end, of a shape a script can read; none in virtual time. Nothing
//! here depends on how long anything takes: the lines at the start and the
//! end are printed whatever the run's length.

mod common;

/// `tally ELAPSED: N requests (F failed), S statuses, late arrivals: NAME n, NAME n`,
/// its numbers (requests, failed, statuses, then per poller), or `None`.
fn parse(line: &str, pollers: &[&str]) -> Option<Vec<u64>> {
    let rest = line.strip_prefix("tally ")?;
    let (elapsed, rest) = rest.split_once(": ")?;
    if elapsed.is_empty() || elapsed.contains(' ') {
        return None;
    }
    let (requests, rest) = rest.split_once(" requests (")?;
    let (failed, rest) = rest.split_once(" failed), ")?;
    let (statuses, rest) = rest.split_once(" statuses, late arrivals: ")?;
    let mut numbers = vec![
        requests.parse().ok()?,
        failed.parse().ok()?,
        statuses.parse().ok()?,
    ];
    let per_poller: Vec<&str> = rest.split(", ").collect();
    if per_poller.len() != pollers.len() {
        return None;
    }
    for (part, name) in per_poller.iter().zip(pollers) {
        numbers.push(part.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()?);
    }
    Some(numbers)
}

#[test]
fn a_real_time_run_prints_its_tally() {
    let dir = common::temp_dir("tally");
    let db = dir.join("run.db");
    let out = common::experiment_ok(&["--duration", "2s", "--db", db.to_str().unwrap()]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    let pollers = ["naive", "compensated:k=1s"];
    let tallies: Vec<Vec<u64>> = stderr
        .lines()
        .filter(|l| l.starts_with("tally "))
        .map(|l| parse(l, &pollers).unwrap_or_else(|| panic!("a tally line's shape: {l}")))
        .collect();
    assert!(tallies.len() >= 2, "at the start and at the end: {stderr}");
    assert_eq!(tallies[0][0], 0, "no request before the pollers start");
    let last = tallies.last().unwrap();
    assert!(
        last[0] > 0,
        "the last tally counts the run's requests: {stderr}"
    );
    for pair in tallies.windows(2) {
        assert!(pair[0][0] <= pair[1][0], "requests only grow: {stderr}");
    }
}

#[test]
fn a_virtual_run_prints_none() {
    let dir = common::temp_dir("tally-virtual");
    let db = dir.join("run.db");
    let out = common::experiment_ok(&[
        "--duration",
        "1m",
        "--clock",
        "virtual",
        "--db",
        db.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.lines().any(|l| l.starts_with("tally ")), "{stderr}");
}
