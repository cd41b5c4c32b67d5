//! One module per subcommand.

mod bench;
mod colocate;
mod deploy;
mod plan;
mod profile;
mod profiles;
mod segments;
mod simulate;
mod verify;
mod workload;

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::args::{Cli, Command};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let store = cli.store.as_deref();
    match cli.command {
        Command::Plan(args) => plan::run(&args, store),
        Command::Verify(args) => verify::run(&args, store),
        Command::Profiles(command) => profiles::run(command, store),
        Command::Colocate(command) => colocate::run(command, store),
        Command::Simulate(args) => simulate::run(args),
        Command::Bench(command) => bench::run(command),
        Command::Deploy(args) => deploy::run(args, store),
        Command::Profile(command) => profile::run(command, store),
        Command::Workload(command) => workload::run(command, store),
    }
}

/// Writes `bytes` to `output` atomically, or to stdout.
fn emit(bytes: &[u8], output: Option<&Path>) -> Result<()> {
    match output {
        Some(path) => Ok(tessera_store::write_atomic(path, bytes)?),
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(bytes).and_then(|()| stdout.flush()).context("cannot write to stdout")
        }
    }
}
