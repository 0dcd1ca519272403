//! The docs' tables made from the runs (issue 54, item 6): every block
//! marked `<!-- sweep report FILE -->` in README.md or
//! docs/*.md is, byte for byte, what `experiment sweep report` prints from
//! the committed file (docs/campaigns.md, "Tables made from the runs").
//! A campaign not yet finished is marked `<!-- sweep report FILE (partial)
//! -->`: its report lists the runs missing and exits 1, and the mark must
//! go once the file holds them all.

mod common;

use std::path::Path;

/// Each marked block of `text`: the kept file it names, whether it is
/// marked partial, and the block's text.
fn marked_blocks(text: &str) -> Vec<(String, bool, String)> {
    const MARK: &str = "<!-- sweep report ";
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix(MARK) else {
            continue;
        };
        let rest = rest.trim_end_matches("-->").trim();
        let (file, partial) = match rest.strip_suffix("(partial)") {
            Some(file) => (file.trim().to_string(), true),
            None => (rest.to_string(), false),
        };
        assert_eq!(
            lines.next(),
            Some("```"),
            "a block follows the mark of {file}"
        );
        let mut block = String::new();
        for line in lines.by_ref().take_while(|l| *l != "```") {
            block.push_str(line);
            block.push('\n');
        }
        blocks.push((file, partial, block));
    }
    blocks
}

#[test]
fn every_marked_table_is_the_reports_output_over_its_committed_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    let mut checked = 0;
    for page in &pages {
        for (file, partial, block) in marked_blocks(&std::fs::read_to_string(page).unwrap()) {
            let o = common::command(&["sweep", "report", &file])
                .current_dir(root)
                .output()
                .unwrap();
            assert_eq!(
                o.status.code(),
                Some(if partial { 1 } else { 0 }),
                "{}: sweep report {file} (marked partial: {partial}; 1 when runs are missing): {}",
                page.display(),
                String::from_utf8_lossy(&o.stderr)
            );
            assert_eq!(
                block,
                String::from_utf8(o.stdout).unwrap(),
                "{}: the table marked with {file} is not what the report prints from it",
                page.display()
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 1,
        "no marked table found: the check checked nothing"
    );
}
