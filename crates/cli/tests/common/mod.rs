//! Helpers shared by the end-to-end tests of the `tessera` binary.
// Each test file uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs the binary with `env` added to its environment.
pub fn run_with_env(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    command.args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("the tessera binary runs")
}

/// Runs the binary with `store` as its store.
pub fn tessera(args: &[&str], store: &Path) -> Output {
    run_with_env(args, &[("TESSERA_STORE", store)])
}

/// The command's standard output.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The command's standard error.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
