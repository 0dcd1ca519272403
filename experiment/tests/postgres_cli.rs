//! Bad input for PostgreSQL targets: one line on stderr, exit status 2.

use std::process::Command;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("snowleak-pgcli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn experiment_bin(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_experiment"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn xmin_elsewhere_is_refused_in_one_line() {
    let dir = temp_dir("xmin-elsewhere");
    let db = dir.join("run.db");
    for target in ["simulator", "mastodon:https://example.invalid"] {
        let (code, err) = experiment_bin(&[
            "--target",
            target,
            "--poller",
            "xmin",
            "--db",
            db.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: the xmin policy reads PostgreSQL's"),
            "{err}"
        );
    }
    assert!(!db.exists(), "nothing was recorded");
}
