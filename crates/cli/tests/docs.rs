//! The guides' commands run: every line of a `sh` block in the guides
//! below is run (in a fresh folder, with a fresh store) and must succeed,
//! as must the README's `tessera` commands; and every relative link of the
//! README, ARCHITECTURE.md and the guides names a file (and a heading)
//! that exists.

use std::path::Path;
use std::process::Command;

use tempfile::TempDir;

use crate::util::store_in;

/// The guides whose commands need nothing but the built-in example.
const RUNNABLE_GUIDES: [&str; 1] = ["margins.md"];

/// The commands of the `sh` blocks of `text`, comments and blank lines
/// left out.
fn commands(text: &str) -> Vec<String> {
    let mut in_block = false;
    let mut found = Vec::new();
    for line in text.lines() {
        match line.trim() {
            "```sh" => in_block = true,
            "```" => in_block = false,
            comment if comment.starts_with('#') => {}
            command if in_block => {
                let command = command.split(" #").next().unwrap_or("").trim();
                if !command.is_empty() {
                    found.push(command.to_string());
                }
            }
            _ => {}
        }
    }
    found
}

/// Runs `tessera` with `words` in `dir` on `store`: its output.
fn run_tessera(words: &[&str], dir: &Path, store: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(words)
        .current_dir(dir)
        .env("TESSERA_STORE", store)
        .output()
        .unwrap()
}

#[test]
fn the_readmes_tessera_commands_run() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let mut ran = 0;
    for command in commands(&readme) {
        // `cargo run --release -p tessera -- ARGS` is `tessera ARGS`; the
        // other cargo commands (the tests, the install) are this build.
        let command = command.replace("cargo run --release -p tessera -- ", "tessera ");
        // A redirect's target is the user's: the command itself runs.
        let command = command.split(" > ").next().unwrap_or(&command);
        let words: Vec<&str> = command.split_whitespace().collect();
        if words[0] != "tessera" {
            assert_eq!(words[0], "cargo", "README: {command}");
            continue;
        }
        let output = run_tessera(&words[1..], dir.path(), &store);
        assert!(output.status.success(), "README: {command}: {}", String::from_utf8_lossy(&output.stderr));
        ran += 1;
    }
    assert!(ran >= 2, "the README shows the main job and the install's check");
}

/// The relative links of a Markdown `text`: `(target)` after `]`, without
/// web addresses.
fn relative_links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| text[at + 2..].split(')').next())
        .filter(|target| !target.contains("://") && !target.starts_with("mailto:"))
        .map(str::to_string)
        .collect()
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation
/// other than `-` and `_` left out.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn every_relative_link_of_the_documents_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut documents = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "md") {
            documents.push(path);
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for document in &documents {
        let text = std::fs::read_to_string(document).unwrap();
        for link in relative_links(&text) {
            let (file, heading) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() { document.clone() } else { document.parent().unwrap().join(file) };
            checked += 1;
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", document.display()));
                continue;
            }
            if !heading.is_empty() {
                let headings = std::fs::read_to_string(&target).unwrap_or_default();
                let found = headings
                    .lines()
                    .filter_map(|line| line.strip_prefix('#'))
                    .any(|line| anchor(line.trim_start_matches('#')) == heading);
                if !found {
                    broken.push(format!("{}: {link}: no heading '{heading}'", document.display()));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert_eq!(anchor("Reading a plan"), "reading-a-plan");
    assert_eq!(anchor("Margins: the promise kept"), "margins-the-promise-kept");
}

#[test]
fn every_command_of_the_guides_runs() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    for guide in RUNNABLE_GUIDES {
        let text = std::fs::read_to_string(docs.join(guide)).unwrap();
        let commands = commands(&text);
        assert!(!commands.is_empty(), "{guide} shows no command");
        let dir = TempDir::new().unwrap();
        let store = store_in(&dir);
        for command in commands {
            let words: Vec<&str> = command.split_whitespace().collect();
            assert_eq!(words[0], "tessera", "{guide}: {command}");
            let output = run_tessera(&words[1..], dir.path(), &store);
            assert!(output.status.success(), "{guide}: {command}: {}", String::from_utf8_lossy(&output.stderr));
        }
    }
}

/// The book (`docs/SUMMARY.md`, built by `mdbook build docs` in CI) has
/// every guide of `docs/` as a chapter, and no chapter that is not one.
#[test]
fn the_book_lists_every_guide() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let chapters: std::collections::BTreeSet<String> = relative_links(&summary).into_iter().collect();
    let guides: std::collections::BTreeSet<String> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && name != "SUMMARY.md")
        .collect();
    assert_eq!(chapters, guides, "docs/SUMMARY.md against the guides in docs/");
}
