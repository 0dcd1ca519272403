//! docs/core.md shows the crate's top doctest; this keeps the copy true (rustdoc runs the doctest itself, not the README's copy).

/// The lines of the first fenced block opening with `fence` after `heading`.
fn block_after<'a>(text: &'a str, heading: &str, fence: &str) -> Vec<&'a str> {
    let from = text.find(heading).expect("the heading is there");
    text[from..]
        .lines()
        .skip_while(|l| *l != fence)
        .skip(1)
        .take_while(|l| *l != "```")
        .collect()
}

#[test]
fn docs_core_shows_the_crate_doctest() {
    let readme = include_str!("../../../docs/core.md");
    let lib = include_str!("../src/lib.rs");
    let shown = block_after(readme, "# The core in your own poller", "```rust");
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let tested = block_after(&doc, "## The core in your own poller", "```");
    assert!(shown.len() > 10, "docs/core.md shows an example");
    assert_eq!(shown, tested);
}
