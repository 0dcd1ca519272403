//! The house's rules, read from the source (docs/layout.md): targets are
//! peers that import neither each other nor the commands; the simulator
//! imports nothing of the clients, PostgreSQL or the harness; and the
//! modules of the experiment crate import each other without a circle.
//! Test code (after a file's first `#[cfg(test)]`, and the test-only files, named `..._tests`)
//! is not part of the shape and is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The source folder of every crate of the workspace.
fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    vec![
        src(),
        root.join("core/src"),
        root.join("rundb/src"),
        root.join("sim/src"),
        root.join("../analysis/src"),
    ]
}

/// The module a file belongs to, as a node of the import graph: the
/// top-level module, and for targets the target (`targets::postgres`).
fn node_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    match parts.as_slice() {
        [top, target, ..] if top == "targets" && target != "mod" => format!("targets::{target}"),
        [top, ..] => top.clone(),
        [] => unreachable!(),
    }
}

/// The shape-bearing text of a file: everything before its tests.
fn shape_text(file: &Path) -> Option<String> {
    if file.to_string_lossy().ends_with("_tests.rs") {
        return None;
    }
    let text = std::fs::read_to_string(file).unwrap();
    let end = text.find("#[cfg(test)]").unwrap_or(text.len());
    // Comments name modules without importing them.
    let code: Vec<&str> = text[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect();
    Some(code.join("\n"))
}

/// The nodes a text imports: every `crate::NAME` (and `crate::targets::NAME`).
fn imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::X, b}`: each path of the group, read as if written alone.
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            for path in inner.split(',') {
                out.extend(imports(&format!("crate::{}", path.trim())));
            }
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name == "targets" {
            let after = &rest["targets".len()..];
            if let Some(t) = after.strip_prefix("::") {
                let target: String = t
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !target.is_empty() {
                    out.insert(format!("targets::{target}"));
                    continue;
                }
            }
        }
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// The import graph of the experiment crate's modules.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    graph_of(&src())
}

/// The import graph of the modules of the crate whose source is `src`.
fn graph_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(src) {
        let node = node_of(src, &file);
        let Some(text) = shape_text(&file) else {
            continue;
        };
        let edges = graph.entry(node.clone()).or_default();
        for to in imports(&text) {
            if to != node {
                edges.insert(to);
            }
        }
    }
    graph
}

#[test]
fn targets_import_neither_each_other_nor_the_commands() {
    let graph = graph();
    let targets: Vec<&String> = graph
        .keys()
        .filter(|n| n.starts_with("targets::"))
        .collect();
    assert!(
        targets.len() >= 3,
        "the simulator, api and postgres targets: {targets:?}"
    );
    for target in targets {
        for to in &graph[target] {
            assert!(
                !(to.starts_with("targets::") || to == "cmd" || to == "targets"),
                "{target} imports {to}: a target imports only the shared lower modules"
            );
        }
    }
}

#[test]
fn the_simulator_knows_nothing_of_clients_postgres_or_the_harness() {
    // Its own crate: it depends on the core and the run database's rows, never
    // on the harness, the checker or a database client.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("sim/Cargo.toml")).unwrap();
    let dependencies = &manifest[manifest.find("[dependencies]").unwrap()..];
    let dependencies = &dependencies[..dependencies
        .find("[dev-dependencies]")
        .unwrap_or(dependencies.len())];
    for forbidden in [
        "experiment",
        "analysis",
        "tokio-postgres",
        "reqwest",
        "rusqlite",
    ] {
        let named = dependencies
            .lines()
            .any(|l| l.split(['=', ' ']).next() == Some(forbidden));
        assert!(!named, "the simulator depends on {forbidden}");
    }
    for file in rust_files(&root.join("sim/src")) {
        let Some(text) = shape_text(&file) else {
            continue;
        };
        assert!(
            !text.contains("snowleak::") && !text.contains("tokio_postgres"),
            "{} reaches into the harness or PostgreSQL",
            file.display()
        );
    }
}

#[test]
fn the_shared_modules_import_no_target_and_no_command() {
    let graph = graph();
    for node in [
        "session", "drive", "record", "api", "servers", "sim", "clock",
    ] {
        for to in graph.get(node).into_iter().flatten() {
            assert!(
                !(to.starts_with("targets") || to == "cmd"),
                "{node} imports {to}: the shared modules lie below the targets and the commands"
            );
        }
    }
}

#[test]
fn the_modules_of_every_crate_import_each_other_without_a_circle() {
    for src in crate_sources() {
        assert_acyclic(&graph_of(&src));
    }
}

/// Panics naming the first circle of `graph`.
fn assert_acyclic(graph: &BTreeMap<String, BTreeSet<String>>) {
    // Depth-first search with colours: grey on the stack, black done.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        colour: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) {
        colour.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for to in graph.get(node).into_iter().flatten() {
            match colour.get(to.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|n| n == to).unwrap();
                    panic!("import circle: {} -> {to}", stack[from..].join(" -> "));
                }
                0 => visit(to, graph, colour, stack),
                _ => {}
            }
        }
        stack.pop();
        colour.insert(node.to_string(), 2);
    }
    let mut colour = BTreeMap::new();
    for node in graph.keys() {
        if colour.get(node.as_str()).copied().unwrap_or(0) == 0 {
            visit(node, graph, &mut colour, &mut Vec::new());
        }
    }
}

/// The names a text reaches through `super::`: `super::NAME` and each NAME
/// of `use super::{A, b::C}`.
fn super_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("super::") {
        let rest = &text[i + "super::".len()..];
        let paths: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group[..group.find('}').unwrap_or(group.len())]
                .split(',')
                .collect(),
            None => vec![rest],
        };
        for path in paths {
            let name: String = path
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn the_api_files_import_their_siblings_never_the_dispatcher() {
    // `api/mod.rs` dispatches over the API files and re-exports them: an API
    // file that took a name back from it would close a circle. What they
    // share is the leaf `common.rs`.
    let dir = src().join("api");
    let files = rust_files(&dir);
    let siblings: BTreeSet<String> = files
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "mod")
        .collect();
    for file in &files {
        if file.file_stem().is_some_and(|n| n == "mod") {
            continue;
        }
        let Some(text) = shape_text(file) else {
            continue;
        };
        for name in super_names(&text) {
            assert!(
                siblings.contains(&name),
                "{} takes {name} from api/mod.rs: shared things live in api/common.rs",
                file.display()
            );
        }
    }
}

#[test]
fn the_checker_sees_an_import_it_must_refuse() {
    let names = super_names("use super::{Api, common::Dialect};\nlet x = super::twitter::RATE;");
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["Api", "common", "twitter"]
    );
    // The rules above are only as good as `imports`: it must see these.
    let text = "use crate::targets::postgres::Cluster;\nlet x = crate::cmd::run::resolve;\nuse crate::{api::X, session};";
    let found = imports(text);
    for node in ["targets::postgres", "cmd", "api", "session"] {
        assert!(found.contains(node), "{node} in {found:?}");
    }
}
