//! `tessera`: the command-line front end. Parsing, loading, rendering and
//! exit codes live here; every decision is made by the library crates.

mod args;
mod commands;
mod inputs;
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
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
