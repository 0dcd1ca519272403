//! Every file a comment or a document names must be in this repository
//! (issue #12: comments cited notes that lived outside it). Scans the comments
//! of `.rs`, `.py`, `.mjs` and `.ci/run`, and all of every `.md`, for
//! path-like words (`docs/api-facts.md`, `sim/profile.rs`, `../x/y.md`) and fails
//! naming each one that resolves nowhere. External sources are cited by URL
//! or name, which this does not check.

use std::path::{Path, PathBuf};

/// Extensions that make a word a file reference when it contains a `/`.
const PATH_EXTENSIONS: &[&str] = &[
    "md", "rs", "py", "mjs", "toml", "json", "txt", "png", "svg", "yml", "sh",
];
/// Where this machine keeps what is not the repository; never a citation.
const MACHINE_PATH: &str = "/work/";
/// Names of documents the project was started from, which are not in it (one a
/// line in `outside_documents.txt`): a comment that needs their facts cites the
/// public source they came from.
fn outside_documents() -> Vec<&'static str> {
    include_str!("outside_documents.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}
/// Extensions that make a bare word (no `/`) a file reference: `api-facts.md`, `mastodon.rs`.
const BARE_EXTENSIONS: &[&str] = &["md", "rs"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_path_buf()
}

/// The repository's own files: everything but build output, git's store,
/// installed node modules and recorded runs.
fn repo_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            let skipped = name == ".git"
                || name == "node_modules"
                || (dir == root && (name == "target" || name == "data"));
            if path.is_dir() {
                if !skipped {
                    dirs.push(path);
                }
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// The text of `path` this test reads: whole `.md` files, comment lines elsewhere.
fn scanned_text(path: &Path) -> Option<String> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let is_ci_run = path.ends_with(".ci/run");
    let marker = match ext {
        "md" => return std::fs::read_to_string(path).ok(),
        "rs" | "mjs" => "//",
        "py" => "#",
        _ if is_ci_run => "#",
        _ => return None,
    };
    let text = std::fs::read_to_string(path).ok()?;
    let comments = text
        .lines()
        .map(|line| match line.find(marker) {
            Some(at) => &line[at + marker.len()..],
            None => "",
        })
        .collect::<Vec<_>>();
    Some(comments.join("\n"))
}

/// Path-like words: runs of path characters ending in a known extension.
fn referenced_paths(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_-./".contains(c);
    text.split(|c: char| !is_path_char(c))
        .map(|word| word.trim_end_matches('.'))
        .filter(|word| {
            let Some((stem, ext)) = word.rsplit_once('.') else {
                return false;
            };
            let known = if word.contains('/') {
                PATH_EXTENSIONS
            } else {
                BARE_EXTENSIONS
            };
            !stem.is_empty() && !stem.ends_with('/') && known.contains(&ext)
        })
        // `github.com/x/y.md`, `docs.rs/...`: a host, cited by URL, not a file here;
        // `8080/1.1/...`: the rest of `127.0.0.1:8080/...`. A word starting with `/`
        // is an HTTP route (`/1.1/lists/statuses.json`) unless it is an absolute
        // path of this machine, which no comment may cite.
        .filter(|word| {
            let first = word.split('/').next().unwrap_or("");
            let host = word.contains('/') && first.contains('.') && first != "." && first != "..";
            let port = !first.is_empty() && first.chars().all(|c| c.is_ascii_digit());
            let route = word.starts_with('/') && !word.starts_with(MACHINE_PATH);
            !(host || port || route)
        })
        .map(str::to_string)
        .collect()
}

/// Whether `reference`, named in `file`, is a file of the repository: relative to
/// the file's directory or any directory above it up to the root; or, unless it
/// climbs with `../`, the tail of a repository file's path (`src/id.rs`, a bare
/// `api-facts.md`). Files under `data/` are the runs that land there, not sources.
fn resolves(root: &Path, files: &[PathBuf], file: &Path, reference: &str) -> bool {
    if reference.starts_with('/') {
        return false;
    }
    if reference.starts_with("data/") {
        return true;
    }
    if !reference.starts_with("../") && !reference.starts_with("./") {
        let tail = Path::new(reference);
        if files.iter().any(|f| f.ends_with(tail)) {
            return true;
        }
    }
    let mut dir = file.parent();
    while let Some(d) = dir {
        let candidate = d.join(reference);
        if candidate.exists() && candidate.canonicalize().is_ok_and(|c| c.starts_with(root)) {
            return true;
        }
        if d == root {
            break;
        }
        dir = d.parent();
    }
    false
}

#[test]
fn every_file_a_comment_or_document_names_is_in_the_repository() {
    let root = repo_root().canonicalize().unwrap();
    let files = repo_files(&root);
    let this = Path::new(file!()).file_name().unwrap();
    let mut dangling = Vec::new();
    for file in &files {
        if file.file_name() == Some(this) {
            continue;
        }
        let Some(text) = scanned_text(file) else {
            continue;
        };
        let lower = text.to_lowercase();
        for phrase in outside_documents() {
            if lower.contains(phrase) {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                dangling.push(format!("{}: \"{phrase}\"", shown.display()));
            }
        }
        for reference in referenced_paths(&text) {
            if !resolves(&root, &files, file, &reference) {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                dangling.push(format!("{}: {reference}", shown.display()));
            }
        }
    }
    assert!(
        dangling.is_empty(),
        "references to files not in the repository (cite the public source, or a file here):\n{}",
        dangling.join("\n")
    );
}

#[test]
fn the_scan_finds_paths_and_leaves_hosts_alone() {
    let text = "see docs/api-facts.md [api-facts.md 1.2], `../notes/x.md`, sim/profile.rs. \
                Not github.com/tesaguri/leaky-snowflake/README.md nor since_id::policy.";
    assert_eq!(
        referenced_paths(text),
        [
            "docs/api-facts.md",
            "api-facts.md",
            "../notes/x.md",
            "sim/profile.rs"
        ]
    );
    let root = repo_root().canonicalize().unwrap();
    let files = repo_files(&root);
    let here = root.join("experiment/sim/src/server/mod.rs");
    assert!(resolves(&root, &files, &here, "docs/api-facts.md"));
    assert!(resolves(&root, &files, &here, "mastodon.rs"));
    assert!(!resolves(&root, &files, &here, "../not-in-this-repo.md"));
    assert!(!resolves(&root, &files, &here, "docs/no-such-file.md"));
    assert_eq!(outside_documents().len(), 3, "the phrases file is read");
    assert!(resolves(&root, &files, &here, "src/id.rs"));
    assert!(!resolves(&root, &files, &here, "/work/elsewhere/notes.md"));
    assert_eq!(
        referenced_paths(
            "GET /1.1/lists/statuses.json on 127.0.0.1:8080/x/y.json; /work/elsewhere/a.md"
        ),
        ["/work/elsewhere/a.md"]
    );
}
