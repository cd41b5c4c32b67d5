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

impl Gpu {
    /// Nanoseconds one host-to-device copy of `bytes` takes (latency included).
    pub fn h2d_ns(&self, bytes: u64) -> u64 {
        self.copy_latency_ns + transfer_ns(bytes, self.h2d_bytes_per_s)
    }

    /// Nanoseconds one device-to-host copy of `bytes` takes (latency included).
    pub fn d2h_ns(&self, bytes: u64) -> u64 {
        self.copy_latency_ns + transfer_ns(bytes, self.d2h_bytes_per_s)
    }
}

/// `bytes` at `bytes_per_s`, rounded up to whole nanoseconds.
fn transfer_ns(bytes: u64, bytes_per_s: f64) -> u64 {
    (bytes as f64 * 1e9 / bytes_per_s).ceil() as u64
}

impl Operation {
    /// Compute time rounded to whole nanoseconds.
    pub fn compute_ns(&self) -> u64 {
        (self.compute_ms * 1e6).round() as u64
    }

    /// Bytes the operation needs on the GPU while it computes.
    pub fn working_set_bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.bytes).sum::<u64>() + self.ephemeral_bytes
    }
}

impl Trace {
    /// Parses a JSON trace and validates it.
    pub fn from_json(text: &str) -> Result<Trace, SimError> {
        let trace: Trace = serde_json::from_str(text).map_err(|e| SimError::Format(e.to_string()))?;
        trace.validate()?;
        Ok(trace)
    }

    /// Checks the trace: positive bandwidths, at least one client, unique
    /// client names, no empty client, non-negative compute times, buffer
    /// names unique per operation and of one size per client, and every
    /// operation's working set within GPU memory.
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
        for client in &self.clients {
            if !names.insert(client.name.as_str()) {
                return Err(SimError::DuplicateClient { client: client.name.clone() });
            }
            self.validate_client(client)?;
        }
        Ok(())
    }

    fn validate_client(&self, client: &Client) -> Result<(), SimError> {
        if client.operations.is_empty() {
            return Err(SimError::EmptyClient { client: client.name.clone() });
        }
        let mut sizes: HashMap<&str, u64> = HashMap::new();
        for (operation, op) in client.operations.iter().enumerate() {
            if !(op.compute_ms.is_finite() && op.compute_ms >= 0.0) {
                return Err(SimError::ComputeTime { client: client.name.clone(), operation, value: op.compute_ms });
            }
            let mut seen = HashSet::new();
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
            }
            let working_set_bytes = op.working_set_bytes();
            if working_set_bytes > self.gpu.memory_bytes {
                return Err(SimError::WorkingSet {
                    client: client.name.clone(),
                    operation,
                    working_set_bytes,
                    memory_bytes: self.gpu.memory_bytes,
                });
            }
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
            .contains("operation 1: buffer 'w' has 1 bytes"));
        assert!(error_of(|t| t.clients[0].operations[0].compute_ms = -1.0).contains("compute_ms"));
        let err = Trace::from_json(r#"{"gpu": {}, "clients": []}"#).unwrap_err().to_string();
        assert!(err.starts_with("not a Tessera simulator trace") && !err.contains('\n'), "{err}");
    }
}
