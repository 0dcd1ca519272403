//! `experiment id`: the documented vectors from the command line, and bad
//! input as one line with exit status 2.

mod common;

fn id(args: &[&str]) -> (Option<i32>, String, String) {
    let out = common::command(&["id"]).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn documented_vectors() {
    let (code, out, _) = id(&["decode", "175928847299117063", "--layout", "discord"]);
    assert_eq!(code, Some(0));
    assert_eq!(out, "2016-04-30T11:18:25.796Z\t1462015105796\n");
    let (_, out, _) = id(&["decode", "103206804533200177", "--layout", "mastodon"]);
    assert!(out.starts_with("2019-11-26T23:27:40.186Z"), "{out}");
    let (_, out, _) = id(&["decode", "0", "--layout", "twitter"]);
    assert!(out.starts_with("2010-11-04T01:42:54.657Z"), "{out}");
    let (_, out, _) = id(&["at", "2016-04-30T11:18:25.796Z", "--layout", "discord"]);
    assert_eq!(out, "175928847298985984\n");
    let (_, out, _) = id(&["at", "1462015105796", "--layout", "discord"]);
    assert_eq!(out, "175928847298985984\n");
}

#[test]
fn since_id_is_the_seed_formula_alone_on_the_first_line() {
    // retrieved_at (2022-12-02) before ts(latest) (2022-12-06): a client clock behind the
    // server's, so the lower bound, k below the latest ID, wins the clamp.
    let (code, out, _) = id(&[
        "since-id",
        "--layout",
        "twitter",
        "--latest-id",
        "1600000000000000000",
        "--retrieved-at",
        "1670000000000",
        "--k",
        "1s",
    ]);
    assert_eq!(code, Some(0));
    assert_eq!(out.lines().next(), Some("1599999995803598847"));
    // The article's pseudocode ("Your Timelines Are Leaky") by hand: timestamp = latest >> 22; lower = ((timestamp - 1000) << 22) - 1.
    let latest: u64 = 1_600_000_000_000_000_000;
    let lower = (((latest >> 22) - 1000) << 22) - 1;
    assert_eq!(out.trim(), lower.to_string());
    // retrieved_at just after the latest ID: since_id = min_id_at(retrieved_at - k) - 1.
    let ts = (latest >> 22) as i64 + 1_288_834_974_657;
    let (_, out, _) = id(&[
        "since-id",
        "--layout",
        "twitter",
        "--latest-id",
        &latest.to_string(),
        "--retrieved-at",
        &(ts + 300).to_string(),
        "--k",
        "1500ms",
    ]);
    let expected = (((ts + 300 - 1500 - 1_288_834_974_657) as u64) << 22) - 1;
    assert_eq!(out.trim(), expected.to_string());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, needle) in [
        (vec!["decode", "12x", "--layout", "discord"], "'12x'"),
        (
            vec!["decode", "18446744073709551616", "--layout", "twitter"],
            "out of the layout's range",
        ),
        (
            vec!["decode", "1", "--layout", "nope"],
            "unknown layout 'nope'",
        ),
        (
            vec!["at", "yesterday", "--layout", "twitter"],
            "bad time 'yesterday'",
        ),
        (
            vec![
                "since-id",
                "--layout",
                "twitter",
                "--latest-id",
                "1",
                "--retrieved-at",
                "0",
                "--k",
                "soon",
            ],
            "bad duration 'soon'",
        ),
        (
            vec!["decode", "zz", "--layout", "misskey-aidx"],
            "16 base36 characters",
        ),
    ] {
        let (code, out, err) = id(&args);
        assert_eq!(code, Some(2), "{args:?}");
        assert!(out.is_empty(), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
}
