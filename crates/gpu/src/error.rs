//! The crate's one error type.

/// Everything that can go wrong in `tessera-gpu`. Messages are one line and
/// name the input (file or command), the line and the field.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// An Nsight Compute report that cannot be aggregated.
    #[error("{report}:{line}: {field}: {message}")]
    NcuReport {
        /// Where the report came from (a path, or a command).
        report: String,
        /// 1-based line of the report.
        line: usize,
        /// The column or metric at fault.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// `nvidia-smi` (or another tool) is not installed.
    #[error("{program} not found: install the NVIDIA driver (a deploy without one can still print its commands with --dry-run)")]
    ProgramMissing {
        /// The program looked for.
        program: String,
    },
    /// Nsight Compute's `ncu` is not installed where it was looked for.
    #[error("{program} (Nsight Compute) not found: install Nsight Compute (it comes with the CUDA toolkit), pass --ncu PATH, or import a report with --import")]
    NcuMissing {
        /// The program looked for.
        program: String,
    },
    /// A program could not be started for another reason.
    #[error("cannot run {program}: {message}")]
    Spawn {
        /// The program.
        program: String,
        /// The operating system's reason.
        message: String,
    },
    /// A command ran and failed.
    #[error("`{command}` failed (exit status {status}): {message}")]
    CommandFailed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: i32,
        /// Its first line of error output.
        message: String,
    },
    /// Output of `nvidia-smi` that cannot be understood.
    #[error("`{command}` output line {line}: {message}")]
    MigOutput {
        /// The command line.
        command: String,
        /// 1-based line of the output.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A plan's GPU that cannot be deployed as written.
    #[error("GPU {gpu}: {message}")]
    PlanGpu {
        /// GPU index on the node.
        gpu: u32,
        /// What is wrong.
        message: String,
    },
    /// The plan wants another GPU model than the one installed.
    #[error("GPU {gpu} is an {name} ({installed}) but the plan wants {planned}")]
    ModelMismatch {
        /// GPU index on the node.
        gpu: u32,
        /// The driver's name for it, e.g. `NVIDIA H100 80GB HBM3`.
        name: String,
        /// The model installed.
        installed: tessera_core::GpuModel,
        /// The model the plan wants.
        planned: tessera_core::GpuModel,
    },
    /// A GPU that is not in MIG mode, where MIG instances are needed.
    #[error("GPU {gpu} ({name}) is not in MIG mode: enable it first (`nvidia-smi -i {gpu} -mig 1` as root, on an idle GPU); Tessera never changes MIG mode")]
    MigDisabled {
        /// GPU index on the node.
        gpu: u32,
        /// The driver's name for it.
        name: String,
    },
    /// The MPS daemon or processes of a planned MIG instance cannot be
    /// started, stopped or read back.
    #[error("GPU {gpu} {instance}: {message}")]
    Service {
        /// GPU index on the node.
        gpu: u32,
        /// The instance, `PROFILE@START`.
        instance: String,
        /// What went wrong, and what was cleaned up.
        message: String,
    },
    /// Compute processes run on a GPU whose MIG layout would change.
    #[error("GPU {gpu} runs {count} compute process(es): stop them or pass --force")]
    ProcessesRunning {
        /// GPU index on the node.
        gpu: u32,
        /// Processes running.
        count: usize,
    },
    /// A step of `apply` failed; the rollback's outcome is described.
    #[error("GPU {gpu}: `{step}` failed: {cause}; {rollback}")]
    ApplyFailed {
        /// GPU index on the node.
        gpu: u32,
        /// The failing command line.
        step: String,
        /// Why it failed.
        cause: String,
        /// What the rollback did (or why it failed).
        rollback: String,
    },
    /// NVML (libnvidia-ml) cannot be loaded or queried.
    #[error("NVML is not available (no NVIDIA driver): {message}; profiling needs a GPU node (deploy can print its commands with --dry-run anywhere)")]
    NvmlUnavailable {
        /// NVML's reason.
        message: String,
    },
    /// NVML was loaded but a query failed.
    #[error("NVML: {message}")]
    Nvml {
        /// What failed and why.
        message: String,
    },
    /// A measured workload failed or printed no throughput.
    #[error("workload `{command}`: {message}")]
    Workload {
        /// The workload's command line.
        command: String,
        /// What is wrong.
        message: String,
    },
}
