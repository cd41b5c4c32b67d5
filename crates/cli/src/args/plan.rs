//! `tessera plan`, `tessera verify` and `tessera diff`: making a plan,
//! checking one, and comparing two.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use tessera_plan::{
    GpuPosition, LatencyRule, Strategy, DEFAULT_GPUS_PER_NODE, DEFAULT_MAX_GPUS, DEFAULT_TIME_LIMIT, MAX_GPUS_LIMIT,
};

use super::{parse_seconds, InputArgs, ListFormat, TrafficArgs};

/// `tessera plan`.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub inputs: InputArgs,

    /// Planning strategy.
    #[arg(long, value_enum, default_value_t = Strategy::default())]
    pub strategy: Strategy,

    /// Latency rule every segment must meet. Default: the strategy's
    /// (percentile for optimal, parva for parva); with --from, the running
    /// plan's.
    #[arg(long, value_enum)]
    pub latency_rule: Option<LatencyRule>,

    /// How requests arrive, for the percentile rule's capacities (the
    /// syntax of `simulate serve --arrivals`): `poisson` (exact, the
    /// analytic model), `cv=X`, `onoff=...` or `trace=FILE` (each
    /// configuration's capacity searched for with the request simulator).
    /// Default: poisson; with --from, the running plan's.
    #[arg(long, value_name = "MODEL")]
    pub arrivals: Option<String>,

    /// Seconds the optimal strategy may search before returning its best
    /// plan with the gap to its lower bound (more than a duration holds,
    /// e.g. 1e20, means no limit).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TIME_LIMIT.as_secs_f64(), value_parser = parse_seconds, allow_negative_numbers = true)]
    pub time_limit: f64,

    /// GPUs per node, for numbering nodes.
    #[arg(long, default_value_t = DEFAULT_GPUS_PER_NODE, value_parser = clap::value_parser!(u32).range(1..))]
    pub gpus_per_node: u32,

    /// Plan onto the GPU nodes of a Kubernetes cluster (`tessera k8s
    /// inventory`): the fleet is its MIG-capable GPUs (costs from --gpu),
    /// and the plan names its nodes.
    #[arg(long, conflicts_with = "gpus_per_node")]
    pub cluster: bool,

    #[command(flatten)]
    pub kube: crate::commands::k8s::ClusterArgs,

    /// Most GPUs a plan may use, all GPU models together: a service or SLO
    /// set that needs more is refused at once, naming the service.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_GPUS, value_parser = clap::value_parser!(u64).range(1..=MAX_GPUS_LIMIT))]
    pub max_gpus: u64,

    /// Replan from the plan that runs (JSON or CSV as `tessera plan` writes
    /// it): every SLO met within --max-extra-gpus of a fresh plan's GPUs,
    /// then the fewest GPUs whose MIG layout changes, the fewest instances
    /// created or destroyed, the fewest processes started. The latency rule
    /// defaults to the plan's.
    #[arg(long, value_name = "CURRENT", conflicts_with = "cluster")]
    pub from: Option<PathBuf>,

    /// With --from: GPUs the replan may use beyond the fresh optimum.
    #[arg(long, value_name = "K", default_value_t = 0, requires = "from")]
    pub max_extra_gpus: u64,

    /// Spread services over GPUs: a service with several segments gets them
    /// on at least two GPUs (so one lost GPU never takes all of it), by
    /// trading segments between instances of the same profile — layouts,
    /// GPUs and every SLO stay as planned. Services that cannot be spread are
    /// named in the plan's notes.
    #[arg(long, conflicts_with = "from")]
    pub spread: bool,

    /// With --from: a GPU of the plan to drain (`NODE:GPU`, e.g. `0:3`); its
    /// services move to the rest of the fleet. Repeat for more.
    #[arg(long, value_name = "NODE:GPU", requires = "from", value_parser = parse_position)]
    pub drain: Vec<GpuPosition>,

    /// With --from: a GPU of the plan that failed (`NODE:GPU`); its
    /// services are replanned onto the rest. Repeat for more.
    #[arg(long, value_name = "NODE:GPU", requires = "from", value_parser = parse_position)]
    pub lost: Vec<GpuPosition>,

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

fn parse_position(value: &str) -> Result<GpuPosition, String> {
    let parsed = value.split_once(':').and_then(|(node, index)| Some((node.parse().ok()?, index.parse().ok()?)));
    parsed
        .map(|(node, index)| GpuPosition { node, index })
        .ok_or_else(|| format!("expected NODE:GPU as whole numbers, e.g. 0:3, got '{value}'"))
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

    /// Latency rule; default: the one recorded in the plan, or `percentile`
    /// (`tessera plan`'s default) for a ParvaGPU deployment map, which
    /// records none.
    #[arg(long, value_enum)]
    pub latency_rule: Option<LatencyRule>,

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
