//! `tessera`: the command-line front end. Parsing, loading, rendering and
//! exit codes live here; every decision is made by the library crates.
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! `args` (clap: conflicting options are refused by clap, usage errors print
//! clap's whole message with status 2; one module per command family, see
//! below), `inputs` (where profiles and SLOs come
//! from: `--profiles`, `--demo`, the store opened read-only), `commands/*`
//! (one module per subcommand; `profile/` holds `run`/`colocate` in
//! `alone.rs`, `kernels.rs` and `segments.rs`; `diff.rs` the plan diff and
//! the replan comparison `plan --from` prints; `serving.rs` the request-level simulation of a plan, `simulate serve`
//! and `verify --simulate`; `measured.rs` `simulate measured`, serving runs measured on a GPU beside the model; `autopilot.rs` `autopilot simulate`, and in
//! `autopilot/` the live loop `autopilot run` (`run.rs` turns the flags into
//! tessera-live's parts: a rate source, the controller, a deploy target, a
//! clock; it journals and prints each decision; `journal.rs` `autopilot
//! journal`); `bench/` the benchmarks, `slo.rs` among them),
//! `render` (a plan as a table, JSON or CSV), `table` (aligned tables fitted
//! to the terminal: cells wrap between words, tiles or path components; a
//! word too long is cut with an ellipsis; numbers never), `terminal` (the
//! width: `--wide`, `COLUMNS`, the terminal, else 80; wrapping prose and shell
//! commands, whose continuation lines still run when pasted), `output` (the
//! one way to print: `outln!`, `out!`, `emit` for whole documents with `-o
//! FILE` written atomically or `-o -`, `note` for stderr) and `progress` (a
//! spinner or bar on stderr, drawn only on a terminal, cleared when dropped).
//!
//! `args/mod.rs` holds `Cli`, the commands, the global options (and their
//! hiding from the help of commands that ignore them) and what several
//! commands share (`ListFormat`, the value parsers of GPU models and seconds);
//! each other module of `args/` holds one command family's arguments: `plan`
//! (plan, verify, diff), `inputs` (the profiles, SLOs and fleet those read),
//! `profiles`, `profile`, `workload`, `store`, `colocate`, `simulate`,
//! `bench`, `deploy`, `serve`, `report`, `autopilot` and `autopilot_run`
//! (`autopilot run` and `journal`, and the controller's options both
//! `autopilot` commands take); `k8s` and `agent` keep theirs
//! beside their code in `commands/k8s.rs`. A library enum that is a
//! command-line value derives `clap::ValueEnum` behind its crate's optional
//! `clap` feature, which only the binary turns on: plan's `Strategy` and
//! `LatencyRule`, serving's `Discipline`, sim's `Eviction`, `Retention` and
//! `Link`, colocate's `ModelKind`, `Protocol` and `Risk`, store's
//! `WorkloadTask`. None is mirrored in the binary; `SchedulerName` only names
//! sim's schedulers, because `SchedulerKind::Genetic` carries its parameters
//! (`--population`, `--generations`, `--seed`).

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
