//! ARCHITECTURE.md is kept true: its "Dependencies" list is checked
//! against every crate's `Cargo.toml` (the Tessera crates it depends on)
//! and `clippy.toml` (pure crates have none of their own: the workspace's
//! refuses them I/O; edge crates have one that lifts it), and it must name
//! every crate of the workspace, as rust-analyzer checks its own
//! architecture invariants.

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
}
