//! The guides' commands run: every line of a `sh` block in the guides
//! below is run (in a fresh folder, with a fresh store) and must succeed.

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
            let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
                .args(&words[1..])
                .current_dir(dir.path())
                .env("TESSERA_STORE", &store)
                .output()
                .unwrap();
            assert!(output.status.success(), "{guide}: {command}: {}", String::from_utf8_lossy(&output.stderr));
        }
    }
}
