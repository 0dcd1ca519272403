//! `analyze DB --html FILE`: the report as one self-contained page a person
//! can share. It is drawn from the same object as `--json` (so it says what
//! the JSON says), with the plots inline as SVG: no script, no style sheet,
//! no font or image fetched from anywhere. Every text that comes from the
//! database (names, IDs, reasons, a client's User-Agent) is escaped, and the
//! page is well-formed XML, so that a strict parser reads it.
//!
//! Bounded: at most [`MAX_ROWS`] leaks and other misses are listed, with
//! how many were left out ([`Listed`]); the counts in the pollers' table are
//! complete. The object it is drawn from holds only the rows listed
//! (`json::Output::listing_at_most`), so the page of a run with a million
//! leaks is built in the memory of a thousand.

use serde_json::Value;
use std::fmt::Write;

/// The most rows a list (leaks, other misses) shows.
pub const MAX_ROWS: usize = 1000;

/// How many leaks and other misses the run has: the report object lists
/// only the first [`MAX_ROWS`].
pub struct Listed {
    pub leaks: usize,
    pub other_misses: usize,
}

/// Escapes text for HTML (and XML) element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// A JSON value as table-cell text: strings bare, null empty, arrays joined.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => escape(s),
        Value::Array(items) => items.iter().map(cell).collect::<Vec<_>>().join(", "),
        other => escape(&other.to_string()),
    }
}

/// A table of `rows` (JSON objects, the first of `total`) with `columns`
/// (key, heading), at most [`MAX_ROWS`] rows, saying how many were left out.
fn table(out: &mut String, rows: &[Value], total: usize, columns: &[(&str, &str)]) {
    out.push_str("<table>\n<tr>");
    for (_, heading) in columns {
        let _ = write!(out, "<th>{}</th>", escape(heading));
    }
    out.push_str("</tr>\n");
    for row in rows.iter().take(MAX_ROWS) {
        out.push_str("<tr>");
        for (key, _) in columns {
            let _ = write!(out, "<td>{}</td>", cell(&row[*key]));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    let shown = rows.len().min(MAX_ROWS);
    if total > shown {
        let _ = writeln!(
            out,
            "<p>{} more not listed here (`analyze --json` lists every one).</p>",
            total - shown
        );
    }
}

/// The SVG of a plot file, ready to inline: its XML declaration dropped.
pub fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(start) => &svg[start..],
        None => "",
    }
}

/// The page: `report` is the `--json` object (its lists cut as
/// [`Listed`] says), `plots` the (title, SVG text) of each plot drawn.
pub fn render(report: &Value, listed: &Listed, plots: &[(String, String)]) -> String {
    let mut out = String::new();
    head(&mut out, report);

    out.push_str("<h2>Verdicts</h2>\n<ul>\n");
    let empty = Vec::new();
    let pollers = report["pollers"].as_array().unwrap_or(&empty);
    for p in pollers {
        let verdict = p["verdict"].as_str().unwrap_or("unknown");
        let _ = writeln!(
            out,
            "<li>{}: <span class=\"{}\">{}</span> ({})</li>",
            cell(&p["name"]),
            escape(verdict),
            escape(verdict),
            cell(&p["verdict_reason"])
        );
    }
    out.push_str("</ul>\n<h2>Pollers and clients</h2>\n");
    table(
        &mut out,
        pollers,
        pollers.len(),
        &[
            ("name", "poller"),
            ("policy", "policy"),
            ("requests", "requests"),
            ("errors", "failed"),
            ("seen", "seen"),
            ("duplicates", "duplicates"),
            ("duplicates_per_new", "dup/new"),
            ("late_arrivals", "late"),
            ("missed", "missed"),
            ("leaks", "leaks"),
            ("misses_overflow", "cut off"),
            ("misses_error", "errors"),
            ("misses_unexplained", "unexplained"),
            ("expired", "expired"),
            ("verdict", "verdict"),
        ],
    );
    if let Some(k) = report["k_to_catch_all_ms"].as_i64() {
        let _ = writeln!(out, "<p>k to catch all leaks: {k} ms</p>");
    }

    let leaks = report["leaks"].as_array().unwrap_or(&empty);
    let _ = writeln!(out, "<h2>Leaks ({})</h2>", listed.leaks);
    out.push_str(
        "<p>id_skew_ms = ts(highest ID any poller had returned before the status became \
         visible) - ts(status); required_k_ms = the smallest k sure to have caught it.</p>\n",
    );
    table(
        &mut out,
        leaks,
        listed.leaks,
        &[
            ("id", "status"),
            ("id_time", "ID time"),
            ("first_seen", "first surfaced"),
            ("id_skew_ms", "id_skew_ms"),
            ("required_k_ms", "required_k_ms"),
            ("seen_by", "seen by"),
            ("missed_by", "missed by"),
        ],
    );
    let others = report["other_misses"].as_array().unwrap_or(&empty);
    let _ = writeln!(
        out,
        "<h2>Other misses ({}): errors, cut off windows, unexplained</h2>",
        listed.other_misses
    );
    table(
        &mut out,
        others,
        listed.other_misses,
        &[("id", "status"), ("poller", "poller"), ("cause", "cause")],
    );

    let expired = report["expired"].as_array().unwrap_or(&empty);
    if !expired.is_empty() {
        let _ = writeln!(
            out,
            "<h2>Expired ({}): dropped by the retention job before the poller read them</h2>",
            expired.len()
        );
        table(
            &mut out,
            expired,
            expired.len(),
            &[("id", "status"), ("poller", "poller")],
        );
    }
    ftt_section(&mut out, &report["ftt"]);

    if !plots.is_empty() {
        out.push_str("<h2>Plots</h2>\n");
    }
    for (title, svg) in plots {
        let _ = writeln!(
            out,
            "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>",
            inline_svg(svg),
            escape(title)
        );
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// The page's head, its title and the run's line and reference.
fn head(out: &mut String, report: &Value) {
    let run = &report["run"];
    let title = format!(
        "snowleak run {}: {}",
        cell(&run["id"]),
        cell(&run["target"])
    );
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n\
         <meta charset=\"utf-8\"/>\n<title>{title}</title>\n<style>\n\
         body {{ font-family: sans-serif; margin: 2em; max-width: 80em; }}\n\
         table {{ border-collapse: collapse; margin: 1em 0; }}\n\
         th, td {{ border: 1px solid #bbb; padding: 0.2em 0.5em; text-align: left; }}\n\
         .valid {{ color: #176617; font-weight: bold; }} .invalid {{ color: #b00; font-weight: bold; }}\n\
         .unknown {{ color: #8a6d00; font-weight: bold; }} svg {{ max-width: 100%; height: auto; }}\n\
         </style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    let _ = writeln!(
        out,
        "<p>profile {}, seed {}, clock {}, layout {}; {} to {}; {}</p>",
        cell(&run["profile"]),
        cell(&run["seed"]),
        cell(&run["clock"]),
        cell(&run["layout"]),
        cell(&run["started_at"]),
        cell(&run["ended_at"]),
        if run["complete"].as_bool() == Some(true) {
            "complete".to_string()
        } else {
            "INCOMPLETE".to_string()
        }
    );
    let _ = writeln!(
        out,
        "<p>reference: {} (README, \"Definitions\", says what every word here means)</p>",
        cell(&report["reference"])
    );
}

/// A misskey-ftt run's lost notes by fate (the JSON's `ftt`): per poller,
/// its counts and each lost note; nothing for other runs.
fn ftt_section(out: &mut String, ftt: &Value) {
    let Some(pollers) = ftt["pollers"].as_array() else {
        return;
    };
    out.push_str(
        "<h2>FTT: what became of the notes each poller lost</h2>\n<p>By the run's \
         ftt_pushes, ftt_trims and ftt_deletes (docs/misskey-ftt.md): leak (the cursor \
         passed it), trimmed (an LTRIM cut it from a polled list), never-pushed (no LPUSH \
         into a polled list returned), in-lists (pushed and never cut), gone (deleted \
         before the poller could see it; not owed).</p>\n",
    );
    for p in pollers {
        // In the text report's order, not the JSON object's.
        let line: Vec<String> = crate::ftt::Fate::ALL
            .iter()
            .map(|f| format!("{} {}", f.as_str(), cell(&p["counts"][f.as_str()])))
            .collect();
        let _ = writeln!(
            out,
            "<h3>{}</h3>\n<p>{}</p>",
            cell(&p["name"]),
            line.join(", ")
        );
        let lost = p["lost"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if !lost.is_empty() {
            // The request as one cell: "cycle C page P, sent T".
            let rows: Vec<Value> = lost
                .iter()
                .map(|l| {
                    let r = &l["first_owed_by"];
                    let request = if r.is_null() {
                        Value::Null
                    } else {
                        Value::String(format!(
                            "cycle {} page {}, sent {}",
                            r["cycle"],
                            r["page"],
                            r["sent_at"].as_str().unwrap_or("?")
                        ))
                    };
                    serde_json::json!({"id": l["id"], "fate": l["fate"], "request": request})
                })
                .collect();
            table(
                out,
                &rows,
                rows.len(),
                &[
                    ("id", "note"),
                    ("fate", "fate"),
                    ("request", "first request that owed it"),
                ],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_escaped() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(
            escape("a\u{0}b\u{1b}c"),
            "abc",
            "control characters are dropped"
        );
    }

    #[test]
    fn long_lists_are_cut_and_say_so() {
        let rows: Vec<Value> = (0..MAX_ROWS + 5)
            .map(|n| serde_json::json!({"id": n.to_string(), "poller": "p", "cause": "error"}))
            .collect();
        let mut out = String::new();
        table(&mut out, &rows, rows.len(), &[("id", "status")]);
        assert_eq!(
            out.matches("<tr>").count(),
            MAX_ROWS + 1,
            "the heading and MAX_ROWS rows"
        );
        assert!(out.contains("5 more not listed here"));
        // Rows already cut to MAX_ROWS, of a run with more.
        let mut out = String::new();
        table(&mut out, &rows[..MAX_ROWS], 963_231, &[("id", "status")]);
        assert_eq!(out.matches("<tr>").count(), MAX_ROWS + 1);
        assert!(out.contains("962231 more not listed here"), "{out}");
    }

    #[test]
    fn an_svg_is_inlined_without_its_xml_declaration() {
        let svg = "<?xml version=\"1.0\"?>\n<svg width=\"1\"></svg>";
        assert_eq!(inline_svg(svg), "<svg width=\"1\"></svg>");
    }
}
