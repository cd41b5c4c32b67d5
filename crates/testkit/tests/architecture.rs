//! ARCHITECTURE.md is kept true: its "Dependencies" list is checked
//! against every crate's `Cargo.toml` (the Tessera crates it depends on)
//! and `clippy.toml` (pure crates have none of their own: the workspace's
//! refuses them I/O; edge crates have one that lifts it), and it must name
//! every crate of the workspace; the edges its "Never" list forbids must
//! not exist even through other crates; and no crate's files import one
//! another in a cycle — as rust-analyzer checks its own architecture
//! invariants.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What the document claims of one crate.
#[derive(Debug, PartialEq, Eq)]
struct Claim {
    pure: bool,
    depends_on: BTreeSet<String>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of the "Dependencies" section: `` - `name` (pure|edge): on `a`, `b`. ``
/// or `` - `name` (pure|edge): on nothing. ``; text in parentheses after
/// the colon is commentary.
fn claims(document: &str) -> BTreeMap<String, Claim> {
    let section = document.split("\n## Dependencies\n").nth(1).expect("ARCHITECTURE.md has a Dependencies section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let section = section.split("\n### ").next().unwrap_or(section);
    let mut claims = BTreeMap::new();
    for line in section.lines().filter(|line| line.starts_with("- `")) {
        let (name, rest) = line[3..].split_once("` (").unwrap_or_else(|| panic!("unreadable line: {line}"));
        let (kind, rest) = rest.split_once("): ").unwrap_or_else(|| panic!("unreadable line: {line}"));
        let pure = match kind {
            "pure" => true,
            "edge" => false,
            other => panic!("{name}: '{other}' is neither pure nor edge"),
        };
        let on = rest.strip_prefix("on ").unwrap_or_else(|| panic!("{name}: expected 'on …', got '{rest}'"));
        let names = without_parentheses(on);
        let depends_on = if names.starts_with("nothing") {
            BTreeSet::new()
        } else {
            names.split('`').skip(1).step_by(2).map(str::to_string).collect()
        };
        assert!(claims.insert(name.to_string(), Claim { pure, depends_on }).is_none(), "{name} is listed twice");
    }
    claims
}

/// `text` without its parenthesized parts.
fn without_parentheses(text: &str) -> String {
    let mut depth = 0usize;
    text.chars()
        .filter(|&c| {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

/// The Tessera crates `manifest` depends on (its `[dependencies]` table
/// only: test and build tools are not architecture).
fn tessera_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut in_dependencies = false;
    let mut found = BTreeSet::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies {
            if let Some(name) = line.strip_prefix("tessera-") {
                let end = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).unwrap_or(name.len());
                found.insert(name[..end].to_string());
            }
        }
    }
    found
}

/// The workspace's crates: folder name → (manifest, own clippy.toml?).
fn crates() -> BTreeMap<String, (String, bool)> {
    let workspace = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members = workspace.split("members = [").nth(1).unwrap().split(']').next().unwrap();
    members
        .split('"')
        .skip(1)
        .step_by(2)
        .map(|member| {
            let dir = root().join(member);
            let name = member.trim_start_matches("crates/").to_string();
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            (name, (manifest, dir.join("clippy.toml").is_file()))
        })
        .collect()
}

#[test]
fn the_dependency_list_matches_every_crates_manifest_and_clippy_toml() {
    let document = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let claims = claims(&document);
    let crates = crates();
    let listed: BTreeSet<&String> = claims.keys().collect();
    let members: BTreeSet<&String> = crates.keys().collect();
    assert_eq!(listed, members, "ARCHITECTURE.md's Dependencies list and the workspace's members differ");
    let mut wrong = Vec::new();
    for (name, (manifest, own_clippy)) in &crates {
        let claim = &claims[name];
        let actual = tessera_dependencies(manifest);
        if actual != claim.depends_on {
            wrong.push(format!("{name}: the document says on {:?}, Cargo.toml has {actual:?}", claim.depends_on));
        }
        if claim.pure == *own_clippy {
            wrong.push(format!(
                "{name}: the document calls it {}, but it {} a clippy.toml of its own",
                if claim.pure { "pure" } else { "an edge" },
                if *own_clippy { "has" } else { "lacks" }
            ));
        }
    }
    assert!(wrong.is_empty(), "ARCHITECTURE.md is out of date:\n{}", wrong.join("\n"));
}

#[test]
fn the_graph_runs_one_way() {
    let claims = claims(&std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap());
    // A pure crate depends on pure crates only.
    for (name, claim) in claims.iter().filter(|(_, claim)| claim.pure) {
        for dependency in &claim.depends_on {
            assert!(claims[dependency].pure, "pure {name} depends on the edge crate {dependency}");
        }
    }
    // No cycle: every crate can be ordered after its dependencies.
    let mut placed: BTreeSet<&str> = BTreeSet::new();
    while placed.len() < claims.len() {
        let ready: Vec<&str> = claims
            .iter()
            .filter(|(name, claim)| {
                !placed.contains(name.as_str()) && claim.depends_on.iter().all(|d| placed.contains(d.as_str()))
            })
            .map(|(name, _)| name.as_str())
            .collect();
        let left: Vec<&String> = claims.keys().filter(|name| !placed.contains(name.as_str())).collect();
        assert!(!ready.is_empty(), "a cycle among {left:?}");
        placed.extend(ready);
    }
}

/// The "Never" section's lines: `` - `a` never depends on `b`, `c`. ``
/// (text before the first name after "on" is commentary).
fn never_edges(document: &str) -> BTreeMap<String, BTreeSet<String>> {
    let section = document.split("\n### Never\n").nth(1).expect("ARCHITECTURE.md has a Never section");
    let section = section.split("\n#").next().unwrap_or(section);
    let mut never: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in section.lines().filter(|line| line.starts_with("- `")) {
        let (name, rest) = line[3..].split_once("` never depends on ").unwrap_or_else(|| panic!("unreadable: {line}"));
        let forbidden: BTreeSet<String> = rest.split('`').skip(1).step_by(2).map(str::to_string).collect();
        assert!(!forbidden.is_empty(), "{line}: names no crate");
        never.entry(name.to_string()).or_default().extend(forbidden);
    }
    never
}

/// Every crate `name` reaches through `depends_on`, itself excluded.
fn reachable(name: &str, depends_on: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<&str> = vec![name];
    while let Some(next) = stack.pop() {
        for dependency in depends_on.get(next).into_iter().flatten() {
            if seen.insert(dependency.clone()) {
                stack.push(dependency);
            }
        }
    }
    seen
}

#[test]
fn no_edge_the_document_forbids_exists_even_through_other_crates() {
    let never = never_edges(&std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap());
    let crates = crates();
    let depends_on: BTreeMap<String, BTreeSet<String>> =
        crates.iter().map(|(name, (manifest, _))| (name.clone(), tessera_dependencies(manifest))).collect();
    let mut broken = Vec::new();
    for (name, forbidden) in &never {
        assert!(crates.contains_key(name), "the Never list names '{name}', not a crate of the workspace");
        let reached = reachable(name, &depends_on);
        for crate_name in forbidden {
            assert!(crates.contains_key(crate_name), "'{name}' never depends on '{crate_name}', not a crate");
            if reached.contains(crate_name) {
                broken.push(format!("{name} depends on {crate_name}"));
            }
        }
    }
    assert!(broken.is_empty(), "edges ARCHITECTURE.md forbids:\n{}", broken.join("\n"));
}

/// A source file's module path inside its crate: `src/lib.rs` is `[]`,
/// `src/a.rs` and `src/a/mod.rs` are `[a]`, `src/a/b.rs` is `[a, b]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Every `.rs` file under `dir`.
fn source_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(source_files(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files
}

/// A file's code without its tests (everything from its first
/// `#[cfg(test)]`) and without line comments.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or(text);
    text.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The paths a `use` tree or a path expression names, from just after
/// `crate::`, `super::` or `self::` in `code` at `at`: `a::b::{c, d::e}`
/// gives `[a, b, c]` and `[a, b, d, e]`.
fn paths_at(code: &str, at: usize) -> Vec<Vec<String>> {
    fn tree(chars: &[char], mut at: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
        let skip_spaces = |at: &mut usize| {
            while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
                *at += 1;
            }
        };
        let mut path = prefix;
        loop {
            skip_spaces(&mut at);
            if chars.get(at) == Some(&'{') {
                at += 1;
                loop {
                    at = tree(chars, at, path.clone(), out);
                    skip_spaces(&mut at);
                    match chars.get(at) {
                        Some(',') => at += 1,
                        Some('}') => return at + 1,
                        _ => return at,
                    }
                    skip_spaces(&mut at);
                    if chars.get(at) == Some(&'}') {
                        return at + 1;
                    }
                }
            }
            let start = at;
            while chars.get(at).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
                at += 1;
            }
            if at == start {
                out.push(path);
                return at;
            }
            path.push(chars[start..at].iter().collect());
            skip_spaces(&mut at);
            if chars.get(at) == Some(&':') && chars.get(at + 1) == Some(&':') {
                at += 2;
            } else {
                out.push(path);
                return at;
            }
        }
    }
    let chars: Vec<char> = code[at..].chars().collect();
    let mut out = Vec::new();
    tree(&chars, 0, Vec::new(), &mut out);
    out
}

/// The crate's files as a graph: each file's module path and the module
/// paths of the files its code names through `crate::`, `super::` and
/// `self::` (the deepest file each path names; itself left out).
fn file_graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files: BTreeMap<Vec<String>, PathBuf> =
        source_files(src).into_iter().map(|file| (module_path(src, &file), file)).collect();
    let mut graph = BTreeMap::new();
    for (module, file) in &files {
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let mut uses = BTreeSet::new();
        for (at, keyword) in code.match_indices("::").filter_map(|(at, _)| {
            let before = &code[..at];
            ["crate", "super", "self"]
                .into_iter()
                .find(|keyword| {
                    before.ends_with(keyword)
                        && !before[..before.len() - keyword.len()]
                            .ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
                })
                .map(|keyword| (at + 2, keyword))
        }) {
            let base: Vec<String> = match keyword {
                "crate" => Vec::new(),
                "super" => module[..module.len().saturating_sub(1)].to_vec(),
                _ => module.clone(),
            };
            for path in paths_at(&code, at) {
                let mut full = base.clone();
                for part in path {
                    if part == "super" {
                        full.pop();
                    } else {
                        full.push(part);
                    }
                }
                let target = (0..=full.len()).rev().map(|len| &full[..len]).find(|prefix| files.contains_key(*prefix));
                if let Some(target) = target.filter(|target| *target != module.as_slice()) {
                    uses.insert(target.to_vec());
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// The files of `graph` that lie on a cycle, as their module paths.
fn on_cycles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> BTreeSet<Vec<String>> {
    // A file is on a cycle when it reaches itself.
    graph
        .keys()
        .filter(|start| {
            let mut seen: BTreeSet<&Vec<String>> = BTreeSet::new();
            let mut stack: Vec<&Vec<String>> = graph[*start].iter().collect();
            while let Some(next) = stack.pop() {
                if next == *start {
                    return true;
                }
                if seen.insert(next) {
                    stack.extend(graph.get(next).into_iter().flatten());
                }
            }
            false
        })
        .cloned()
        .collect()
}

#[test]
fn no_crate_has_files_that_import_one_another_in_a_cycle() {
    let mut cycles = Vec::new();
    for name in crates().keys() {
        let src = root().join("crates").join(name).join("src");
        let on = on_cycles(&file_graph(&src));
        if !on.is_empty() {
            let names: Vec<String> = on.iter().map(|module| module.join("::")).collect();
            cycles.push(format!("{name}: {}", names.join(", ")));
        }
    }
    assert!(cycles.is_empty(), "files on an import cycle:\n{}", cycles.join("\n"));
}

/// The most lines a source file may have before its tests: a file longer
/// than this holds more than one job.
const MAX_LINES_BEFORE_TESTS: usize = 700;

/// The lines of `text` before its first `#[cfg(test)]` (all of them when
/// it has none).
fn lines_before_tests(text: &str) -> usize {
    text.lines().take_while(|line| line.trim() != "#[cfg(test)]").count()
}

#[test]
fn no_source_file_runs_past_its_length_before_its_tests() {
    let mut long = Vec::new();
    for name in crates().keys() {
        for file in source_files(&root().join("crates").join(name).join("src")) {
            let lines = lines_before_tests(&std::fs::read_to_string(&file).unwrap());
            if lines > MAX_LINES_BEFORE_TESTS {
                long.push(format!("{} ({lines} lines)", file.strip_prefix(root()).unwrap_or(&file).display()));
            }
        }
    }
    assert!(long.is_empty(), "over {MAX_LINES_BEFORE_TESTS} lines before their tests:\n{}", long.join("\n"));
}

#[test]
fn the_parsers_read_what_they_are_given() {
    let document = "x\n## Dependencies\n\n- `a` (pure): on nothing.\n- `b` (edge): on `a` (for `f`) and `c`.\n\
                    ## Next\n- `z` (pure): on nothing.\n";
    let claims = claims(document);
    assert_eq!(claims.len(), 2);
    assert_eq!(claims["b"], Claim { pure: false, depends_on: ["a".to_string(), "c".to_string()].into() });
    let manifest = "[dependencies]\ntessera-core.workspace = true\ntessera-plan = { workspace = true }\nx = 1\n\
                    [dev-dependencies]\ntessera-testkit.workspace = true\n";
    assert_eq!(tessera_dependencies(manifest), ["core".to_string(), "plan".to_string()].into());
    let never = never_edges("x\n### Never\n\n- `a` never depends on `b`, `c`.\n- `a` never depends on `d`.\n## Next\n");
    assert_eq!(never["a"], ["b", "c", "d"].map(str::to_string).into());
    let depends_on: BTreeMap<String, BTreeSet<String>> = [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec![])]
        .map(|(name, on)| (name.to_string(), on.into_iter().map(str::to_string).collect()))
        .into();
    assert_eq!(reachable("a", &depends_on), ["b", "c"].map(str::to_string).into());
    let code = "use crate::a::{b::C, d};\nfn f() { super::e::f(); }";
    let at = code.find("crate::").unwrap() + 7;
    let paths: Vec<String> = paths_at(code, at).iter().map(|path| path.join("::")).collect();
    assert_eq!(paths, ["a::b::C", "a::d"]);
    let module = |path: &str| path.split("::").filter(|part| !part.is_empty()).map(str::to_string).collect::<Vec<_>>();
    let graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = [("a", vec!["b"]), ("b", vec!["a"]), ("c", vec!["a"])]
        .map(|(name, on)| (module(name), on.into_iter().map(module).collect()))
        .into();
    assert_eq!(on_cycles(&graph), [module("a"), module("b")].into());
    assert_eq!(lines_before_tests("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
    assert_eq!(lines_before_tests("a\nb\n"), 2);
}
