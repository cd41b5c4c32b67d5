//! The command line: [`Cli`] (the global options and the command), the
//! hiding of global options from the help of commands that ignore them, and
//! what several commands share ([`ListFormat`], the value parsers of GPU
//! models and seconds). Each command family's arguments are a module of
//! their own, re-exported here; `tessera k8s` and `tessera agent` define
//! theirs beside their code in `commands::k8s`.

mod autopilot;
mod autopilot_run;
mod bench;
mod colocate;
mod deploy;
mod inputs;
mod k8s;
mod plan;
mod profile;
mod profiles;
mod report;
mod serve;
mod simulate;
mod store;
mod workload;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use tessera_core::GpuModel;

pub use autopilot::{AutopilotCommand, AutopilotSimulateArgs};
pub use autopilot_run::{ApplyTarget, AutopilotJournalArgs, AutopilotRunArgs, ElectionArgs};
pub use bench::BenchCommand;
pub use colocate::{ColocateCommand, ColocationSource};
pub use deploy::{DeployArgs, DeployCommand};
pub use inputs::{InputArgs, ProfileSource, SloSource};
pub use k8s::{AgentArgs, ClusterArgs, K8sCommand, ObjectArgs};
pub use plan::{DiffArgs, Format, PlanArgs, VerifyArgs};
pub use profile::ProfileCommand;
pub use profiles::{GridArgs, ProfileFormat, ProfilesCommand};
pub use report::{ReportArgs, ReportFormat};
pub use serve::ServeArgs;
pub use simulate::{
    SchedulerName, SimulateArgs, SimulateCommand, SimulateMeasuredArgs, SimulateServeArgs, TrafficArgs,
};
pub use store::StoreCommand;
pub use workload::WorkloadCommand;

/// Tessera packs deep-learning inference services onto shared NVIDIA GPUs:
/// MIG instances with MPS processes inside ("segments"), on as few GPUs as
/// possible while every service meets its request rate and latency SLO; and
/// it predicts which workloads share a GPU well under MPS.
#[derive(Debug, Parser)]
#[command(name = "tessera", version, propagate_version = true)]
pub struct Cli {
    /// The store (SQLite): profiles, workloads and colocation measurements,
    /// services, plans and the deploy journal. Default: the user's data
    /// directory.
    #[arg(long, global = true, env = "TESSERA_STORE", value_name = "PATH")]
    pub store: Option<PathBuf>,

    /// Print tables as wide as their content instead of fitting them to
    /// the terminal (`COLUMNS`, else the terminal's width, else 80).
    #[arg(long, global = true)]
    pub wide: bool,

    /// Write this process's peak resident memory (KiB) to FILE at exit
    /// (used by `tessera bench scale`).
    #[arg(long, global = true, hide = true, value_name = "FILE")]
    pub peak_memory_report: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

/// The commands that never read the store: `--store` is hidden from their
/// help (still accepted, so scripts that pass it everywhere keep working).
const IGNORE_STORE: [&str; 7] = ["diff", "bench", "report", "k8s", "agent", "completions", "simulate"];

/// The commands that print no table: `--wide` is hidden from their help.
const IGNORE_WIDE: [&str; 5] = ["report", "k8s", "agent", "completions", "serve"];

/// `cli` with `--store` and `--wide` hidden where they do nothing (see
/// [`IGNORE_STORE`]; `simulate serve` reads the store, so it keeps it).
pub fn hide_unused_globals(cli: clap::Command) -> clap::Command {
    let hidden = |global: &clap::Arg| global.clone().hide(true).env(None::<&str>);
    let store = cli.get_arguments().find(|a| a.get_id() == "store").cloned();
    let wide = cli.get_arguments().find(|a| a.get_id() == "wide").cloned();
    let (Some(store), Some(wide)) = (store, wide) else { return cli };
    let mut cli = cli;
    for name in IGNORE_STORE {
        cli = cli.mut_subcommand(name, |command| {
            let command = command.arg(hidden(&store));
            if name == "simulate" {
                // `simulate serve` reads the store: shown there.
                return command.mut_subcommand("serve", |serve| serve.arg(store.clone().global(false)));
            }
            command
        });
    }
    for name in IGNORE_WIDE {
        cli = cli.mut_subcommand(name, |command| command.arg(hidden(&wide)));
    }
    cli
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan MIG instances and MPS segments that meet every service's SLO.
    Plan(PlanArgs),
    /// Check a plan against profiles, SLOs and the MIG lattice.
    Verify(VerifyArgs),
    /// What changes from one plan to another: per GPU (unchanged, services
    /// changed, layout changed, added, removed), per service (segments
    /// kept, added, removed) and in total.
    Diff(DiffArgs),
    /// Manage the profile store: import, list, remove, export.
    #[command(subcommand)]
    Profiles(ProfilesCommand),
    /// Predict and evaluate colocations of workloads under MPS.
    #[command(subcommand)]
    Colocate(ColocateCommand),
    /// Simulate a plan's requests one by one (`simulate serve`, `simulate
    /// measured`), or workloads whose memory exceeds the GPU: schedulers,
    /// prefetching and eviction, with a lower bound.
    Simulate(SimulateArgs),
    /// Measure the planners and the colocation models: speed and quality.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Deploy a plan on this node: each GPU's MIG layout, then an MPS
    /// daemon per instance running the registered workload's processes
    /// (dry run by default: print the commands).
    Deploy(DeployArgs),
    /// Measure workloads on a GPU: kernel metrics from Nsight Compute,
    /// throughput and utilisation alone (NVML), colocated under MPS, and
    /// segment profiles in MIG instances.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Register workloads: how to run them and read their throughput.
    #[command(subcommand)]
    Workload(WorkloadCommand),
    /// The store itself: where it is, its schema and what it holds.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Serve the JSON API (profiles, services, planning jobs, plans,
    /// verify, colocation, simulation), the plan pages and Prometheus
    /// metrics over HTTP, on 127.0.0.1 unless told otherwise.
    Serve(ServeArgs),
    /// Draw a plan: one self-contained HTML page (each GPU as its MIG
    /// tiles, the service table, the optimality line), or the tiles alone
    /// as SVG.
    Report(ReportArgs),
    /// Run plans on a Kubernetes cluster: inventory, manifests, apply,
    /// status.
    #[command(subcommand)]
    K8s(K8sCommand),
    /// The node agent of a Kubernetes cluster (a DaemonSet runs it on every
    /// GPU node): applies the node's MIG layout and reports its state.
    Agent(AgentArgs),
    /// Keep a running fleet at its SLOs as traffic moves: the controller,
    /// simulated over a day of traffic or run live against Prometheus.
    #[command(subcommand)]
    Autopilot(AutopilotCommand),
    /// Print a shell completion script, e.g. `tessera completions bash >
    /// ~/.local/share/bash-completion/completions/tessera`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Output formats of listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// Aligned text.
    Table,
    /// JSON.
    Json,
}

/// A GPU model's name, e.g. `a100-80gb`.
fn parse_gpu(value: &str) -> Result<GpuModel, String> {
    value.parse().map_err(|error: tessera_core::CoreError| error.to_string())
}

/// A positive, finite number of seconds.
fn parse_seconds(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(seconds),
        _ => Err(format!("expected a positive number of seconds, got '{value}'")),
    }
}
