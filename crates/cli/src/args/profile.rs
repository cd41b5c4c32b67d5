//! `tessera profile …`: measuring registered workloads on this node's GPUs
//! (kernel metrics, alone, colocated, segment profiles).

use std::path::PathBuf;

use clap::Subcommand;

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
