//! The crate's one error type.

/// Everything that can go wrong in `tessera-gpu`. Messages are one line and
/// name the input (file or command), the line and the field. No variant has
/// a `source()`: each message carries its cause's text once, so a chain
/// printed with `{:#}` never repeats it.
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
    #[error("{program} not found: install the NVIDIA driver")]
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
    /// A plan without GPUs on the node asked for.
    #[error("no GPU on node {node}")]
    NoGpuOnNode {
        /// The node.
        node: u32,
    },
    /// Planned services whose (model, batch) no registered workload serves.
    #[error("no registered workload for model {model} batch {batch}{}; nothing was changed", also(others))]
    NoWorkload {
        /// The first model without one.
        model: String,
        /// Its batch size.
        batch: u32,
        /// The other (model, batch) pairs without one, as `MODEL batch B`.
        others: Vec<String>,
    },
    /// A plan with shared instances on the node and no command for the
    /// multi-model server they run.
    #[error(
        "GPU {gpu} {instance} is shared by several services and no multi-model server command was given to run \
         it; nothing was changed"
    )]
    NoSharedServer {
        /// The GPU of the first such instance.
        gpu: u32,
        /// The instance, `profile@start`.
        instance: String,
    },
    /// A segment sweep that cannot run on the GPU as it is, or measured
    /// nothing.
    #[error("{message}")]
    Sweep {
        /// What is wrong and what to do.
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
    #[error("GPU {gpu} runs {}: stop them or pass --force", tessera_core::text::count(*count, "compute process"))]
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
    #[error("NVML is not available (no NVIDIA driver): {message}")]
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
    /// `nvidia-smi` ran but the driver does not answer (e.g. exit status 9,
    /// "NVIDIA-SMI has failed because it couldn't communicate with the
    /// NVIDIA driver").
    #[error("the NVIDIA driver does not answer: `{command}` failed (exit status {status}): {message}")]
    DriverFailed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: i32,
        /// nvidia-smi's own first line.
        message: String,
    },
    /// A process group could not be signalled (other than being gone).
    #[error("cannot {what} process group {pgid}: {message}")]
    Signal {
        /// The group's id (the pid of its leader).
        pgid: u32,
        /// What was tried, e.g. `send SIGTERM to`.
        what: String,
        /// Why it failed.
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

/// ` (also missing: A, B)`, or nothing.
fn also(others: &[String]) -> String {
    if others.is_empty() {
        String::new()
    } else {
        format!(" (also missing: {})", others.join(", "))
    }
}

/// An error of another library (NVML, regex) as one line.
pub(crate) fn one_line(error: &dyn std::fmt::Display) -> String {
    error.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;
    use tessera_core::GpuModel;

    /// One of every variant.
    fn every_variant() -> Vec<GpuError> {
        let text = || "the cause".to_string();
        vec![
            GpuError::NcuReport { report: "r.csv".into(), line: 2, field: "f".into(), message: text() },
            GpuError::ProgramMissing { program: "nvidia-smi".into() },
            GpuError::NcuMissing { program: "ncu".into() },
            GpuError::Spawn { program: "p".into(), message: text() },
            GpuError::CommandFailed { command: "c".into(), status: 2, message: text() },
            GpuError::MigOutput { command: "c".into(), line: 1, message: text() },
            GpuError::PlanGpu { gpu: 0, message: text() },
            GpuError::NoGpuOnNode { node: 3 },
            GpuError::NoWorkload { model: "m".into(), batch: 1, others: vec!["n batch 2".into()] },
            GpuError::NoSharedServer { gpu: 0, instance: "1g.10gb@0".into() },
            GpuError::Sweep { message: text() },
            GpuError::ModelMismatch {
                gpu: 0,
                name: "NVIDIA H200".into(),
                installed: GpuModel::H200_141GB,
                planned: GpuModel::A30_24GB,
            },
            GpuError::MigDisabled { gpu: 0, name: "NVIDIA H200".into() },
            GpuError::Service { gpu: 0, instance: "1g.10gb@0".into(), message: text() },
            GpuError::ProcessesRunning { gpu: 0, count: 1 },
            GpuError::ApplyFailed { gpu: 0, step: "s".into(), cause: text(), rollback: "rolled back".into() },
            GpuError::NvmlUnavailable { message: text() },
            GpuError::Nvml { message: text() },
            GpuError::DriverFailed { command: "c".into(), status: 9, message: text() },
            GpuError::Signal { pgid: 7, what: "send SIGTERM to".into(), message: text() },
            GpuError::Workload { command: "w".into(), message: text() },
        ]
    }

    #[test]
    fn every_message_is_one_line_with_its_cause_once_and_no_source() {
        for error in every_variant() {
            let message = error.to_string();
            assert!(error.source().is_none(), "{message}: the chain would print the cause again");
            assert!(!message.contains('\n') && message.matches("the cause").count() <= 1, "{message}");
        }
        assert_eq!(
            GpuError::ProcessesRunning { gpu: 1, count: 1 }.to_string(),
            "GPU 1 runs 1 compute process: stop them or pass --force"
        );
        assert_eq!(
            GpuError::NoWorkload { model: "m".into(), batch: 1, others: vec!["n batch 2".into()] }.to_string(),
            "no registered workload for model m batch 1 (also missing: n batch 2); nothing was changed"
        );
    }
}
