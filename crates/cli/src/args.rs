//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tessera_colocate::{ModelKind, Protocol, Risk};
use tessera_core::{GpuModel, GpuOffer};
use tessera_plan::{
    GpuPosition, LatencyRule, Strategy, DEFAULT_GPUS_PER_NODE, DEFAULT_MAX_GPUS, DEFAULT_MAX_PROCS, DEFAULT_TIME_LIMIT,
    MAX_GPUS_LIMIT,
};
use tessera_serving::{Discipline, SimulationOptions};
use tessera_sim::{Eviction, Link, Retention};
use tessera_store::WorkloadTask;

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
    /// Simulate workloads whose memory exceeds the GPU: schedulers,
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
    K8s(crate::commands::k8s::K8sCommand),
    /// The node agent of a Kubernetes cluster (a DaemonSet runs it on every
    /// GPU node): applies the node's MIG layout and reports its state.
    Agent(crate::commands::k8s::AgentArgs),
    /// Print a shell completion script, e.g. `tessera completions bash >
    /// ~/.local/share/bash-completion/completions/tessera`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `tessera serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen. A loopback address unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDRESS:PORT")]
    pub listen: std::net::SocketAddr,
    /// A file whose first line is the API token (at least 16 characters);
    /// without it, the TESSERA_TOKEN environment variable. Requests that
    /// change anything must send `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Let reading routes (GET: lists, plans, pages, metrics, the API
    /// document) answer without the token.
    #[arg(long)]
    pub public_reads: bool,
    /// Allow a listen address outside the loopback range.
    #[arg(long)]
    pub allow_remote: bool,
    /// Planning jobs that run at once (more wait in a queue).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,
    /// Seconds a request may take before it is answered 503.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = parse_seconds)]
    pub request_timeout: f64,
    /// Largest request body, MiB.
    #[arg(long, value_name = "MIB", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_body_mib: u32,
}

/// `tessera report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The plan (JSON, as `tessera plan --format json` writes it).
    pub plan: PathBuf,
    /// Write here (atomically) instead of to standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// `html`: the whole report; `svg`: the tiles alone.
    #[arg(long, value_enum, default_value_t = ReportFormat::Html)]
    pub format: ReportFormat,
    /// The page's title (default: the plan's file name).
    #[arg(long)]
    pub title: Option<String>,
}

/// What `tessera report` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// One self-contained HTML page.
    Html,
    /// The tiles alone, one SVG document.
    Svg,
}

/// `tessera store …`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Show the store's path, schema version and how many profiles,
    /// workloads, colocations, imports and journal entries it holds.
    Info {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Upgrade the store's schema to this version of Tessera (any command
    /// that writes to the store does too; commands that only read need it).
    Migrate,
}

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

/// `tessera profile …`.
#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// KACE's six kernel metrics of one workload (kernel-duration-weighted
    /// over its kernel launches): profiled live with Nsight Compute (`ncu`),
    /// or read from an existing `ncu --csv` report; stored with the
    /// workload's metrics.
    Kernels {
        /// The workload: a registered one to profile live, or the name to
        /// store an imported report under, e.g. `bert-base-cased_batch8-inf`.
        workload: String,
        /// Read this report of `ncu --csv --metrics <tessera-gpu's
        /// NCU_METRICS>` instead of running the workload.
        #[arg(long, value_name = "REPORT.csv")]
        import: Option<PathBuf>,
        /// The GPU's index on this node (live profiling).
        #[arg(long, value_name = "INDEX", default_value_t = 0, conflicts_with = "import")]
        gpu: u32,
        /// The Nsight Compute command line program.
        #[arg(long, value_name = "PATH", default_value = "ncu", conflicts_with = "import")]
        ncu: String,
        /// Kernel launches to leave unprofiled first (warm-up).
        #[arg(long, value_name = "N", default_value_t = 50, conflicts_with = "import")]
        launch_skip: u32,
        /// Kernel launches to profile; then the workload is terminated.
        #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "import")]
        launch_count: u32,
        /// Seconds the profiled run may take.
        #[arg(long, value_name = "S", default_value_t = 600.0, conflicts_with = "import")]
        timeout: f64,
        /// Also write `DIR/output_<workload>_ncu_total.csv` (KACE's form, atomically).
        #[arg(long, value_name = "DIR")]
        output: Option<PathBuf>,
    },
    /// Measure segment profiles of a registered workload: every batch ×
    /// MPS processes in one MIG instance of each size that already exists
    /// on the GPU (Tessera never creates, destroys or reconfigures MIG
    /// instances here), stored as the profile of the workload's family on
    /// the installed GPU model, merged with its earlier points.
    Segments {
        /// The registered workload; its command's `{batch}` takes each batch size.
        workload: String,
        /// Batch sizes, e.g. `1,2,4,8`.
        #[arg(long, value_delimiter = ',', required = true, value_parser = clap::value_parser!(u32).range(1..))]
        batches: Vec<u32>,
        /// MPS processes per segment, e.g. `1,2,3`.
        #[arg(long, value_delimiter = ',', default_value = "1", value_parser = clap::value_parser!(u32).range(1..=48))]
        procs: Vec<u32>,
        /// The GPU's index on this node.
        #[arg(long, value_name = "INDEX", default_value_t = 0)]
        gpu: u32,
        /// Measure a GPU without MIG as its largest profile (the same SMs on
        /// H100 and H200; on an A100 the whole GPU has 108 SMs to 7g's 98).
        #[arg(long)]
        whole_gpu: bool,
        /// Seconds per configuration.
        #[arg(long, value_name = "S", default_value_t = 20.0)]
        duration: f64,
        /// The profile's model name (default: the workload's family).
        #[arg(long)]
        model: Option<String>,
        /// Measure only this many configurations of the grid: those
        /// `tessera profiles suggest` ranks first from the points already
        /// stored (a spread for a new model).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        budget: Option<u64>,
    },
    /// Run a registered workload alone on a GPU and store its throughput,
    /// mean SM and memory utilisation (NVML) and peak memory.
    Run {
        /// The registered workload's name (`tessera workload …`).
        workload: String,
        /// The GPU's index on this node.
        #[arg(long, value_name = "INDEX", default_value_t = 0)]
        gpu: u32,
        /// How long to run it, seconds.
        #[arg(long, value_name = "S", default_value_t = 60.0)]
        duration: f64,
        /// How often to sample the GPU, milliseconds.
        #[arg(long = "interval-ms", value_name = "MS", default_value_t = 500)]
        interval_ms: u64,
    },
    /// Run two or more registered workloads together under a private MPS
    /// daemon and store their colocated throughputs.
    Colocate {
        /// The registered workloads' names (at least two); each needs its
        /// metrics alone in the store (`tessera profile run`).
        #[arg(num_args = 2.., required = true, value_name = "WORKLOAD")]
        workloads: Vec<String>,
        /// The GPU's index on this node.
        #[arg(long, value_name = "INDEX", default_value_t = 0)]
        gpu: u32,
        /// Run them in this MIG instance instead (`MIG-…`, from `nvidia-smi -L`).
        #[arg(long, value_name = "UUID", conflicts_with = "gpu")]
        mig: Option<String>,
        /// How long to run them, seconds.
        #[arg(long, value_name = "S", default_value_t = 60.0)]
        duration: f64,
        /// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` for every workload (1–100).
        #[arg(long = "active-thread-percentage", value_name = "P", value_parser = clap::value_parser!(u32).range(1..=100))]
        active_thread_percentage: Option<u32>,
    },
}

/// `tessera deploy`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DeployArgs {
    #[command(subcommand)]
    pub command: Option<DeployCommand>,

    /// The plan (JSON, as written by `tessera plan --format json`).
    #[arg(value_name = "PLAN.json", required = true)]
    pub plan: Option<PathBuf>,

    /// The node whose GPUs to change (the plan's `node` field).
    #[arg(long, required = true)]
    pub node: Option<u32>,

    /// Run the commands (default: only print them): change each GPU's MIG
    /// layout, then start one MPS control daemon per instance and the
    /// registered workload's processes there, detached (they keep running
    /// after tessera exits). Instances already running as planned are left
    /// alone; services of an earlier deployment on a GPU whose layout
    /// changes are stopped first. Every action is journaled in the store.
    #[arg(long)]
    pub apply: bool,

    /// Only print the commands (the default).
    #[arg(long, conflicts_with = "apply")]
    pub dry_run: bool,

    /// Change GPUs even when compute processes run on them (the driver
    /// still refuses to destroy an instance in use).
    #[arg(long, requires = "apply")]
    pub force: bool,

    /// Where each instance's MPS pipe and log directories, process logs
    /// and pids file go (`DIR/gpu<G>-<PROFILE>-<START>/`).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_MPS_DIR)]
    pub mps_dir: PathBuf,
}

/// Where deploy keeps the MPS state of instances unless told otherwise.
pub const DEFAULT_MPS_DIR: &str = "/tmp/tessera-mps";

/// `tessera deploy …` subcommands.
#[derive(Debug, Subcommand)]
pub enum DeployCommand {
    /// Compare the node's GPUs with the plan: the installed models, the
    /// live MIG layouts, and whether each instance's MPS daemon and
    /// processes (started by `deploy --apply`) run.
    Status {
        /// The plan (JSON).
        #[arg(value_name = "PLAN.json")]
        plan: PathBuf,
        /// The node.
        #[arg(long)]
        node: u32,
        /// Where `deploy --apply` kept the instances' MPS state.
        #[arg(long, value_name = "DIR", default_value = DEFAULT_MPS_DIR)]
        mps_dir: PathBuf,
    },
}

/// `tessera colocate …`.
#[derive(Debug, Subcommand)]
pub enum ColocateCommand {
    /// Score every model and baseline with KACE's protocols: P3 (train on
    /// each split's training rows, choose among its test rows), LOWO (leave
    /// each workload's model family and task out of training) or LOFO
    /// (leave each whole model family out). Nested: every choice a model
    /// makes (configuration, fallback rule, intervals) is made on each
    /// fold's training rows alone.
    Evaluate {
        /// Protocol.
        #[arg(long, value_enum)]
        protocol: Protocol,
        /// For p3: a folder of splits, each a subfolder with
        /// `training_set.csv` and `testing_set.csv` (KACE's colocation form).
        #[arg(long, value_name = "DIR", required_if_eq("protocol", "p3"))]
        splits: Option<PathBuf>,
        /// For lowo and lofo: every measured colocation (KACE's form, any K).
        #[arg(long, value_name = "FILE", required_if_eq_any([("protocol", "lowo"), ("protocol", "lofo")]))]
        data: Option<PathBuf>,
        /// Group sizes to score; default: the sizes measured in the data.
        /// A measured size chooses among the groups measured together; a
        /// larger size than the pairs chooses among groups built from the
        /// measured pairs (each member's delays beside each partner added:
        /// an assumption, said so).
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(2..=6))]
        group_sizes: Option<Vec<u64>>,
        /// Also report the slowdown model the old way: its configuration
        /// chosen on the test rows themselves (optimistic, labelled so).
        #[arg(long)]
        tuned_on_test: bool,
        /// Seed of the inner row folds.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Import KACE colocation measurements (any K) and, optionally, the
    /// per-workload tables into the store (one transaction each).
    Import {
        /// Colocations in KACE's CSV form.
        data: PathBuf,
        /// KACE's `system_metrics.csv` (with --kernel-metrics).
        #[arg(long, value_name = "FILE", requires = "kernel_metrics")]
        system_metrics: Option<PathBuf>,
        /// KACE's folder of `output_<workload>_ncu_total.csv` files.
        #[arg(long, value_name = "DIR", requires = "system_metrics")]
        kernel_metrics: Option<PathBuf>,
    },
    /// List the colocations in the store, with their ids and sources.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Remove colocations from the store: by id (see `colocate list`), or
    /// every one imported from a source.
    Remove {
        /// Ids of the colocations to remove.
        #[arg(value_name = "ID", required_unless_present = "source", conflicts_with = "source")]
        ids: Vec<i64>,
        /// Remove every colocation imported from this source (as `colocate
        /// list` shows it, or the file's path).
        #[arg(long, value_name = "SOURCE")]
        source: Option<String>,
    },
    /// Train a model and write it as a versioned JSON file: its
    /// configuration, fallback rule and intervals chosen on inner
    /// leave-one-model-family-out folds of the data.
    Train {
        /// Which model.
        #[arg(long, value_enum, default_value_t = ModelKind::Slowdown)]
        model: ModelKind,
        /// Training colocations (KACE's form); default: the store's.
        #[arg(long, value_name = "FILE")]
        data: Option<PathBuf>,
        /// Seed of the model's training.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Where to write the model (atomically).
        #[arg(long, short, value_name = "FILE")]
        output: PathBuf,
    },
    /// Rank partners for a workload by predicted throughput together.
    Recommend {
        /// The workload to find partners for.
        #[arg(long)]
        target: String,
        /// Partners to consider (comma-separated); default: every workload.
        #[arg(long, value_delimiter = ',')]
        candidates: Option<Vec<String>>,
        /// Workloads per group, the target included. Up to 100000 candidate
        /// groups are all scored; beyond that a beam search ranks them
        /// (partners added one at a time, the 256 best partial groups
        /// kept), which is not exhaustive and says so.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..))]
        group_size: u64,
        #[command(flatten)]
        source: ColocationSource,
        /// GPU memory for the footprint check, GB (KACE measured on a V100-32GB).
        #[arg(long, value_name = "GB", default_value_t = 32.0, value_parser = parse_gigabytes)]
        gpu_memory_gb: f64,
        /// Groups to show.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
        top: u64,
        /// Rank by the predicted total (mean) or by the lower end of its 90%
        /// interval (lower: give up a little expected throughput for less
        /// risk).
        #[arg(long, value_enum, default_value_t = Risk::Mean)]
        risk: Risk,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Suggest the colocations to measure next: the unmeasured groups whose
    /// intervals reach furthest above the best known choice of their
    /// workloads.
    Suggest {
        /// Measurements to suggest.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        budget: u64,
        /// Workloads per group (every unmeasured group that fits is
        /// considered, up to 100000 of them).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..=8))]
        group_size: u64,
        #[command(flatten)]
        source: ColocationSource,
        /// GPU memory, GB: groups whose footprints exceed it are not suggested.
        #[arg(long, value_name = "GB", default_value_t = 32.0, value_parser = parse_gigabytes)]
        gpu_memory_gb: f64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
}

/// The model and the data `colocate recommend` and `suggest` work from.
#[derive(Debug, Clone, Args)]
pub struct ColocationSource {
    /// A trained model file; default: train the slowdown model on the data.
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// Colocations and workloads (KACE's form); default: the store's.
    #[arg(long, value_name = "FILE")]
    pub data: Option<PathBuf>,
}

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
    #[arg(long, default_value = "lookahead:1", value_parser = parse_prefetch)]
    pub prefetch: tessera_sim::Prefetch,

    /// Which resident data leaves first.
    #[arg(long, value_enum, default_value_t = Eviction::Belady)]
    pub eviction: Eviction,

    /// What happens to a client's data after its last operation: released
    /// (like a finished process) or kept cached until evicted.
    #[arg(long, value_enum, default_value_t = Retention::ReleaseAfterLastUse)]
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
    /// Run a trace's schedule for real on a GPU (examples/executor/run_schedule.py,
    /// device memory capped at the trace's) and print measured vs simulated
    /// makespan, copy and compute time.
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
        #[arg(long, default_value = "lookahead:1", value_parser = parse_prefetch)]
        prefetch: tessera_sim::Prefetch,
        /// Which resident data leaves first.
        #[arg(long, value_enum, default_value_t = Eviction::Belady)]
        eviction: Eviction,
        /// What happens to a client's data after its last operation.
        #[arg(long, value_enum, default_value_t = Retention::ReleaseAfterLastUse)]
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
    /// replayed at each service's rate.
    #[arg(long, value_name = "MODEL", default_value = "poisson")]
    pub arrivals: String,

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

    /// Seconds at the start whose requests are not measured.
    #[arg(long, value_name = "S", default_value_t = SimulationOptions::default().warmup_s)]
    pub warmup: f64,

    /// Seed: the same seed gives the same figures.
    #[arg(long, default_value_t = SimulationOptions::default().seed)]
    pub seed: u64,

    /// Independent replications (for confidence intervals).
    #[arg(long, default_value_t = SimulationOptions::default().replications, value_parser = clap::value_parser!(u32).range(1..))]
    pub replications: u32,
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

fn parse_gigabytes(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(gb) if gb.is_finite() && gb > 0.0 => Ok(gb),
        _ => Err(format!("expected a positive number of GB, got '{value}'")),
    }
}

/// Where profiles come from.
#[derive(Debug, Clone, Args)]
pub struct ProfileSource {
    /// Profiles to use instead of the store: a ParvaGPU folder (one
    /// `<model>.csv` per model, measured on the first --gpu) or a Tessera
    /// profile CSV file.
    #[arg(long, value_name = "DIR|FILE")]
    pub profiles: Option<PathBuf>,

    /// A GPU model of the fleet, with an optional cost per GPU and count
    /// limit; repeat for a mixed fleet (the objective becomes total cost):
    /// `--gpu a100-80gb:cost=1.0 --gpu h100-80gb:cost=1.6,count=16`. GPU
    /// models without profiles of a model get estimated ones (said in the
    /// output).
    #[arg(long = "gpu", value_name = "MODEL[:cost=C][,count=N]", default_value = "a100-80gb", value_parser = parse_offer)]
    pub gpus: Vec<GpuOffer>,
}

impl ProfileSource {
    /// The first GPU model named.
    pub fn first_gpu(&self) -> GpuModel {
        self.gpus.first().map_or(GpuModel::A100_80GB, |offer| offer.model)
    }
}

/// Where SLOs come from.
#[derive(Debug, Clone, Args)]
pub struct SloSource {
    /// SLO CSV with the header `service,model,rate_rps,latency_ms`
    /// (`model` optional: the service name is then the model; optional
    /// `percentile`, the share of requests within the SLO, default 99).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["slo_rates", "slo_latency", "scenario"])]
    pub slo: Option<PathBuf>,

    /// ParvaGPU request-rate file (headerless, one scenario per row).
    #[arg(long, value_name = "FILE", requires_all = ["slo_latency", "scenario"])]
    pub slo_rates: Option<PathBuf>,

    /// ParvaGPU latency-SLO file (headerless, one scenario per row).
    #[arg(long, value_name = "FILE", requires_all = ["slo_rates", "scenario"])]
    pub slo_latency: Option<PathBuf>,

    /// Scenario (1-based row) of the ParvaGPU SLO files.
    #[arg(long, value_name = "K", requires = "slo_rates")]
    pub scenario: Option<usize>,

    /// The share of every service's requests (%) that must finish within
    /// its latency SLO, overriding the SLO file's `percentile` column
    /// (default 99).
    #[arg(long, value_name = "P", value_parser = parse_percentile)]
    pub slo_percentile: Option<f64>,
}

/// What `plan` and `verify` read: profiles, SLOs and the process limit.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// Use the built-in example (synthetic profiles and six services); no
    /// files and no GPU needed. `--slo` may replace the example services.
    #[arg(long, conflicts_with = "profiles")]
    pub demo: bool,

    #[command(flatten)]
    pub profiles: ProfileSource,

    #[command(flatten)]
    pub slos: SloSource,

    /// Most MPS processes per segment.
    #[arg(long, default_value_t = DEFAULT_MAX_PROCS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_procs: u32,
}

/// `tessera plan`.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub inputs: InputArgs,

    /// Planning strategy.
    #[arg(long, value_enum, default_value_t = Strategy::default())]
    pub strategy: Strategy,

    /// Latency rule every segment must meet. Default: the strategy's
    /// (queueing for optimal, parva for parva); with --from, the running
    /// plan's.
    #[arg(long, value_enum)]
    pub latency_rule: Option<LatencyRule>,

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

/// `tessera verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The plan, told apart by its content: JSON or CSV as written by
    /// `tessera plan --format json|csv`, or ParvaGPU's deployment map (on
    /// the first `--gpu`).
    pub plan: PathBuf,

    #[command(flatten)]
    pub inputs: InputArgs,

    /// Latency rule; default: the one recorded in the plan, or `queueing`
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

/// Output formats of listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// Aligned text.
    Table,
    /// JSON.
    Json,
}

/// `tessera bench …`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Time both strategies on ParvaGPU's six scenarios and the demo.
    Plan {
        /// ParvaGPU's data folder (with prof_data/ and slo/).
        #[arg(long, default_value = "../shared/data/parvagpu", value_name = "DIR")]
        parvagpu: PathBuf,
        /// Timed repetitions per input and strategy.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
        iterations: u32,
    },
    /// Colocation models: training time and scoring speed on KACE's pairs,
    /// the nested evaluation on every protocol and group size (the pairs,
    /// groups of 3 and 4 built from them, and every file of groups measured
    /// together), a summary table of every file, and the learning curve of
    /// suggested against random measurements.
    Colocate {
        /// KACE's colocation measurements (pairs).
        #[arg(long, default_value = "../shared/data/kace/pairs_mps100.csv", value_name = "FILE")]
        data: PathBuf,
        /// Files of groups measured together (any K, KACE's form), each
        /// evaluated at its own size with LOWO and LOFO; the four-way file
        /// is skipped when absent.
        #[arg(long = "groups", value_name = "FILE", default_value = "../shared/data/kace/four_way_1107.csv")]
        groups: Vec<PathBuf>,
        /// KACE's P3 splits (skipped when absent).
        #[arg(long, default_value = "../shared/data/kace/splits/n_occur_3", value_name = "DIR")]
        splits: PathBuf,
        /// Seeds of the learning curve (0 skips it).
        #[arg(long, default_value_t = 3)]
        curve_seeds: u64,
        /// Write the learning curve as an SVG plot to this file.
        #[arg(long, value_name = "FILE")]
        plot: Option<PathBuf>,
    },
    /// The oversubscription simulator: makespan / lower bound for each
    /// scheduler × prefetch policy over a sweep of generated traces, the
    /// genetic algorithm's gap to exhaustive search, and speed.
    Simulate {
        /// Traces per sweep cell (seeds 0..N).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
    },
    /// The HTTP service under load, on 127.0.0.1 only: concurrent clients
    /// read, verify and start demo planning jobs (each a bounded number of
    /// requests); then clients hang up mid-request; then the store is
    /// checked. Prints throughput and p50/p99 latency per route.
    Serve {
        /// Concurrent clients for reads and verifications.
        #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
        clients: u32,
        /// Read requests in all.
        #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
        reads: u32,
        /// Verifications in all.
        #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        verifies: u32,
        /// Demo planning jobs started at once.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        jobs: u32,
        /// Each job's time limit, seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 10.0, value_parser = parse_seconds)]
        time_limit: f64,
        /// Planning jobs the server runs at once.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
        workers: u32,
    },
    /// Profile completion on ParvaGPU's real grid: keep a share of each
    /// model's configurations (random subsets, or the ones `suggest`
    /// picks), predict the rest, and report the prediction error, interval
    /// coverage, GPUs planned for the six scenarios and the SLO violations
    /// of those plans on the full measured profiles.
    Profiles {
        /// ParvaGPU's data folder (with prof_data/ and slo/).
        #[arg(long, default_value = "../shared/data/parvagpu", value_name = "DIR")]
        parvagpu: PathBuf,
        /// Budgets, % of each model's grid.
        #[arg(long, value_delimiter = ',', default_value = "5,10,20,40", value_parser = clap::value_parser!(u32).range(1..=100))]
        budgets: Vec<u32>,
        /// Random subsets per budget (seeds 1..N).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Seconds one profiled configuration takes (for the time saved).
        #[arg(long, value_name = "S", default_value_t = 20.0, value_parser = parse_seconds)]
        seconds_per_point: f64,
    },
    /// Plan catalogues of many services with both strategies, each as a
    /// whole `tessera plan` process: time (load + plan + write), peak
    /// memory, GPUs, lower bound.
    Scale {
        /// Catalogue sizes (services).
        #[arg(long, value_delimiter = ',', default_value = "1100,11000,110000")]
        sizes: Vec<usize>,
        #[command(flatten)]
        catalogue: CatalogueBench,
    },
    /// Plans judged by the traffic they meet: ParvaGPU's strategy, the
    /// optimum under each latency rule and under uniform headroom, each
    /// simulated request by request at the real rates under Poisson,
    /// CV-2 and a production trace's arrivals: GPUs, requests within SLO
    /// (all, worst service), planning time.
    Slo {
        /// ParvaGPU's data folder (with prof_data/ and slo/).
        #[arg(long, default_value = "../shared/data/parvagpu", value_name = "DIR")]
        parvagpu: PathBuf,
        /// An arrival trace (CSV with a TIMESTAMP column).
        #[arg(long, default_value = "../shared/data/traces/azure_llm_conv_2023.csv", value_name = "FILE")]
        trace: PathBuf,
        /// ParvaGPU's scenarios to plan.
        #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6", value_parser = clap::value_parser!(u8).range(1..=6))]
        scenarios: Vec<u8>,
        /// Reference catalogue sizes (services; 0 values: none).
        #[arg(long, value_delimiter = ',', default_value = "1100")]
        sizes: Vec<usize>,
        /// Simulated seconds per scenario (catalogues get a tenth).
        #[arg(long, value_name = "S", default_value_t = 120.0)]
        seconds: f64,
        /// Seed of the catalogues and simulations.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Replanning after rates change by ±20%: GPUs, layouts kept, instances
    /// created and destroyed, services changed, against planning from
    /// scratch; and one GPU lost.
    Replan {
        /// Catalogue sizes (services), built as `bench scale` builds them.
        #[arg(long, value_delimiter = ',', default_value = "110,1100")]
        sizes: Vec<usize>,
        /// Draws of new rates per catalogue (seeds 1..N).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
        draws: u64,
        #[command(flatten)]
        catalogue: CatalogueBench,
    },
}

/// What `bench scale` and `bench replan` share: where ParvaGPU's data is,
/// the catalogues' seed, and how every plan is made.
#[derive(Debug, Clone, Args)]
pub struct CatalogueBench {
    /// ParvaGPU's data folder (with prof_data/ and slo/).
    #[arg(long, default_value = "../shared/data/parvagpu", value_name = "DIR")]
    pub parvagpu: PathBuf,
    /// Seed of the catalogues' rate factors.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Latency rule of every plan.
    #[arg(long, value_enum, default_value_t = LatencyRule::Parva)]
    pub latency_rule: LatencyRule,
    /// Time limit of each optimal planning, seconds (1e20: no limit).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TIME_LIMIT.as_secs_f64(), value_parser = parse_seconds)]
    pub time_limit: f64,
}

fn parse_gpu(value: &str) -> Result<GpuModel, String> {
    value.parse().map_err(|error: tessera_core::CoreError| error.to_string())
}

fn parse_offer(value: &str) -> Result<GpuOffer, String> {
    value.parse().map_err(|error: tessera_core::CoreError| error.to_string())
}

fn parse_percentile(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(percentile) if percentile > 0.0 && percentile < 100.0 => Ok(percentile),
        _ => Err(format!("expected a share above 0 and below 100 (%), got '{value}'")),
    }
}

fn parse_seconds(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(seconds),
        _ => Err(format!("expected a positive number of seconds, got '{value}'")),
    }
}

fn parse_position(value: &str) -> Result<GpuPosition, String> {
    let parsed = value.split_once(':').and_then(|(node, index)| Some((node.parse().ok()?, index.parse().ok()?)));
    parsed
        .map(|(node, index)| GpuPosition { node, index })
        .ok_or_else(|| format!("expected NODE:GPU as whole numbers, e.g. 0:3, got '{value}'"))
}
