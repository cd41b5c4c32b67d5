//! `tessera workload …`: registering how to run and measure workloads.

use clap::Subcommand;
use tessera_store::WorkloadTask;

use super::ListFormat;

/// `tessera workload …`.
#[derive(Debug, Subcommand)]
pub enum WorkloadCommand {
    /// Register a workload (replacing one of the same name).
    Add {
        /// The workload's name, e.g. `bert-base-cased_batch8-inf`.
        name: String,
        /// The model family, e.g. `bert-base-cased`.
        #[arg(long)]
        family: String,
        /// What the workload does.
        #[arg(long, value_enum)]
        task: WorkloadTask,
        /// The batch size.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        batch: u32,
        /// The command to run; `{batch}` is replaced by the batch size, e.g.
        /// `python serve.py --batch {batch}`.
        #[arg(long)]
        command: String,
        /// A regular expression with one capture group, the throughput in
        /// samples/s (default: the line `tessera:throughput=<samples/s>`).
        #[arg(long, value_name = "REGEX")]
        throughput_regex: Option<String>,
    },
    /// List the registered workloads.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Remove a registered workload (its measured metrics and colocations
    /// stay in the store).
    Remove {
        /// The workload's name.
        name: String,
    },
}
