//! One module per subcommand.

mod autopilot;
mod bench;
mod colocate;
mod deploy;
mod diff;
pub mod k8s;
mod measured;
mod plan;
mod profile;
mod profiles;
mod report;
mod serve;
mod serving;
mod simulate;
mod store;
mod verify;
mod workload;

use anyhow::Result;

use crate::args::{Cli, Command, SimulateCommand};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let store = cli.store.as_deref();
    match cli.command {
        Command::Plan(args) => plan::run(&args, store),
        Command::Verify(args) => verify::run(&args, store),
        Command::Diff(args) => diff::run(&args),
        Command::Profiles(command) => profiles::run(command, store),
        Command::Colocate(command) => colocate::run(command, store),
        Command::Simulate(args) => match args.command {
            Some(SimulateCommand::Serve(serve)) => serving::run(&serve, store),
            Some(SimulateCommand::Measured(measured)) => measured::run(&measured),
            _ => simulate::run(args),
        },
        Command::Bench(command) => bench::run(command),
        Command::Deploy(args) => deploy::run(args, store),
        Command::Profile(command) => profile::run(command, store),
        Command::Workload(command) => workload::run(command, store),
        Command::Store(command) => store::run(command, store),
        Command::Serve(args) => serve::run(&args, store),
        Command::Report(args) => report::run(&args),
        Command::K8s(command) => k8s::run(command),
        Command::Agent(args) => k8s::agent(args),
        Command::Autopilot(command) => autopilot::run(command, store),
        Command::Completions { shell } => completions(shell),
    }
}

/// Writes the completion script of `shell` to standard output.
fn completions(shell: clap_complete::Shell) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "tessera", &mut script);
    crate::output::emit(&script, None)
}
