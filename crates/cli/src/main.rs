//! `tessera`: the command-line front end. Parsing, loading, rendering and
//! exit codes live here; every decision is made by the library crates.

mod args;
mod commands;
mod inputs;
mod progress;
mod render;
mod table;

use std::process::ExitCode;

use clap::Parser;

/// Exit status for command-line usage errors.
const USAGE_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if !error.use_stderr() => {
            // --help and --version.
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            // One line: clap's first line names the argument and the problem.
            let rendered = error.render().to_string();
            eprintln!("{}", rendered.lines().next().unwrap_or("error: invalid arguments"));
            return ExitCode::from(USAGE_ERROR);
        }
    };
    let peak_memory_report = cli.peak_memory_report.clone();
    let result = commands::run(cli);
    if let Some(path) = peak_memory_report {
        if let Err(error) = write_peak_memory(&path) {
            eprintln!("error: {error:#}");
            return ExitCode::FAILURE;
        }
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes this process's peak resident set size in KiB (`VmHWM` of
/// `/proc/self/status`, Linux only) to `path`.
fn write_peak_memory(path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let status = std::fs::read_to_string("/proc/self/status").context("cannot read /proc/self/status")?;
    let peak_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .context("/proc/self/status has no VmHWM line")?;
    std::fs::write(path, format!("{peak_kib}\n")).with_context(|| format!("cannot write {}", path.display()))
}
