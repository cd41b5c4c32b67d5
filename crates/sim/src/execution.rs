//! What an executor needs to run a simulated schedule on a real GPU: every
//! command of the simulated run (copies in, write-backs, computes and
//! frees) in the order they started, each with the commands of the other
//! engines that had *ended* when it started. An executor that issues the
//! commands in this order, each engine's in its own stream, and makes each
//! wait for those ends, keeps every decision of the policies (what moves,
//! in which order, and when memory is reused) and lets the hardware decide
//! only the durations.

use serde::{Deserialize, Serialize};

use crate::result::{EngineKind, SimResult};
use crate::trace::{Operation, Trace};

/// Version of the [`ExecutionPlan`] document.
pub const EXECUTION_PLAN_VERSION: u32 = 1;

/// A simulated run as commands for an executor (JSON on its standard input).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionPlan {
    /// [`EXECUTION_PLAN_VERSION`].
    pub version: u32,
    /// The trace's GPU memory: the executor's cap on device memory.
    pub memory_bytes: u64,
    /// Every command, in the order the simulation started them.
    pub commands: Vec<Command>,
    /// What the simulator predicts for this run.
    pub simulated: Totals,
}

/// Times of one run, simulated or measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Totals {
    /// From the first command's start to the last one's end.
    pub makespan_ms: f64,
    /// Time the compute stream was busy.
    pub compute_ms: f64,
    /// Time the host-to-device stream was busy.
    pub h2d_ms: f64,
    /// Time the device-to-host stream was busy.
    pub d2h_ms: f64,
}

/// What a command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandKind {
    /// Copy `bytes` of `buffer` from pinned host memory to the device
    /// (taking that much device memory when it starts).
    H2d,
    /// Copy `buffer` back to the host; its device memory is free when the
    /// copy ends.
    D2h,
    /// Run a kernel of `compute_ms` holding `bytes` of scratch.
    Compute,
    /// Drop `buffer`'s device memory (a clean eviction).
    Free,
}

/// One command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Command {
    /// What it does.
    pub kind: CommandKind,
    /// `client/buffer` for copies and frees, `client#operation` for computes.
    pub label: String,
    /// Bytes copied, or scratch bytes of a compute (0 for a free).
    pub bytes: u64,
    /// Kernel time of a compute (0 otherwise).
    pub compute_ms: f64,
    /// When the simulation started it.
    pub start_ms: f64,
    /// How many host-to-device, device-to-host and compute commands (in
    /// their stream's order) must have ended before it starts.
    pub after: After,
}

/// Counts of commands of each stream that precede a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct After {
    /// Host-to-device copies.
    pub h2d: usize,
    /// Write-backs.
    pub d2h: usize,
    /// Computes.
    pub compute: usize,
}

/// The commands of a simulated run of `trace` (`result` must come from
/// [`crate::simulate`], which records intervals and frees).
pub fn execution_plan(trace: &Trace, result: &SimResult) -> ExecutionPlan {
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut commands: Vec<(u64, u8, Command)> = Vec::new();
    let mut ends: [Vec<u64>; 3] = [vec![], vec![], vec![]];
    for interval in &result.intervals {
        let (kind, stream, rank) = match interval.engine {
            EngineKind::H2d => (CommandKind::H2d, 0, 2),
            EngineKind::D2h => (CommandKind::D2h, 1, 1),
            EngineKind::Compute => (CommandKind::Compute, 2, 3),
        };
        ends[stream].push(interval.end_ns);
        let kernel_ms = match kind {
            CommandKind::Compute => operation(trace, &interval.label).map_or(0.0, |op| op.compute_ms),
            _ => 0.0,
        };
        let command = Command {
            kind,
            label: interval.label.clone(),
            bytes: interval.bytes,
            compute_ms: kernel_ms,
            start_ms: ms(interval.start_ns),
            after: After::default(),
        };
        commands.push((interval.start_ns, rank, command));
    }
    for free in &result.frees {
        let command = Command {
            kind: CommandKind::Free,
            label: free.label.clone(),
            bytes: 0,
            compute_ms: 0.0,
            start_ms: ms(free.at_ns),
            after: After::default(),
        };
        commands.push((free.at_ns, 0, command));
    }
    // Frees and write-backs first at one instant: the simulator applies
    // completions, then evicts, then starts copies and computes.
    commands.sort_by_key(|&(start, rank, _)| (start, rank));
    for stream in &mut ends {
        stream.sort_unstable();
    }
    let ended = |stream: &Vec<u64>, at: u64| stream.partition_point(|&end| end <= at);
    let commands = commands
        .into_iter()
        .map(|(start, _, mut command)| {
            command.after =
                After { h2d: ended(&ends[0], start), d2h: ended(&ends[1], start), compute: ended(&ends[2], start) };
            command
        })
        .collect();
    ExecutionPlan {
        version: EXECUTION_PLAN_VERSION,
        memory_bytes: trace.gpu.memory_bytes,
        commands,
        simulated: Totals {
            makespan_ms: ms(result.makespan_ns),
            compute_ms: ms(result.compute_busy_ns),
            h2d_ms: ms(result.h2d_busy_ns),
            d2h_ms: ms(result.d2h_busy_ns),
        },
    }
}

/// The operation an interval labelled `client#operation` ran.
fn operation<'t>(trace: &'t Trace, label: &str) -> Option<&'t Operation> {
    let (client, op) = label.rsplit_once('#')?;
    trace.clients.iter().find(|c| c.name == client)?.operations.get(op.parse::<usize>().ok()?)
}
