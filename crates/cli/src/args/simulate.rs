//! `tessera simulate …`: oversubscribed memory (a trace's schedule
//! simulated, generated traces, a schedule run on a GPU) and the requests a
//! plan serves (`simulate serve`, whose traffic options `verify --simulate`
//! shares).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use tessera_core::GpuModel;
use tessera_serving::{Discipline, SimulationOptions};
use tessera_sim::{Eviction, Link, Retention};

use super::autopilot_run::parse_positive;
use super::{parse_gpu, ListFormat};

/// `tessera simulate`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub command: Option<SimulateCommand>,

    /// The trace (JSON; see `tessera simulate generate`).
    #[arg(long, value_name = "FILE", required = true)]
    pub trace: Option<PathBuf>,

    /// How to order the operations.
    #[arg(long, value_enum, default_value_t = SchedulerName::Greedy)]
    pub scheduler: SchedulerName,

    /// When to fetch data ahead: none, passive, active or lookahead:K.
    #[arg(long, default_value_t = tessera_sim::Policies::default().prefetch, value_parser = parse_prefetch)]
    pub prefetch: tessera_sim::Prefetch,

    /// Which resident data leaves first.
    #[arg(long, value_enum, default_value_t = tessera_sim::Policies::default().eviction)]
    pub eviction: Eviction,

    /// What happens to a client's data after its last operation: released
    /// (like a finished process) or kept cached until evicted.
    #[arg(long, value_enum, default_value_t = tessera_sim::Policies::default().retention)]
    pub retention: Retention,

    /// Seed of the genetic algorithm.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Genetic algorithm: population size (more than the 10 best genomes
    /// it keeps each generation).
    #[arg(long, default_value_t = 100, value_parser = parse_population)]
    pub population: usize,

    /// Genetic algorithm: most generations.
    #[arg(long, default_value_t = 200)]
    pub generations: usize,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,

    /// Also write a Gantt chart of the engines (SVG) here.
    #[arg(long, value_name = "FILE")]
    pub gantt: Option<PathBuf>,
}

/// `tessera simulate …` subcommands.
#[derive(Debug, Subcommand)]
pub enum SimulateCommand {
    /// Simulate the requests a plan serves, one by one: arrivals per service,
    /// routing to its segments by the plan's weights, a queue per process,
    /// dynamic batching; per service the latency percentiles, the share of
    /// requests within the SLO (attainment) and goodput, per segment its
    /// utilisation (`tessera verify --simulate` also fails on a miss).
    Serve(SimulateServeArgs),
    /// Compare serving runs measured on a GPU
    /// (examples/workloads/torch_serve.py's JSON) with the serving model: per
    /// load, the measured and predicted p50, p99 and p99.9 for the measured
    /// profile and arrival rate, and the p99s the model's own runs of the
    /// same length reach; at a plan's capacity, the share within the SLO;
    /// for a shared instance (`--members`), each member beside the
    /// serialized model.
    Measured(SimulateMeasuredArgs),
    /// Write a synthetic trace (JSON) to stdout.
    Generate {
        /// Clients.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Operations (iterations) per client.
        #[arg(long, default_value_t = 4)]
        operations: usize,
        /// Persistent data (every client's buffers, needed across its
        /// operations) / the GPU memory left beside the largest ephemeral
        /// (scratch) bytes of any operation: at 1 or less nothing need be
        /// evicted, above 1 data must move. Few clients cap what can be
        /// reached (memory is raised to the largest working set); the
        /// simulator reports the trace's actual value.
        #[arg(long, default_value_t = 2.0)]
        oversubscription: f64,
        /// Mean transfer time / mean compute time.
        #[arg(long, default_value_t = 1.0)]
        transfer_ratio: f64,
        /// Host link.
        #[arg(long, value_enum, default_value_t = Link::PcieGen4)]
        link: Link,
        /// Seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Compare schedules run on a GPU (each a `simulate run --format json`
    /// file, of one trace) with their simulations: per run the measured and
    /// simulated makespan, and what prefetching and the genetic algorithm
    /// gained in simulation and on the GPU.
    Runs {
        /// The runs (JSON, as `simulate run --format json` writes them).
        #[arg(value_name = "RUN.json", required = true)]
        runs: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Run a trace's schedule for real on a GPU (examples/executor/run_schedule.py,
    /// device memory capped at the trace's) and print measured vs simulated
    /// makespan, copy and compute time (`--format json`: the run with its
    /// scheduler and prefetch policy, as `simulate runs` reads it).
    Run {
        /// The trace (JSON).
        #[arg(value_name = "TRACE")]
        trace: PathBuf,
        /// The schedule: a JSON list of client names in running order, or the
        /// JSON report of `tessera simulate --format json`.
        #[arg(long, value_name = "FILE", conflicts_with = "scheduler")]
        schedule: Option<PathBuf>,
        /// Plan the schedule with this scheduler instead.
        #[arg(long, value_enum, default_value_t = SchedulerName::Greedy)]
        scheduler: SchedulerName,
        /// When to fetch data ahead: none, passive, active or lookahead:K.
        #[arg(long, default_value_t = tessera_sim::Policies::default().prefetch, value_parser = parse_prefetch)]
        prefetch: tessera_sim::Prefetch,
        /// Which resident data leaves first.
        #[arg(long, value_enum, default_value_t = tessera_sim::Policies::default().eviction)]
        eviction: Eviction,
        /// What happens to a client's data after its last operation.
        #[arg(long, value_enum, default_value_t = tessera_sim::Policies::default().retention)]
        retention: Retention,
        /// The GPU (index, as nvidia-smi numbers them).
        #[arg(long, value_name = "INDEX")]
        gpu: u32,
        /// The executor program (a shell command; the plan arrives on its
        /// standard input).
        #[arg(long, value_name = "COMMAND", default_value = tessera_gpu::DEFAULT_EXECUTOR)]
        program: String,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
}

/// `tessera simulate measured`.
#[derive(Debug, Args)]
pub struct SimulateMeasuredArgs {
    /// Measured runs (JSON, as examples/workloads/torch_serve.py writes them).
    #[arg(value_name = "RUN", required = true)]
    pub runs: Vec<PathBuf>,
    /// Simulated runs per load, each as long as the measured one, for the
    /// range of p99s one run of that length gives under the model.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub simulated_runs: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
}

/// `tessera simulate serve`.
#[derive(Debug, Args)]
pub struct SimulateServeArgs {
    /// The plan (JSON or CSV as `tessera plan` writes it).
    pub plan: PathBuf,

    #[command(flatten)]
    pub traffic: TrafficArgs,

    /// Profiles for the latency of partial batches (a ParvaGPU folder, on
    /// the first --gpu, or a Tessera profile CSV); default: the built-in
    /// example with --demo, else the store when it exists, else every
    /// partial batch runs as long as the full one (said in a note).
    #[arg(long, value_name = "DIR|FILE", conflicts_with = "demo")]
    pub profiles: Option<PathBuf>,

    /// Partial batches from the built-in example's profiles.
    #[arg(long)]
    pub demo: bool,

    /// The GPU model a ParvaGPU profile folder was measured on.
    #[arg(long, default_value = "a100-80gb", value_parser = parse_gpu)]
    pub gpu: GpuModel,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,

    /// Also write a page (self-contained HTML) with each service's latency
    /// CDF against its SLO and its attainment over time.
    #[arg(long, value_name = "FILE")]
    pub picture: Option<PathBuf>,
}

/// How requests arrive and are served in a request-level simulation.
#[derive(Debug, Clone, Args)]
pub struct TrafficArgs {
    /// How each service's requests arrive: `poisson`; `cv=X`, a renewal
    /// process whose inter-arrival times have coefficient of variation X;
    /// `onoff=burst:B,on:S,off:S`, bursts at B times the mean rate lasting S
    /// seconds on average; `trace=FILE`, a CSV with a TIMESTAMP column
    /// replayed at each service's rate. Default: the model the plan was
    /// proven under (poisson when it records none).
    #[arg(long, value_name = "MODEL")]
    pub arrivals: Option<String>,

    /// How a segment's MPS processes share its requests (the deployment:
    /// random).
    #[arg(long, value_enum, default_value_t = Discipline::default())]
    pub discipline: Discipline,

    /// How long an idle process waits for a fuller batch, ms (0: it takes
    /// what is waiting at once).
    #[arg(long, value_name = "MS", default_value_t = SimulationOptions::default().max_queue_delay_ms)]
    pub max_queue_delay_ms: f64,

    /// Simulated seconds of arrivals per replication.
    #[arg(long, value_name = "S", default_value_t = SimulationOptions::default().seconds)]
    pub seconds: f64,

    /// Seconds at the start whose requests are not measured. Default: 10,
    /// or a sixth of a run shorter than a minute.
    #[arg(long, value_name = "S")]
    pub warmup: Option<f64>,

    /// Seed: the same seed gives the same figures.
    #[arg(long, default_value_t = SimulationOptions::default().seed)]
    pub seed: u64,

    /// Independent replications (for confidence intervals).
    #[arg(long, default_value_t = SimulationOptions::default().replications, value_parser = clap::value_parser!(u32).range(1..))]
    pub replications: u32,

    /// Seconds of each window in which attainment is also judged (whole
    /// windows after the warm-up): each service's share of windows that
    /// meet its percentile, as an operator's dashboard measures SLOs.
    #[arg(long, value_name = "S", default_value_t = 60.0, value_parser = parse_positive)]
    pub window_s: f64,

    /// Run every batch this share slower than profiled (0.05: 5% slower,
    /// a GPU a little slower than its profile; a plan's margin is the
    /// slowdown it is proven to bear). Default: the profiled speed.
    #[arg(long, value_name = "SHARE", default_value_t = SimulationOptions::default().slowdown, allow_negative_numbers = true)]
    pub slowdown: f64,
}

/// The schedulers by name. Not `tessera_sim::SchedulerKind` itself: its
/// genetic algorithm carries its parameters (`--population`,
/// `--generations`, `--seed`), so a name is chosen here and
/// `commands::simulate` builds the kind with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedulerName {
    /// Round-robin over clients.
    Fifo,
    /// Johnson's rule (per round).
    Johnson,
    /// The weight-based greedy policy.
    Greedy,
    /// The genetic algorithm, seeded with the three above.
    Ga,
    /// Every order (small traces only).
    Exhaustive,
}

fn parse_prefetch(value: &str) -> Result<tessera_sim::Prefetch, String> {
    value.parse()
}

fn parse_population(value: &str) -> Result<usize, String> {
    let elite = tessera_sim::GeneticParams::default().elite;
    match value.parse::<usize>() {
        Ok(population) if population > elite => Ok(population),
        _ => Err(format!(
            "expected a whole number above {elite} (each generation keeps its {elite} best genomes and breeds the rest), got '{value}'"
        )),
    }
}
