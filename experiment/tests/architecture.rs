//! The house's rules, read from the source (docs/layout.md), file by file:
//! no file of any crate of the workspace imports itself back through a
//! circle; a target imports only its own files and the shared modules below
//! the targets, never another target or a command; the shared modules
//! import no target and no command; no command imports another; the
//! simulator imports nothing of the clients, PostgreSQL or the harness; and
//! no file but rundb's writes SQL to run.db.
//!
//! An import is a path a file writes from `crate::`, `super::` or `self::`
//! (in a `use` or in an expression), read as the file that defines the
//! item: `crate::session::Common` is the file `session/config.rs` when
//! `session.rs` re-exports it from there. A folder's index (`mod.rs`, or
//! `x.rs` beside `x/`) names its own children by bare paths, to declare and
//! re-export them: that is its table of contents, not an import. Paths into
//! other crates are not edges: cargo already refuses a circle of crates.
//! Test code (after a file's first `#[cfg(test)]`, and the test-only files,
//! `tests` and those whose names end in `_tests`) is not part of the shape and is skipped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
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

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The folder of every member of the workspace, as the root Cargo.toml
/// lists them (`experiment`, `experiment/core`, ...).
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let start = manifest.find("members = [").unwrap() + "members = [".len();
    let list = &manifest[start..start + manifest[start..].find(']').unwrap()];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The shape-bearing text of a file: everything before its tests, without
/// comments (they name modules without importing them). `None` for a
/// test-only file.
fn shape_text(name: &str, text: &str) -> Option<String> {
    if name == "tests.rs" || name.ends_with("_tests.rs") {
        return None;
    }
    let end = text.find("#[cfg(test)]").unwrap_or(text.len());
    let code: Vec<&str> = text[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect();
    Some(code.join("\n"))
}

/// A crate's source as the graph reads it: each file's path under `src/`
/// and its shape-bearing text.
fn read_crate(src: &Path) -> Vec<(String, String)> {
    rust_files(src)
        .into_iter()
        .filter_map(|file| {
            let rel = file
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&file).unwrap();
            shape_text(&name, &text).map(|t| (rel, t))
        })
        .collect()
}

/// The module a file under `src/` is: `targets/postgres/driver.rs` is
/// `targets::postgres::driver`, the folder `session`'s `mod.rs` and the file
/// beside it are `session`, `lib.rs` and `main.rs` the crate's root.
fn module_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    let last = parts.last().map(String::as_str);
    if last == Some("mod") || (parts.len() == 1 && matches!(last, Some("lib" | "main"))) {
        parts.pop();
    }
    parts
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A use tree from byte `*i` of `s` (`a::b::{c, d::{e as f}, self}`): every
/// path it names, each with its alias (`as f`). An expression's path
/// (`super::db_error(&e)`) is a tree of one path.
fn parse_tree(s: &str, i: &mut usize) -> Vec<(Vec<String>, Option<String>)> {
    let skip_ws = |i: &mut usize| {
        while s[*i..].starts_with(char::is_whitespace) {
            *i += s[*i..].chars().next().unwrap().len_utf8();
        }
    };
    let mut prefix: Vec<String> = Vec::new();
    loop {
        skip_ws(i);
        if s[*i..].starts_with('{') {
            *i += 1;
            let mut out = Vec::new();
            loop {
                for (path, alias) in parse_tree(s, i) {
                    let mut full = prefix.clone();
                    // `a::{self}` names `a`.
                    if path != ["self"] {
                        full.extend(path);
                    }
                    out.push((full, alias));
                }
                skip_ws(i);
                if s[*i..].starts_with(',') {
                    *i += 1;
                } else {
                    if s[*i..].starts_with('}') {
                        *i += 1;
                    }
                    break;
                }
            }
            return out;
        }
        if s[*i..].starts_with('*') {
            *i += 1;
            prefix.push("*".into());
            break;
        }
        let name: String = s[*i..].chars().take_while(|c| is_ident(*c)).collect();
        if name.is_empty() {
            break;
        }
        *i += name.len();
        prefix.push(name);
        skip_ws(i);
        if s[*i..].starts_with("::") {
            *i += 2;
        } else {
            break;
        }
    }
    skip_ws(i);
    let mut alias = None;
    if let Some(rest) = s[*i..].strip_prefix("as ") {
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| is_ident(*c))
            .collect();
        *i += 3 + (rest.len() - rest.trim_start().len()) + name.len();
        alias = Some(name);
    }
    if prefix.is_empty() {
        Vec::new()
    } else {
        vec![(prefix, alias)]
    }
}

/// Every path a text writes from `crate::`, `super::` or `self::`, its
/// keywords kept (`["super", "writers", "Output"]`), use trees expanded.
fn paths_in(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (start, _) in text.char_indices() {
        let rest = &text[start..];
        let begins = ["crate::", "super::", "self::"]
            .iter()
            .any(|k| rest.starts_with(k));
        let before = text[..start].chars().next_back();
        if !begins || before.is_some_and(|c| is_ident(c) || c == ':') {
            continue;
        }
        let mut i = start;
        out.extend(parse_tree(text, &mut i).into_iter().map(|(path, _)| path));
    }
    out
}

/// `path` from module `module`, as a path from the crate's root; `None` for
/// a `super` above the root or a path into another crate.
fn absolute(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut at: Vec<String> = module.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            at.clear();
            rest = &rest[1..];
        }
        Some("super" | "self") => {
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        at.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    at.extend(rest.iter().cloned());
    Some(at)
}

/// A crate read as files: which file each module is, and what each file
/// re-exports (`pub use`) under which name.
struct Crate {
    texts: BTreeMap<String, String>,
    files: BTreeMap<Vec<String>, String>,
    /// Per file, name -> the path it re-exports (`None`: from another crate).
    reexports: BTreeMap<String, BTreeMap<String, Option<Vec<String>>>>,
}

impl Crate {
    fn new(sources: &[(String, String)]) -> Crate {
        let mut files = BTreeMap::new();
        for (rel, _) in sources {
            // `lib.rs` is the root `main.rs` shares.
            let module = module_path(rel);
            if rel != "main.rs" || !files.contains_key(&module) {
                files.insert(module, rel.clone());
            }
        }
        let mut krate = Crate {
            texts: sources.iter().cloned().collect(),
            files,
            reexports: BTreeMap::new(),
        };
        for (rel, text) in sources {
            let module = module_path(rel);
            let mut map = BTreeMap::new();
            for marker in ["pub use ", "pub(crate) use "] {
                for (at, _) in text.match_indices(marker) {
                    let mut i = at + marker.len();
                    for (path, alias) in parse_tree(text, &mut i) {
                        let Some(name) = alias.or_else(|| path.last().cloned()) else {
                            continue;
                        };
                        if name == "*" {
                            continue;
                        }
                        let target = absolute(&module, &path).or_else(|| {
                            // A bare path: a child module of this file, or another crate.
                            let mut child = module.clone();
                            child.push(path[0].clone());
                            krate.files.contains_key(&child).then(|| {
                                let mut full = module.clone();
                                full.extend(path.iter().cloned());
                                full
                            })
                        });
                        map.insert(name, target);
                    }
                }
            }
            krate.reexports.insert(rel.clone(), map);
        }
        krate
    }

    /// The file that defines what `path` (from the root) names, following
    /// re-exports; `None` when it lies in another crate.
    fn resolve(&self, path: &[String], depth: u32) -> Option<String> {
        for n in (0..=path.len()).rev() {
            let Some(file) = self.files.get(&path[..n]) else {
                continue;
            };
            if let Some(name) = path.get(n).filter(|_| depth < 16)
                && let Some(target) = self.reexports[file].get(name)
            {
                let mut next = target.clone()?;
                next.extend(path[n + 1..].iter().cloned());
                return self.resolve(&next, depth + 1);
            }
            return Some(file.clone());
        }
        None
    }

    /// The import graph of the crate's files: file -> the files it imports.
    fn graph(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut graph = BTreeMap::new();
        for (rel, text) in &self.texts {
            let module = module_path(rel);
            let edges: BTreeSet<String> = paths_in(text)
                .iter()
                .filter_map(|p| absolute(&module, p))
                .filter_map(|p| self.resolve(&p, 0))
                .filter(|to| to != rel)
                .collect();
            graph.insert(rel.clone(), edges);
        }
        graph
    }
}

/// A knot of the graph: files that each reach all the others.
#[derive(Debug, PartialEq, Eq)]
struct Knot {
    /// Its files.
    files: BTreeSet<String>,
    /// One circle through its first file, in import order, that file repeated.
    circle: Vec<String>,
}

/// Every knot of `graph` (each strongly connected part of more than one
/// file), each with one of its circles.
fn knots(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Knot> {
    // Which files reach which: a file and the files it reaches that reach it
    // back form its knot. The graphs are a few hundred files: a search from
    // each is plenty.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut queue: VecDeque<&str> = VecDeque::from([from]);
        while let Some(at) = queue.pop_front() {
            for to in graph.get(at).into_iter().flatten() {
                if seen.insert(to.clone()) {
                    queue.push_back(to);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<String>> =
        graph.keys().map(|f| (f.as_str(), reach(f))).collect();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for (file, reached) in &reaches {
        if done.contains(*file) || !reached.contains(*file) {
            continue;
        }
        let knot: BTreeSet<String> = reached
            .iter()
            .filter(|f| reaches.get(f.as_str()).is_some_and(|r| r.contains(*file)))
            .cloned()
            .collect();
        // The shortest way from `file` back to itself, inside its knot.
        let mut back: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = VecDeque::from([file.to_string()]);
        'search: while let Some(at) = queue.pop_front() {
            for to in graph.get(&at).into_iter().flatten() {
                if to == file {
                    // `at` and the way back to `file`, turned round.
                    let mut circle = vec![at.clone()];
                    while let Some(prev) = back.get(circle.last().unwrap()) {
                        circle.push(prev.clone());
                    }
                    circle.reverse();
                    circle.push(file.to_string());
                    out.push(Knot {
                        files: knot.clone(),
                        circle,
                    });
                    break 'search;
                }
                if knot.contains(to) && !back.contains_key(to) && to != file {
                    back.insert(to.clone(), at.clone());
                    queue.push_back(to.clone());
                }
            }
        }
        done.extend(knot);
    }
    out
}

/// Where a file of the experiment crate stands in the house.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Role {
    /// `lib.rs`, `main.rs`.
    Root,
    /// `cmd/mod.rs`: the list of the commands.
    Commands,
    /// A file of command NAME (module `cmd::NAME` or below it).
    Command(String),
    /// `targets/mod.rs`: the list of the targets.
    Targets,
    /// A file of target NAME (module `targets::NAME` or below it).
    Target(String),
    /// A module below the targets: any other top-level module (`session`,
    /// `drive`, `record`, `api`, `servers`, `clock`, `clients`, `workload`,
    /// an options module...).
    Shared(String),
}

fn role(rel: &str) -> Role {
    let parts: Vec<&str> = rel.split('/').collect();
    let top = parts[0].trim_end_matches(".rs");
    let member = || parts.get(1).map(|p| p.trim_end_matches(".rs"));
    match top {
        "lib" | "main" if parts.len() == 1 => Role::Root,
        "cmd" => match member() {
            None | Some("mod") => Role::Commands,
            Some(name) => Role::Command(name.to_string()),
        },
        "targets" => match member() {
            None | Some("mod") => Role::Targets,
            Some(name) => Role::Target(name.to_string()),
        },
        _ => Role::Shared(top.to_string()),
    }
}

/// The experiment crate's import graph.
fn experiment_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    Crate::new(&read_crate(&src)).graph()
}

/// The experiment crate's imports, by role: (from, role, to, role).
fn experiment_imports() -> Vec<(String, Role, String, Role)> {
    let graph = experiment_graph();
    let mut out = Vec::new();
    for (from, tos) in &graph {
        for to in tos {
            out.push((from.clone(), role(from), to.clone(), role(to)));
        }
    }
    out
}

#[test]
fn no_file_of_any_crate_imports_itself_back_through_a_circle() {
    let mut found = Vec::new();
    for member in members() {
        let src = workspace_root().join(&member).join("src");
        let graph = Crate::new(&read_crate(&src)).graph();
        assert!(!graph.is_empty(), "{member}/src has no file");
        for knot in knots(&graph) {
            let path = |f: &String| format!("{member}/src/{f}");
            let circle: Vec<String> = knot.circle.iter().map(path).collect();
            let all: Vec<String> = knot.files.iter().map(path).collect();
            found.push(format!(
                "{}\n    (the knot: {})",
                circle.join(" -> "),
                all.join(", ")
            ));
        }
    }
    assert!(
        found.is_empty(),
        "import circles at file level:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn targets_import_only_their_own_files_and_the_shared_modules() {
    let targets: BTreeSet<String> = experiment_graph()
        .keys()
        .filter_map(|file| match role(file) {
            Role::Target(name) => Some(name),
            _ => None,
        })
        .collect();
    assert!(
        targets.len() >= 5,
        "simulator, api, postgres, misskey_ftt, mariadb: {targets:?}"
    );
    let wrong: Vec<String> = experiment_imports()
        .iter()
        .filter(|(_, from, _, to)| match (from, to) {
            (Role::Target(a), Role::Target(b)) => a != b,
            (Role::Target(_), Role::Shared(_)) => false,
            (Role::Target(_), _) => true,
            _ => false,
        })
        .map(|(from, _, to, _)| format!("{from} imports {to}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "a target imports only its own files and the shared modules below it:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn the_shared_modules_import_no_target_and_no_command() {
    let shared: BTreeSet<String> = experiment_graph()
        .keys()
        .filter_map(|file| match role(file) {
            Role::Shared(name) => Some(name),
            _ => None,
        })
        .collect();
    // The rule holds for any top-level module but `cmd` and `targets`; these
    // must be among them, or the reading above went wrong.
    for known in [
        "api", "clients", "clock", "drive", "logtruth", "record", "servers", "session",
    ] {
        assert!(shared.contains(known), "{known} in {shared:?}");
    }
    let wrong: Vec<String> = experiment_imports()
        .iter()
        .filter(|(_, from, _, to)| {
            matches!(from, Role::Shared(_))
                && matches!(
                    to,
                    Role::Target(_) | Role::Targets | Role::Command(_) | Role::Commands
                )
        })
        .map(|(from, _, to, _)| format!("{from} imports {to}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "the shared modules lie below the targets and the commands:\n  {}",
        wrong.join("\n  ")
    );
}

/// The databases with a folder of their own under `targets/` whose log the
/// commands read (`targets::LOGS`).
const DATABASES: [&str; 2] = ["postgres", "mariadb"];

/// What would name a target in the commands: each kind's name in its
/// `options.rs` (`name: "postgres"`, `name: "postgres:URL"`) as a string
/// literal, and each variant of the served backends (`Backend::Postgres`,
/// from `serving/mod.rs`).
fn target_names() -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names = Vec::new();
    for file in rust_files(&src.join("targets")) {
        if file.file_name().unwrap() != "options.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for rest in text.split("name: \"").skip(1) {
            names.push(format!("\"{}\"", &rest[..rest.find('"').unwrap()]));
        }
    }
    let serving = std::fs::read_to_string(src.join("serving/mod.rs")).unwrap();
    let start = serving.find("pub enum Backend {").unwrap();
    let body = &serving[start..start + serving[start..].find('}').unwrap()];
    for line in body.lines().skip(1) {
        let line = line.trim().trim_end_matches(',');
        if !line.is_empty() && !line.starts_with("//") {
            names.push(format!("Backend::{line}"));
        }
    }
    for expected in [
        "\"postgres\"",
        "\"mariadb:URL\"",
        "\"misskey-ftt\"",
        "Backend::Simulator",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    names
}

#[test]
fn a_database_is_one_folder() {
    // Issue 51: a database's target, server, log reader, judge backend and
    // watch source are its folder's; only the targets' list (`targets/mod.rs`:
    // `TARGETS`, `LOGS`) names a module of it from outside.
    let wrong: Vec<String> = experiment_imports()
        .into_iter()
        .filter(|(from, _, _, to_role)| {
            DATABASES
                .iter()
                .any(|db| *to_role == Role::Target(db.to_string()) && role(from) != *to_role)
                && role(from) != Role::Targets
        })
        .map(|(from, _, to, _)| format!("{from} -> {to}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "a database's modules are named only in its folder and targets/mod.rs:\n  {}",
        wrong.join("\n  ")
    );
    // No file outside the targets is a database's own (servers/postgres.rs
    // is the one server two targets start: postgres and misskey_ftt).
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let named: Vec<String> = read_crate(&src)
        .into_iter()
        .map(|(rel, _)| rel)
        .filter(|rel| {
            !rel.starts_with("targets/")
                && rel != "servers/postgres.rs"
                && DATABASES.iter().any(|db| rel.contains(db))
        })
        .collect();
    assert!(
        named.is_empty(),
        "files of a database outside its folder: {named:?}"
    );
    // The commands only dispatch (issue 51: "no branch on a database name
    // outside the targets' table"): no target's name as a string, nor a
    // variant of the served backends, in any command nor in the log-truth
    // modules every database shares; `targets/mod.rs` holds what each
    // target means to them (`LOGS`, `SWEEPS`, `judge_serves`).
    let names = target_names();
    let branching: Vec<String> = read_crate(&src)
        .into_iter()
        .filter(|(rel, _)| rel.starts_with("cmd/") || rel.starts_with("logtruth/"))
        .flat_map(|(rel, text)| {
            names
                .iter()
                .filter(|name| text.contains(name.as_str()))
                .map(|name| format!("{rel}: {name}"))
                .collect::<Vec<_>>()
        })
        .collect();
    // And they are thin: the skeletons are logtruth's (issue 51: "cmd/judge
    // and cmd/watch together a few hundred lines").
    let lines: usize = read_crate(&src)
        .iter()
        .filter(|(rel, _)| rel.starts_with("cmd/judge") || rel.starts_with("cmd/watch"))
        .map(|(rel, _)| {
            std::fs::read_to_string(src.join(rel))
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    assert!(lines <= 400, "cmd/judge and cmd/watch: {lines} lines");
    assert!(
        branching.is_empty(),
        "the commands and logtruth name no target (targets/mod.rs does): {branching:?}"
    );
}

#[test]
fn a_run_s_options_are_named_where_they_are_defined_and_parsed_only() {
    // Issue 32: the run's options (`RunArgs`) belong to the targets' list,
    // and the binary's root flattens them into `experiment [OPTIONS]`; any
    // other command holds what it needs of them under a name of its own.
    let src = workspace_root().join("experiment/src");
    let naming: Vec<String> = read_crate(&src)
        .into_iter()
        .filter(|(_, text)| {
            text.split(|c: char| !is_ident(c))
                .any(|word| word == "RunArgs")
        })
        .map(|(rel, _)| rel)
        .collect();
    assert_eq!(naming, ["main.rs", "targets/mod.rs"]);
}

/// Issue 51.2: rundb is the one writer of run.db (and of a planned run's
/// `sweep_run`): no file of the experiment outside the folders of the
/// database targets, whose SQL is their own server's (PostgreSQL, MariaDB,
/// Misskey's PostgreSQL), writes SQL; the recorder hands rundb rows.
#[test]
fn run_db_is_written_by_rundb_only() {
    let src = workspace_root().join("experiment/src");
    let servers = [
        "targets/postgres/",
        "targets/mariadb/",
        "targets/misskey_ftt/",
    ];
    let writes = [
        "INSERT ",
        "UPDATE ",
        "DELETE FROM",
        "CREATE TABLE",
        "ALTER TABLE",
        "DROP TABLE",
    ];
    let wrong: Vec<String> = read_crate(&src)
        .into_iter()
        .filter(|(rel, _)| !servers.iter().any(|s| rel.starts_with(s)))
        .flat_map(|(rel, text)| {
            writes
                .iter()
                .filter(|w| text.contains(*w))
                .map(|w| format!("{rel} writes SQL ({})", w.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "run.db is written through rundb (rundb::write, a side table of rundb::tables):\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn no_command_imports_another() {
    let wrong: Vec<String> = experiment_imports()
        .iter()
        .filter(
            |(_, from, _, to)| matches!((from, to), (Role::Command(a), Role::Command(b)) if a != b),
        )
        .map(|(from, _, to, _)| format!("{from} imports {to}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "what two commands share lives below them:\n  {}",
        wrong.join("\n  ")
    );
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
    for (rel, text) in read_crate(&root.join("sim/src")) {
        assert!(
            !text.contains("snowleak::") && !text.contains("tokio_postgres"),
            "sim/src/{rel} reaches into the harness or PostgreSQL"
        );
    }
}

/// Issue 52.3: watch's incremental checker is pure logic (its definition of
/// a settled row lives there once): no file, database, clock or runtime;
/// its reader of run.db is beside it (`settle/stored.rs`).
#[test]
fn the_incremental_checker_does_no_io_and_reads_no_clock() {
    let root = workspace_root().join("analysis/src");
    for file in ["settle.rs", "settle/tests.rs"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for forbidden in [
            "rusqlite",
            "rundb::read",
            "rundb::write",
            "std::fs",
            "std::io",
            "std::time",
            "Instant",
            "SystemTime",
            "now_ms()",
            "clock::",
            "tokio",
        ] {
            assert!(
                !text.contains(forbidden),
                "analysis/src/{file} names {forbidden}: the checker is pure"
            );
        }
    }
}

#[test]
fn the_api_files_import_their_siblings_never_the_dispatcher() {
    // `api/mod.rs` dispatches over the API files and re-exports them: an API
    // file that took a name back from it would close a circle. What they
    // share is the leaf `common.rs`.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources: Vec<(String, String)> = read_crate(&src)
        .into_iter()
        .filter(|(rel, _)| rel.starts_with("api/"))
        .collect();
    let siblings: BTreeSet<String> = sources
        .iter()
        .map(|(rel, _)| module_path(rel).pop().unwrap())
        .filter(|n| n != "api")
        .collect();
    for (rel, text) in &sources {
        if rel == "api/mod.rs" {
            continue;
        }
        for path in paths_in(text) {
            if path[0] == "super" {
                let name = &path[1];
                assert!(
                    siblings.contains(name),
                    "{rel} takes {name} from api/mod.rs: shared things live in api/common.rs"
                );
            }
        }
    }
}

// The reader and the circle finder on small inputs: the rules above are only
// as good as these.

fn names(paths: Vec<Vec<String>>) -> Vec<String> {
    paths.into_iter().map(|p| p.join("::")).collect()
}

#[test]
fn the_reader_sees_every_path_of_a_use_tree_and_an_expression() {
    let text = "use super::{Api, common::{Dialect, excerpt as ex}, self};\n\
                use crate::drive::{self, Plan};\n\
                let x = super::super::twitter::RATE;\n\
                let e = super::db_error(&e); pub(crate) fn f() {}\n\
                let not = my_crate::a; let t = Vec::<crate::X>::new();";
    assert_eq!(
        names(paths_in(text)),
        [
            "super::Api",
            "super::common::Dialect",
            "super::common::excerpt",
            "super",
            "crate::drive",
            "crate::drive::Plan",
            "super::super::twitter::RATE",
            "super::db_error",
            "crate::X",
        ]
    );
}

/// A synthetic crate: module `a` re-exports `X` from its child `a::inner`,
/// which imports module `b`; `b` imports `crate::a::X`, which is the child.
fn synthetic(b_imports_a: bool) -> Vec<(String, String)> {
    let b = if b_imports_a {
        "use crate::a::X;\nuse other_crate::Y;"
    } else {
        "use other_crate::Y;"
    };
    [
        ("lib.rs", "mod a;\nmod b;\npub use other_crate as o;"),
        ("a.rs", "mod inner;\npub use inner::X;"),
        ("a/inner.rs", "use super::super::b::Z;\npub struct X;"),
        ("b.rs", b),
        ("c/mod.rs", "use crate::o::thing;\nuse self::d::W;\nmod d;"),
        ("c/d.rs", "use super::super::a;\npub struct W;"),
    ]
    .iter()
    .map(|(f, t)| (f.to_string(), t.to_string()))
    .collect()
}

#[test]
fn the_graph_follows_super_self_and_reexports_to_the_defining_file() {
    let graph = Crate::new(&synthetic(true)).graph();
    let edges = |f: &str| graph[f].iter().cloned().collect::<Vec<_>>();
    assert_eq!(
        edges("lib.rs"),
        Vec::<String>::new(),
        "its children are not imports"
    );
    assert_eq!(edges("a.rs"), Vec::<String>::new());
    assert_eq!(edges("a/inner.rs"), ["b.rs"]);
    assert_eq!(edges("b.rs"), ["a/inner.rs"], "through a.rs's re-export");
    assert_eq!(edges("c/mod.rs"), ["c/d.rs"], "another crate is no edge");
    assert_eq!(edges("c/d.rs"), ["a.rs"]);
}

#[test]
fn the_circle_finder_names_each_knot_and_none_where_there_is_none() {
    let circles = |graph: &BTreeMap<String, BTreeSet<String>>| -> Vec<Vec<String>> {
        knots(graph).into_iter().map(|k| k.circle).collect()
    };
    let graph = Crate::new(&synthetic(true)).graph();
    assert_eq!(circles(&graph), [["a/inner.rs", "b.rs", "a/inner.rs"]]);
    assert!(knots(&Crate::new(&synthetic(false)).graph()).is_empty());

    // Two knots, one of three files: one circle each.
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("p", vec!["q"]),
        ("q", vec!["r", "s"]),
        ("r", vec!["p"]),
        ("s", vec!["t"]),
        ("t", vec!["s", "u"]),
        ("u", vec![]),
    ]
    .into_iter()
    .map(|(f, tos)| (f.to_string(), tos.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        circles(&graph),
        [vec!["p", "q", "r", "p"], vec!["s", "t", "s"]]
    );
    let knot: Vec<String> = knots(&graph)[0].files.iter().cloned().collect();
    assert_eq!(knot, ["p", "q", "r"]);
}
