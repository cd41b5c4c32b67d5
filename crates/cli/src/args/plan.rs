//! `tessera plan`, `tessera verify` and `tessera diff`: making a plan,
//! checking one, and comparing two.

use std::path::PathBuf;

use clap::{ArgGroup, Args, ValueEnum};
use tessera_core::GpuOffer;
use tessera_plan::{LatencyRule, PlanOptions, ReplanOptions, DEFAULT_GPU_MODEL, DEFAULT_MAX_PROCS};

use super::{InputArgs, ListFormat, TrafficArgs};

/// `tessera plan`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("replan_options").args(["max_extra_gpus", "drain", "lost"]).multiple(true).requires("from")))]
pub struct PlanArgs {
    #[command(flatten)]
    pub inputs: InputArgs,

    #[command(flatten)]
    pub options: PlanOptions,

    /// Plan onto the GPU nodes of a Kubernetes cluster (`tessera k8s
    /// inventory`): the fleet is its MIG-capable GPUs (costs from --gpu),
    /// and the plan names its nodes.
    #[arg(long, conflicts_with = "gpus_per_node")]
    pub cluster: bool,

    #[command(flatten)]
    pub kube: super::ClusterArgs,

    /// Replan from the plan that runs (JSON or CSV as `tessera plan` writes
    /// it): every SLO met within --max-extra-gpus of a fresh plan's GPUs,
    /// then the fewest GPUs whose MIG layout changes, the fewest instances
    /// created or destroyed, the fewest processes started. The latency rule
    /// and arrivals default to the plan's.
    #[arg(long, value_name = "CURRENT", conflicts_with = "cluster")]
    pub from: Option<PathBuf>,

    /// With --from: how to replan.
    #[command(flatten)]
    pub replan: ReplanOptions,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Write the plan to this file (atomically) instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Output formats of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text for people.
    Table,
    /// The whole plan as JSON (versioned; `verify` and `deploy` read it).
    Json,
    /// One row per MIG instance: node, gpu_index, gpu_model, profile,
    /// size_gpcs, start, service, model, batch, procs, throughput_rps,
    /// latency_ms, latency_rule (`verify` reads it).
    Csv,
    /// ParvaGPU's deployment map (`Num instance,Num GPU,Model,Placement,…`),
    /// for ParvaGPU's tools; it names models only, not services or GPU models.
    ParvagpuCsv,
}

/// `tessera verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The plan, told apart by its content: JSON or CSV as written by
    /// `tessera plan --format json|csv`, or ParvaGPU's deployment map (on
    /// the first `--gpu`).
    pub plan: PathBuf,

    #[command(flatten)]
    pub inputs: InputArgs,

    /// The GPU model a ParvaGPU deployment map or profile folder is on
    /// (the first named), and the models to estimate profiles for.
    #[arg(long = "gpu", value_name = "MODEL[:cost=C][,count=N]", default_values_t = [GpuOffer::plain(DEFAULT_GPU_MODEL)])]
    pub gpus: Vec<GpuOffer>,

    /// Most MPS processes a segment may have.
    #[arg(long, default_value_t = DEFAULT_MAX_PROCS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_procs: u32,

    /// Latency rule; default: the one recorded in the plan, or `percentile`
    /// (`tessera plan`'s default) for a ParvaGPU deployment map, which
    /// records none.
    #[arg(long, value_enum)]
    pub latency_rule: Option<LatencyRule>,

    /// Robustness margin to check the percentile rule's capacities with
    /// (every batch this share slower than profiled); default: the one the
    /// plan records, else 0.
    #[arg(long, value_name = "SHARE", value_parser = tessera_plan::parse_margin)]
    pub margin: Option<f64>,

    /// Output format: a line per violation, or JSON with the violations as
    /// data (the exit status is 1 on a violation either way).
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,

    /// Also simulate the plan's requests one by one (as `tessera simulate
    /// serve`) under the traffic options below, and fail when a service
    /// keeps fewer of its requests within its SLO than its percentile asks.
    #[arg(long)]
    pub simulate: bool,

    #[command(flatten)]
    pub traffic: TrafficArgs,
}

/// `tessera diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The plan that runs (JSON or CSV as `tessera plan` writes it).
    pub old: PathBuf,

    /// The plan to move to.
    pub new: PathBuf,

    /// List every GPU and service, unchanged ones too.
    #[arg(long)]
    pub all: bool,

    /// Also order the changes into steps, make before break (new instances
    /// first, GPUs that only tear down last), grouping GPUs while no service
    /// falls below its new rate, and name the services that dip.
    #[arg(long)]
    pub steps: bool,

    /// Output format: the totals and a table of what changes, or JSON with
    /// every GPU and service.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,

    /// Also draw the GPUs that change, each as it was beside as it will be
    /// (MIG tiles at their start slices, as `tessera report` draws them), as
    /// one self-contained HTML page written to FILE (`-`: standard output,
    /// instead of the table or JSON).
    #[arg(long, value_name = "FILE")]
    pub picture: Option<PathBuf>,
}
