//! The JSON trace: a GPU (memory, copy bandwidths, copy latency) and
//! clients, each a sequence of operations (compute time, the buffers it
//! uses, scratch memory it needs while computing). Units are in the field
//! names. [`Trace::from_json`] parses and validates; [`Trace::validate`]
//! checks a trace built in code.
//!
//! A buffer is named per client: the same name in two operations of one
//! client is the same data (and must have the same size). `dirty: true`
//! means the operation writes the buffer, so it must be copied back to the
//! host before its memory can be reused.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::error::SimError;

/// A whole trace: the GPU and the clients that share it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    /// The GPU every client runs on.
    pub gpu: Gpu,
    /// The clients, in the order schedules refer to them (client id = index).
    pub clients: Vec<Client>,
}

/// The GPU's memory and copy engines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// Device memory available to the clients.
    pub memory_bytes: u64,
    /// Host-to-device copy bandwidth.
    pub h2d_bytes_per_s: f64,
    /// Device-to-host copy bandwidth.
    pub d2h_bytes_per_s: f64,
    /// Fixed cost of every copy (each transfer command pays it once).
    pub copy_latency_ns: u64,
}

/// One client: a name and its operations, which run in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Client {
    /// Unique name of the client.
    pub name: String,
    /// The client's operations, in program order.
    pub operations: Vec<Operation>,
}

/// One operation: it needs its buffers resident to compute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// Time on the compute engine.
    pub compute_ms: f64,
    /// Persistent buffers the operation reads (and writes, if dirty).
    pub buffers: Vec<Buffer>,
    /// Scratch memory held only while the operation computes.
    #[serde(default)]
    pub ephemeral_bytes: u64,
}

/// A buffer as one operation uses it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Buffer {
    /// Name, unique within the client.
    pub name: String,
    /// Size of the buffer.
    pub bytes: u64,
    /// Whether the operation writes the buffer.
    #[serde(default)]
    pub dirty: bool,
}

/// Nanoseconds in 2^64 − 1: every time in the simulator is a `u64` of
/// nanoseconds (about 584 years).
const MAX_NS: f64 = u64::MAX as f64;

impl Gpu {
    /// Nanoseconds one host-to-device copy of `bytes` takes (latency
    /// included). Exact for every copy of a validated trace; saturates at
    /// `u64::MAX` otherwise.
    pub fn h2d_ns(&self, bytes: u64) -> u64 {
        copy_ns(bytes, self.h2d_bytes_per_s, self.copy_latency_ns).unwrap_or(u64::MAX)
    }

    /// Nanoseconds one device-to-host copy of `bytes` takes (latency
    /// included). Exact for every copy of a validated trace; saturates at
    /// `u64::MAX` otherwise.
    pub fn d2h_ns(&self, bytes: u64) -> u64 {
        copy_ns(bytes, self.d2h_bytes_per_s, self.copy_latency_ns).unwrap_or(u64::MAX)
    }

    /// Nanoseconds to copy in all of `op`'s buffers, one copy per buffer
    /// (fits for a validated trace; saturates otherwise).
    pub fn fetch_ns(&self, op: &Operation) -> u64 {
        op.buffers.iter().fold(0u64, |total, b| total.saturating_add(self.h2d_ns(b.bytes)))
    }
}

/// `latency_ns` plus `bytes` at `bytes_per_s` rounded up to whole
/// nanoseconds, or `None` when that does not fit in a `u64`.
fn copy_ns(bytes: u64, bytes_per_s: f64, latency_ns: u64) -> Option<u64> {
    let transfer_ns = (bytes as f64 * 1e9 / bytes_per_s).ceil();
    // `MAX_NS` rounds up to 2^64, which does not fit.
    if !(0.0..MAX_NS).contains(&transfer_ns) {
        return None;
    }
    latency_ns.checked_add(transfer_ns as u64)
}

impl Operation {
    /// Compute time rounded to whole nanoseconds (exact for a validated
    /// trace; saturates otherwise).
    pub fn compute_ns(&self) -> u64 {
        (self.compute_ms * 1e6).round() as u64
    }

    /// Bytes the operation needs on the GPU while it computes (saturates at
    /// `u64::MAX`, which only an invalid trace reaches).
    pub fn working_set_bytes(&self) -> u64 {
        self.buffers.iter().fold(self.ephemeral_bytes, |total, b| total.saturating_add(b.bytes))
    }
}

impl Trace {
    /// Bytes of every client's distinct buffers: the data that must stay
    /// resident across a client's operations (or be copied in again).
    pub fn persistent_bytes(&self) -> u128 {
        self.distinct_buffers().map(|b| u128::from(b.bytes)).sum()
    }

    /// Each client's buffers, each once (at its first use).
    pub(crate) fn distinct_buffers(&self) -> impl Iterator<Item = &Buffer> {
        self.clients.iter().flat_map(|client| {
            let mut seen = HashSet::new();
            client.operations.iter().flat_map(|op| &op.buffers).filter(move |b| seen.insert(b.name.as_str()))
        })
    }

    /// The most ephemeral (scratch) bytes of any operation.
    pub fn largest_ephemeral_bytes(&self) -> u64 {
        self.clients.iter().flat_map(|c| &c.operations).map(|op| op.ephemeral_bytes).max().unwrap_or(0)
    }

    /// Memory oversubscription: [`Trace::persistent_bytes`] over the memory
    /// left beside the largest ephemeral bytes of any operation. At 1 or
    /// less every client's data fits beside any operation's scratch, so
    /// nothing need ever be evicted; above 1 the operation with the largest
    /// scratch cannot run with all the data resident. Ephemeral bytes are
    /// held only while an operation computes, so they count once, not per
    /// operation. Infinite when no memory is left beside that scratch; 0
    /// without persistent data.
    pub fn oversubscription(&self) -> f64 {
        let persistent = self.persistent_bytes();
        if persistent == 0 {
            return 0.0;
        }
        persistent as f64 / self.gpu.memory_bytes.saturating_sub(self.largest_ephemeral_bytes()) as f64
    }

    /// Parses a JSON trace and validates it.
    pub fn from_json(text: &str) -> Result<Trace, SimError> {
        let trace: Trace = serde_json::from_str(text).map_err(|e| SimError::Format(e.to_string()))?;
        trace.validate()?;
        Ok(trace)
    }

    /// Checks the trace: positive bandwidths, at least one client, unique
    /// client names, no empty client, non-negative compute times, buffer
    /// names unique per operation and of one size per client, and every
    /// operation's working set within GPU memory. Every time must fit the
    /// simulator's clock (`u64` nanoseconds, about 584 years): each compute
    /// time, each buffer's copy each way (latency included), and the trace's
    /// total — every operation's compute plus one copy each way of each of
    /// its buffers — which bounds every sum the bounds and heuristics take.
    pub fn validate(&self) -> Result<(), SimError> {
        for (field, value) in
            [("h2d_bytes_per_s", self.gpu.h2d_bytes_per_s), ("d2h_bytes_per_s", self.gpu.d2h_bytes_per_s)]
        {
            if !(value.is_finite() && value > 0.0) {
                return Err(SimError::Bandwidth { field, value });
            }
        }
        if self.clients.is_empty() {
            return Err(SimError::NoClients);
        }
        let mut names = HashSet::new();
        let mut total_ns = 0u64;
        for client in &self.clients {
            if !names.insert(client.name.as_str()) {
                return Err(SimError::DuplicateClient { client: client.name.clone() });
            }
            self.validate_client(client, &mut total_ns)?;
        }
        Ok(())
    }

    fn validate_client(&self, client: &Client, total_ns: &mut u64) -> Result<(), SimError> {
        if client.operations.is_empty() {
            return Err(SimError::EmptyClient { client: client.name.clone() });
        }
        let gpu = &self.gpu;
        let mut sizes: HashMap<&str, u64> = HashMap::new();
        for (operation, op) in client.operations.iter().enumerate() {
            let compute_ns = op.compute_ms * 1e6;
            if !(compute_ns.is_finite() && compute_ns >= 0.0 && compute_ns.round() < MAX_NS) {
                return Err(SimError::ComputeTime { client: client.name.clone(), operation, value: op.compute_ms });
            }
            let mut operation_ns = op.compute_ns();
            let mut seen = HashSet::new();
            let mut working_set_bytes = u128::from(op.ephemeral_bytes);
            for buffer in &op.buffers {
                if !seen.insert(buffer.name.as_str()) {
                    return Err(SimError::DuplicateBuffer {
                        client: client.name.clone(),
                        operation,
                        buffer: buffer.name.clone(),
                    });
                }
                let first_bytes = *sizes.entry(buffer.name.as_str()).or_insert(buffer.bytes);
                if first_bytes != buffer.bytes {
                    return Err(SimError::BufferSize {
                        client: client.name.clone(),
                        operation,
                        buffer: buffer.name.clone(),
                        bytes: buffer.bytes,
                        first_bytes,
                    });
                }
                working_set_bytes += u128::from(buffer.bytes);
                for (field, bytes_per_s) in
                    [("h2d_bytes_per_s", gpu.h2d_bytes_per_s), ("d2h_bytes_per_s", gpu.d2h_bytes_per_s)]
                {
                    let Some(ns) = copy_ns(buffer.bytes, bytes_per_s, gpu.copy_latency_ns) else {
                        return Err(SimError::CopyTime {
                            client: client.name.clone(),
                            operation,
                            buffer: buffer.name.clone(),
                            bytes: buffer.bytes,
                            field,
                            bytes_per_s,
                            latency_ns: gpu.copy_latency_ns,
                        });
                    };
                    operation_ns = operation_ns.saturating_add(ns);
                }
            }
            if working_set_bytes > u128::from(gpu.memory_bytes) {
                return Err(SimError::WorkingSet {
                    client: client.name.clone(),
                    operation,
                    working_set_bytes,
                    memory_bytes: gpu.memory_bytes,
                });
            }
            *total_ns = total_ns
                .checked_add(operation_ns)
                .filter(|&total| total < u64::MAX)
                .ok_or_else(|| SimError::TraceTime { client: client.name.clone(), operation })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{
        "gpu": {"memory_bytes": 6000000000, "h2d_bytes_per_s": 1e10, "d2h_bytes_per_s": 1e10, "copy_latency_ns": 0},
        "clients": [
            {"name": "X", "operations": [
                {"compute_ms": 300, "buffers": [{"name": "w", "bytes": 4000000000, "dirty": false}], "ephemeral_bytes": 0},
                {"compute_ms": 300, "buffers": [{"name": "w", "bytes": 4000000000}]}
            ]}
        ]
    }"#;

    fn error_of(edit: impl Fn(&mut Trace)) -> String {
        let mut trace = Trace::from_json(GOOD).unwrap();
        edit(&mut trace);
        let message = trace.validate().unwrap_err().to_string();
        assert!(!message.contains('\n'), "{message}");
        message
    }

    #[test]
    fn parses_with_units_and_converts_times() {
        let trace = Trace::from_json(GOOD).unwrap();
        assert_eq!(trace.gpu.h2d_ns(1_000_000_000), 100_000_000);
        assert_eq!(trace.clients[0].operations[0].compute_ns(), 300_000_000);
        assert_eq!(trace.clients[0].operations[1].working_set_bytes(), 4_000_000_000);
        let back = serde_json::to_string(&trace).unwrap();
        assert_eq!(Trace::from_json(&back).unwrap(), trace);
    }

    #[test]
    fn rejects_bad_traces_with_one_line_errors() {
        assert!(error_of(|t| t.gpu.memory_bytes = 3_000_000_000).contains("working set of 4000000000 bytes"));
        assert!(error_of(|t| t.gpu.h2d_bytes_per_s = 0.0).contains("gpu.h2d_bytes_per_s"));
        assert!(error_of(|t| t.gpu.d2h_bytes_per_s = -1.0).contains("gpu.d2h_bytes_per_s"));
        assert!(error_of(|t| t.clients[0].operations.clear()).contains("'X' has no operations"));
        assert!(error_of(|t| t.clients.push(t.clients[0].clone())).contains("'X' is used twice"));
        assert!(error_of(|t| t.clients.clear()).contains("no clients"));
        let dup = |t: &mut Trace| {
            let b = t.clients[0].operations[0].buffers[0].clone();
            t.clients[0].operations[0].buffers.push(b);
        };
        assert!(error_of(dup).contains("buffer 'w' is listed twice"));
        assert!(error_of(|t| t.clients[0].operations[1].buffers[0].bytes = 1)
            .contains("operation 1: buffer 'w' has 1 byte here but 4000000000 bytes earlier"));
        assert!(error_of(|t| t.clients[0].operations[0].compute_ms = -1.0).contains("compute_ms"));
        let err = Trace::from_json(r#"{"gpu": {}, "clients": []}"#).unwrap_err().to_string();
        assert!(err.starts_with("not a Tessera simulator trace") && !err.contains('\n'), "{err}");
    }

    #[test]
    fn rejects_times_that_do_not_fit_the_clock_naming_field_client_and_operation() {
        // 1.85e13 ms is past 2^64 ns: it used to become u64::MAX and wrap to
        // a makespan of about the copy time.
        let message = error_of(|t| t.clients[0].operations[1].compute_ms = 1.85e13);
        assert!(
            message.contains("client 'X' operation 1: compute_ms") && message.contains("got 18500000000000"),
            "{message}"
        );
        // Each fits, together they do not.
        let message = error_of(|t| {
            t.clients[0].operations[0].compute_ms = 1e13;
            t.clients[0].operations[1].compute_ms = 1e13;
        });
        assert!(message.contains("client 'X' operation 1: the trace's total time"), "{message}");
        let message = error_of(|t| t.gpu.h2d_bytes_per_s = 1e-10);
        assert!(
            message.contains("client 'X' operation 0: buffer 'w' of 4000000000 bytes")
                && message.contains("gpu.h2d_bytes_per_s = 0.0000000001"),
            "{message}"
        );
        let message = error_of(|t| t.gpu.d2h_bytes_per_s = 1e-10);
        assert!(message.contains("gpu.d2h_bytes_per_s"), "{message}");
        let message = error_of(|t| t.gpu.copy_latency_ns = u64::MAX - 1);
        assert!(
            message.contains("buffer 'w'") && message.contains("gpu.copy_latency_ns = 18446744073709551614"),
            "{message}"
        );
        // Byte sums past u64::MAX are compared exactly, not wrapped.
        let message = error_of(|t| {
            t.gpu.memory_bytes = u64::MAX;
            t.gpu.h2d_bytes_per_s = 1e30;
            t.gpu.d2h_bytes_per_s = 1e30;
            let op = &mut t.clients[0].operations[0];
            op.buffers[0].bytes = u64::MAX;
            op.ephemeral_bytes = 2;
            t.clients[0].operations.truncate(1);
        });
        assert!(message.contains("working set of 18446744073709551617 bytes"), "{message}");
        // The largest values that fit are accepted, and converted exactly.
        let mut trace = Trace::from_json(GOOD).unwrap();
        trace.clients[0].operations[1].compute_ms = 1e13;
        trace.gpu.copy_latency_ns = 1 << 40;
        assert!(trace.validate().is_ok());
        assert_eq!(trace.clients[0].operations[1].compute_ns(), 10_000_000_000_000_000_000);
        assert_eq!(trace.gpu.h2d_ns(1_000_000_000), (1 << 40) + 100_000_000);
    }
}
