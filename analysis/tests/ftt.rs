//! The fates of a misskey-ftt run's lost notes (`analysis::ftt`) in the
//! three outputs: the text report's line per poller, `--json`'s `ftt`
//! object and `--html`'s section carry the same fates, note by note, and
//! each agrees with our own SQL over `ftt_pushes`, `ftt_trims` and the
//! truth's deletions. The run
//! is synthetic (no Redis here: experiment/tests/misskey_ftt.rs checks a real
//! one); its FTT tables are written through the experiment's own writer.

use analysis::synth::{self, SimSpec};
use rusqlite::Connection;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

mod common;
use common::temp_dir;

/// Every fate, in the report's order.
const FATES: [&str; 5] = ["leak", "trimmed", "never-pushed", "in-lists", "gone"];

/// Our own reading of a fate: a leak is the checker's; otherwise trimmed if
/// an `ftt_trims` row cut it, never-pushed if no LPUSH of it returned, else
/// in the lists (docs/misskey-ftt.md, "What became of the lost notes").
fn fate_by_sql(conn: &Connection, id: &str) -> &'static str {
    let (trimmed, pushed): (bool, bool) = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM ftt_trims WHERE run_id = 1 AND id = ?1),
                    EXISTS (SELECT 1 FROM ftt_pushes WHERE run_id = 1 AND id = ?1
                              AND pushed_at_ms IS NOT NULL)",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    if trimmed {
        "trimmed"
    } else if !pushed {
        "never-pushed"
    } else {
        "in-lists"
    }
}

/// The notes deleted before `poller` could see them (fate `gone`): deleted,
/// never returned to it, and no request of it sent once the note was
/// readable, answered before the deletion and with the note in its window.
fn gone_by_sql(conn: &Connection, poller: &str) -> BTreeSet<String> {
    let mut st = conn.prepare(testkit::GONE_BY_SQL).unwrap();
    let ids = st.query_map([poller], |r| r.get(0)).unwrap();
    ids.map(Result::unwrap).collect()
}

/// `first_owed_by` of a lost note: the poller's request with that cycle and
/// page, sent when the note was visible (at or after `visible_at_ms`,
/// answered before any deletion), not above a back page's window, and no
/// such request of the poller sent earlier.
fn first_owed_by_agrees_with_our_sql(conn: &Connection, poller: &str, lost: &Value) {
    let id = lost["id"].as_str().unwrap();
    let owing = |extra: &str| -> Vec<(i64, i64, i64)> {
        conn.prepare(&format!(
            "SELECT r.cycle, r.page, r.sent_at_ms FROM requests r
               JOIN pollers p ON p.id = r.poller_id JOIN truth t ON t.run_id = r.run_id
              WHERE r.run_id = 1 AND p.name = ?1 AND t.id = ?2
                AND r.sent_at_ms >= t.visible_at_ms
                AND (t.deleted_at_ms IS NULL OR r.received_at_ms < t.deleted_at_ms)
                AND (r.before_key IS NULL OR r.before_key > t.id_key
                     OR (r.since_key IS NOT NULL AND r.since_key >= t.id_key)) {extra}
              ORDER BY r.sent_at_ms, r.id LIMIT 1"
        ))
        .unwrap()
        .query_map([poller, id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    let first = owing("");
    let named = &lost["first_owed_by"];
    assert!(!named.is_null(), "{poller} {id}: a lost note was owed");
    let (cycle, page, sent) = first[0];
    assert_eq!(
        (named["cycle"].as_i64(), named["page"].as_i64()),
        (Some(cycle), Some(page)),
        "{poller} {id}: the first request that owed it"
    );
    assert_eq!(
        named["sent_at"].as_str().unwrap(),
        since_id::time::rfc3339_ms(sent)
    );
}

#[test]
fn the_fates_in_the_text_json_and_html_are_the_same_and_agree_with_our_sql() {
    let dir = temp_dir("ftt-outputs");
    let db = dir.join("run.db");
    // Errors and cut back-paging give misses that are not leaks, late
    // statuses give leaks: every fate has notes.
    let spec = SimSpec {
        ticks: 60,
        late_fraction: 0.1,
        error_rate: 0.1,
        delete_fraction: 0.05,
        max_pages: 1,
        ..SimSpec::default()
    };
    synth::simulate_to_db(&db, &spec, true).unwrap();
    let conn = Connection::open(&db).unwrap();
    let ids: Vec<(String, i64)> = conn
        .prepare("SELECT id, visible_at_ms FROM truth WHERE run_id = 1 ORDER BY id_key")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // By the note's rank: pushed, pushed then trimmed, refused (a NULL
    // push), no row at all.
    let (mut pushes, mut trims) = (Vec::new(), Vec::new());
    for (n, (id, visible)) in ids.iter().enumerate() {
        let push = |at: Option<i64>| rundb::FttPushRow {
            id: id.clone(),
            list: "list:homeTimeline:0".into(),
            committed_at_ms: visible - 1,
            pushed_at_ms: at,
            path: "pipeline".into(),
        };
        match n % 4 {
            0 => pushes.push(push(Some(visible + 5))),
            1 => {
                pushes.push(push(Some(visible + 5)));
                trims.push(rundb::FttTrimRow {
                    id: id.clone(),
                    list: "list:homeTimeline:0".into(),
                    trimmed_at_ms: visible + 500,
                });
            }
            2 => pushes.push(push(None)),
            _ => {}
        }
    }
    let rows = rundb::FttRows {
        pushes,
        trims,
        deletes: Vec::new(),
    };
    rundb::write::insert_ftt(&conn, 1, &rows).unwrap();

    let page = dir.join("report.html");
    let analyze = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_analyze"))
            .arg(&db)
            .args(args)
            .arg("--out")
            .arg(dir.join("plots"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = analyze(&[]);
    let json: Value =
        serde_json::from_str(&analyze(&["--json", "--html", page.to_str().unwrap()])).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();

    // What each poller lost, by the JSON's own leaks and other misses, with
    // the fate our SQL gives it.
    let mut expected: BTreeMap<String, BTreeSet<(String, &str)>> = BTreeMap::new();
    for leak in json["leaks"].as_array().unwrap() {
        for p in leak["missed_by"].as_array().unwrap() {
            expected
                .entry(p.as_str().unwrap().into())
                .or_default()
                .insert((leak["id"].as_str().unwrap().into(), "leak"));
        }
    }
    for miss in json["other_misses"].as_array().unwrap() {
        let id = miss["id"].as_str().unwrap();
        expected
            .entry(miss["poller"].as_str().unwrap().into())
            .or_default()
            .insert((id.into(), fate_by_sql(&conn, id)));
    }
    for p in json["pollers"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        for id in gone_by_sql(&conn, name) {
            expected
                .entry(name.into())
                .or_default()
                .insert((id, "gone"));
        }
    }
    let pollers = json["ftt"]["pollers"].as_array().expect("an ftt section");
    assert_eq!(pollers.len(), json["pollers"].as_array().unwrap().len());
    let mut seen_fates = BTreeSet::new();
    for p in pollers {
        let name = p["name"].as_str().unwrap();
        let lost: BTreeSet<(String, &str)> = p["lost"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                let fate = l["fate"].as_str().unwrap();
                seen_fates.insert(fate.to_string());
                (l["id"].as_str().unwrap().to_string(), fate)
            })
            .map(|(id, fate)| {
                let fate: &str = FATES
                    .into_iter()
                    .find(|f| *f == fate)
                    .unwrap_or_else(|| panic!("an unknown fate {fate}"));
                (id, fate)
            })
            .collect();
        assert_eq!(
            lost,
            expected.remove(name).unwrap_or_default(),
            "{name}: the JSON's fates against our SQL"
        );
        for l in p["lost"].as_array().unwrap() {
            if l["fate"] == "gone" {
                assert!(
                    l["first_owed_by"].is_null(),
                    "{name}: a gone note is not owed"
                );
            } else {
                first_owed_by_agrees_with_our_sql(&conn, name, l);
            }
        }
        // The counts are the list's, and the text and the page say them.
        let counts: Vec<String> = FATES
            .iter()
            .map(|f| {
                let n = lost.iter().filter(|(_, fate)| fate == f).count();
                assert_eq!(p["counts"][f].as_u64(), Some(n as u64), "{name} {f}");
                format!("{f} {n}")
            })
            .collect();
        let line = counts.join(", ");
        if !lost.is_empty() {
            assert!(
                text.contains(&format!("  {name:<28} {line}\n")),
                "{name}: {line} in the text:\n{text}"
            );
        }
        let escape = analysis::html::escape;
        assert!(
            html.contains(&format!("<h3>{}</h3>\n<p>{line}</p>", escape(name))),
            "{name}: {line} in the page"
        );
        for (id, fate) in &lost {
            assert!(
                html.contains(&format!("<tr><td>{id}</td><td>{fate}</td><td>")),
                "{name}: {id} {fate} in the page"
            );
        }
    }
    assert!(
        expected.is_empty(),
        "pollers the JSON left out: {expected:?}"
    );
    assert_eq!(
        seen_fates,
        FATES.map(String::from).into(),
        "the run has notes of every fate"
    );
    // A run without FTT tables has no section.
    let plain = dir.join("plain.db");
    synth::simulate_to_db(&plain, &spec, true).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_analyze"))
        .arg(&plain)
        .arg("--json")
        .arg("--out")
        .arg(dir.join("plots"))
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["ftt"].is_null());
}
