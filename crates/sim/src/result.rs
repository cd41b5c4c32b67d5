//! What a simulation reports: totals, per-client completion times and the
//! busy intervals of each engine (for a Gantt chart).

use serde::{Deserialize, Serialize};

/// One of the GPU's three engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EngineKind {
    /// The compute engine (one operation at a time).
    Compute,
    /// The host-to-device copy engine.
    H2d,
    /// The device-to-host copy engine.
    D2h,
}

/// A span during which one engine was busy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    /// The busy engine.
    pub engine: EngineKind,
    /// Start time.
    pub start_ns: u64,
    /// End time.
    pub end_ns: u64,
    /// `client#operation` for compute, `client/buffer` for copies.
    pub label: String,
    /// Bytes copied, or a compute's scratch bytes.
    #[serde(default)]
    pub bytes: u64,
}

/// A clean buffer evicted: its memory is free at once (a dirty one's is
/// free when its write-back, a D2H interval, ends).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Free {
    /// When.
    pub at_ns: u64,
    /// `client/buffer`.
    pub label: String,
}

/// The outcome of one simulation.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SimResult {
    /// When the last engine went idle for good (last compute or copy end).
    pub makespan_ns: u64,
    /// Total time the compute engine was busy.
    pub compute_busy_ns: u64,
    /// Time the compute engine was idle before the last compute ended
    /// (waiting for data, memory or write-backs; includes the first fetch).
    pub stall_ns: u64,
    /// Bytes copied host to device.
    pub h2d_bytes: u64,
    /// Bytes copied device to host.
    pub d2h_bytes: u64,
    /// Total time the host-to-device engine was busy.
    pub h2d_busy_ns: u64,
    /// Total time the device-to-host engine was busy.
    pub d2h_busy_ns: u64,
    /// End of each client's last compute, indexed by client id.
    pub client_completion_ns: Vec<u64>,
    /// Every busy interval of every engine, in start order per engine.
    pub intervals: Vec<Interval>,
    /// Events the simulator processed (copy and compute completions).
    #[serde(default)]
    pub events: u64,
    /// Every clean eviction, in time order (with the intervals, what an
    /// executor needs to replay the run's memory).
    #[serde(default)]
    pub frees: Vec<Free>,
}
