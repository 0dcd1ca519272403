//! `analyze DB --html FILE`: one self-contained page that says what the JSON
//! says, parses as XML (so as HTML), escapes what the database holds, and
//! fetches nothing.

use analysis::synth::{self, SimSpec};
use rusqlite::Connection;
use serde_json::Value;
use std::process::Command;

mod common;
use common::temp_dir;

#[test]
fn the_html_report_says_what_the_json_says_and_stands_alone() {
    let dir = temp_dir("html");
    let db = dir.join("run.db");
    let spec = SimSpec {
        ticks: 60,
        late_fraction: 0.1,
        ..SimSpec::default()
    };
    synth::simulate_to_db(&db, &spec, true).unwrap();
    // A name as hostile as a client's User-Agent can be.
    let hostile = "<script>alert('x')</script> & \"co\"";
    Connection::open(&db)
        .unwrap()
        .execute("UPDATE pollers SET name = ?1 WHERE id = 1", [hostile])
        .unwrap();
    let page = dir.join("report.html");
    let out = Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args([
            db.to_str().unwrap(),
            "--json",
            "--html",
            page.to_str().unwrap(),
        ])
        .arg("--out")
        .arg(dir.join("plots"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();

    // It parses: a strict XML parser (Python's expat) reads the whole page.
    let parsed = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); print(r.tag)",
        ])
        .arg(&page)
        .output()
        .expect("python3 runs (the CI machine has it)");
    assert!(
        parsed.status.success(),
        "the page is not well-formed: {}",
        String::from_utf8_lossy(&parsed.stderr)
    );

    // What the JSON says, the page says: every poller with its verdict, and
    // every leaked status.
    let escape = analysis::html::escape;
    for poller in json["pollers"].as_array().unwrap() {
        let name = poller["name"].as_str().unwrap();
        let verdict = poller["verdict"].as_str().unwrap();
        assert!(
            html.contains(&format!(
                "{}: <span class=\"{verdict}\">{verdict}</span>",
                escape(name)
            )),
            "{name} {verdict}"
        );
    }
    let leaks = json["leaks"].as_array().unwrap();
    assert!(!leaks.is_empty(), "the synthetic run has leaks to show");
    for leak in leaks {
        assert!(html.contains(&format!("<td>{}</td>", leak["id"].as_str().unwrap())));
    }
    assert!(html.contains(&format!("<h2>Leaks ({})</h2>", leaks.len())));
    let others = json["other_misses"].as_array().unwrap().len();
    assert!(html.contains(&format!("<h2>Other misses ({others}):")));
    // The plots are inline, the hostile name is text, nothing is fetched.
    assert!(html.matches("<svg").count() >= 2, "the plots are inline");
    assert!(!html.contains("<script"), "the poller's name was escaped");
    assert!(html.contains("&lt;script&gt;"));
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(fetch), "the page fetches something: {fetch}");
    }
}
