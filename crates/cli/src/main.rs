//! `tessera`: the command-line front end. Parsing, loading, rendering and
//! exit codes live here; every decision is made by the library crates.

mod args;
mod commands;
mod inputs;
mod output;
mod progress;
mod render;
mod table;
mod terminal;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use output::{error_line, is_stdout_closed};

fn main() -> ExitCode {
    // Help wraps to the terminal too (COLUMNS, the terminal, else 80).
    let parsed = args::hide_unused_globals(args::Cli::command())
        .term_width(terminal::detect_width())
        .try_get_matches()
        .and_then(|matches| args::Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(error) => {
            // clap's whole message: the problem, the usage, the possible
            // values or "did you mean"; help and version on stdout with
            // status 0, usage errors on stderr with status 2.
            let _ = error.print();
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
        }
    };
    terminal::set_width_limit(if cli.wide { None } else { Some(terminal::detect_width()) });
    let peak_memory_report = cli.peak_memory_report.clone();
    let result = commands::run(cli);
    let result = match peak_memory_report {
        Some(path) => result.and_then(|()| write_peak_memory(&path)),
        None => result,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `tessera … | head -1`: the reader has all it wanted.
        Err(error) if is_stdout_closed(&error) => ExitCode::SUCCESS,
        Err(error) => {
            error_line(format_args!("error: {error:#}"));
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
