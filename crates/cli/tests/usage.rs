//! The command line itself: usage errors, help, completions, and output
//! to a reader that goes away.

use std::process::{Command, Stdio};

use tempfile::TempDir;

use crate::util::{stderr, stdout, store_in, tessera, usage_error};

#[test]
fn usage_errors_print_claps_whole_message_with_status_2() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    // No command at all: the whole help, with every command.
    let output = tessera(&[], &store);
    assert_eq!(output.status.code(), Some(2));
    let help = stderr(&output);
    for needle in ["Usage: tessera [OPTIONS] <COMMAND>", "plan", "verify", "simulate", "completions"] {
        assert!(help.contains(needle), "{needle:?} not in: {help}");
    }
    // A missing argument, a bad value, a misspelt option.
    let missing = usage_error(&["deploy"], &store, &["required arguments were not provided"]);
    assert!(missing.contains("<PLAN.json>") && missing.contains("--node"), "{missing}");
    let values = usage_error(&["plan", "--demo", "--format", "yaml"], &store, &["'yaml'"]);
    assert!(values.contains("possible values: table, json"), "{values}");
    let typo = usage_error(&["plan", "--demo", "--fromat", "json"], &store, &["--fromat"]);
    assert!(typo.contains("similar argument exists: '--format'"), "{typo}");
    usage_error(&["plan", "--slo", "s.csv", "--scenario", "3"], &store, &["'--slo <FILE>' cannot be used with"]);
    usage_error(&["plan", "--demo", "--profiles", "p"], &store, &["'--demo' cannot be used with"]);
    // Help itself is no error.
    let output = tessera(&["plan", "--help"], &store);
    assert!(output.status.success() && stdout(&output).contains("--time-limit"), "{}", stderr(&output));
    // The top-level help names both simulators.
    let top = stdout(&tessera(&["--help"], &store));
    let simulate = top.split("\n  simulate ").nth(1).unwrap().split("\n  bench ").next().unwrap();
    assert!(simulate.contains("`simulate serve`") && simulate.contains("memory exceeds the GPU"), "{simulate}");
}

#[test]
fn completions_load_in_bash_and_complete_commands() {
    let dir = TempDir::new().unwrap();
    let script = dir.path().join("tessera.bash");
    let output = tessera(&["completions", "bash"], &store_in(&dir));
    assert!(output.status.success(), "{}", stderr(&output));
    std::fs::write(&script, &output.stdout).unwrap();
    let shell = format!(
        "source '{}'; COMP_WORDS=(tessera pl); COMP_CWORD=1; _tessera tessera pl tessera; echo \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let completed = Command::new("bash").args(["-c", &shell]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&completed.stdout).trim(), "plan", "{}", stderr(&completed));
    for shell in ["zsh", "fish"] {
        let output = tessera(&["completions", shell], &store_in(&dir));
        assert!(output.status.success() && stdout(&output).contains("tessera"), "{shell}");
    }
}

/// `tessera … | head -1`: a reader that closes the pipe early ends the
/// program quietly (status 0, nothing on stderr), whatever the command.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let trace = dir.path().join("trace.json");
    let generated = tessera(&["simulate", "generate", "--clients", "200", "--seed", "1"], &store);
    std::fs::write(&trace, &generated.stdout).unwrap();
    let trace = trace.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["simulate", "generate", "--clients", "3000"],
        &["simulate", "--trace", trace, "--scheduler", "fifo", "--format", "json"],
        &["plan", "--demo", "--format", "json", "--gpus-per-node", "1"],
        &["profiles", "list"],
    ];
    for args in commands {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env("TESSERA_STORE", &store)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {}", stderr(&output));
        assert_eq!(stderr(&output), "", "{args:?}");
    }
}

/// `-o -` is standard output, on every command that writes a file.
#[test]
fn a_dash_output_is_standard_output() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["plan", "--demo", "--format", "json", "-o", "-"])
        .current_dir(dir.path())
        .env("TESSERA_STORE", &store)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("{\n  \"version\": 3,"), "{}", stdout(&output));
    assert!(!dir.path().join("-").exists(), "no file named '-'");
}

/// By default what people read fits 80 columns: the plan, the simulator's
/// summary and schedule, and the recommendations (when KACE's data is
/// there); `--wide` lifts the limit.
#[test]
fn what_people_read_fits_80_columns() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let trace = dir.path().join("trace.json");
    std::fs::write(&trace, tessera(&["simulate", "generate", "--clients", "40"], &store).stdout).unwrap();
    let trace = trace.to_str().unwrap().to_string();
    let mut commands: Vec<Vec<String>> = vec![
        ["plan", "--demo"].map(String::from).to_vec(),
        ["simulate", "--trace", &trace, "--scheduler", "fifo"].map(String::from).to_vec(),
    ];
    if let Some(kace) = tessera_testkit::shared_data("kace/pairs_mps100.csv") {
        let data = kace.display().to_string();
        let target = "bert-base-cased_batch8-inf";
        commands.push(
            ["colocate", "recommend", "--data", &data, "--target", target, "--group-size", "3"]
                .map(String::from)
                .to_vec(),
        );
    }
    for args in commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = tessera(&args, &store);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let text = stdout(&output);
        let widest = text.lines().map(|line| line.chars().count()).max().unwrap_or(0);
        assert!(widest <= 80, "{args:?}: a line of {widest} characters:\n{text}");
        let wide = stdout(&tessera(&[&args[..], &["--wide"]].concat(), &store));
        assert!(wide.lines().map(|line| line.chars().count()).max().unwrap_or(0) >= widest, "{args:?}");
    }
}

/// Every command's help fits the terminal: 80 columns when there is none
/// (the tests' standard output is a pipe). The one exception is a usage
/// line (`Usage: tessera …`), which clap never wraps.
#[test]
fn every_commands_help_fits_the_terminal() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    // The commands and their subcommands, from the help itself.
    let subcommands = |path: &[&str]| -> Vec<String> {
        let mut args: Vec<&str> = path.to_vec();
        args.push("--help");
        let help = stdout(&tessera(&args, &store));
        help.split("Commands:\n")
            .nth(1)
            .map(|list| {
                list.lines()
                    .take_while(|line| !line.is_empty())
                    .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
                    .filter_map(|line| line.split_whitespace().next())
                    .filter(|name| *name != "help")
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut paths: Vec<Vec<String>> = vec![vec![]];
    for command in subcommands(&[]) {
        let nested = subcommands(&[command.as_str()]);
        paths.push(vec![command.clone()]);
        paths.extend(nested.into_iter().map(|sub| vec![command.clone(), sub]));
    }
    assert!(paths.len() > 30, "{paths:?}");
    for path in &paths {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = stdout(&tessera(&args, &store));
        let wide: Vec<&str> =
            help.lines().filter(|line| line.chars().count() > 80 && !line.starts_with("Usage: ")).collect();
        assert!(wide.is_empty(), "tessera {}: {} lines over 80 columns: {wide:#?}", path.join(" "), wide.len());
    }
}

/// `--store` and `--wide` are offered only where they do something, and
/// still accepted everywhere.
#[test]
fn store_and_wide_are_offered_only_where_they_matter() {
    let dir = TempDir::new().unwrap();
    let store = store_in(&dir);
    let help = |args: &[&str]| {
        let mut args = args.to_vec();
        args.push("--help");
        stdout(&tessera(&args, &store))
    };
    for command in [&["diff"][..], &["k8s", "export"], &["report"], &["completions"], &["simulate", "generate"]] {
        assert!(!help(command).contains("--store"), "{command:?}");
    }
    for command in [&["report"][..], &["k8s", "export"], &["serve"]] {
        assert!(!help(command).contains("--wide"), "{command:?}");
    }
    for command in [&["plan"][..], &["verify"], &["simulate", "serve"], &["profiles", "list"], &["diff"]] {
        let text = help(command);
        assert!(text.contains("--wide"), "{command:?}");
        assert!(command == ["diff"] || text.contains("--store"), "{command:?}");
    }
    let output = tessera(&["completions", "bash", "--store", "x.sqlite", "--wide"], &store);
    assert!(output.status.success(), "{}", stderr(&output));
}
