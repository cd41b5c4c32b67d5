//! `tessera profiles …`: the profiles in the store (import, list, remove,
//! export), and completing and extending measured profile grids.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use tessera_core::GpuModel;

use super::{parse_gpu, ListFormat};

/// `tessera profiles …`.
#[derive(Debug, Subcommand)]
pub enum ProfilesCommand {
    /// Import profiles into the store (one transaction).
    Import {
        /// A ParvaGPU folder or a Tessera profile CSV.
        path: PathBuf,
        /// Input format. Default: `parvagpu` for a folder, `tessera` for a
        /// file.
        #[arg(long, value_enum)]
        format: Option<ProfileFormat>,
        /// GPU model the profiles were measured on (ParvaGPU folders do not
        /// say; Tessera CSVs carry a gpu_model column).
        #[arg(long, value_parser = parse_gpu)]
        gpu: Option<GpuModel>,
    },
    /// List the profiles in the store.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Remove a model's profile on one GPU model (all its points) from the
    /// store.
    Remove {
        /// The model, e.g. `bert`.
        model: String,
        /// The GPU model it was measured on.
        #[arg(long, value_parser = parse_gpu)]
        gpu: GpuModel,
    },
    /// Predict every configuration of each model's profile grid that was
    /// not measured, with an interval, from the measured points: Tessera's
    /// profile CSV with a `source` column (measured, predicted,
    /// out-of-memory) and the conservative ends `tessera plan` uses for
    /// predicted points (`throughput_low_rps`, `latency_high_ms`). A
    /// configuration is assumed to fit in memory only where a measured one
    /// needing at least as much memory fits.
    Complete {
        /// The measured profiles: a ParvaGPU folder (`0,0` rows = out of
        /// memory) or a Tessera profile CSV (earlier predictions in it are
        /// predicted again).
        #[arg(long, value_name = "DIR|FILE")]
        profiles: PathBuf,
        /// The GPU model: what a ParvaGPU folder was measured on; of a CSV,
        /// the GPU model whose profiles are completed.
        #[arg(long, value_parser = parse_gpu)]
        gpu: GpuModel,
        #[command(flatten)]
        grid: GridArgs,
        /// Write to this file (atomically) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Which configurations to measure next, per model: a spread for a
    /// model with few points, then those that may be the most efficient
    /// for some latency (what plans pick) or settle what fits in memory.
    Suggest {
        /// The measured profiles: a ParvaGPU folder or a Tessera profile CSV.
        #[arg(long, value_name = "DIR|FILE")]
        profiles: PathBuf,
        /// The GPU model (see `profiles complete`).
        #[arg(long, value_parser = parse_gpu)]
        gpu: GpuModel,
        /// Configurations to measure per model.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        budget: u64,
        #[command(flatten)]
        grid: GridArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Export profiles from the store as Tessera profile CSV.
    Export {
        /// Only this GPU model.
        #[arg(long, value_parser = parse_gpu)]
        gpu: Option<GpuModel>,
        /// Write to this file (atomically) instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

/// The profile grid: every instance size of the GPU model × these.
#[derive(Debug, Clone, Args)]
pub struct GridArgs {
    /// Batch sizes of the grid.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64,128,256", value_parser = clap::value_parser!(u32).range(1..))]
    pub batches: Vec<u32>,
    /// MPS process counts of the grid.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5", value_parser = clap::value_parser!(u32).range(1..=48))]
    pub procs: Vec<u32>,
}

/// Profile input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProfileFormat {
    /// ParvaGPU's folder of `<model>.csv` files.
    Parvagpu,
    /// Tessera's profile CSV (`native` is accepted too).
    #[value(alias = "native")]
    Tessera,
}
