//! Traces of the design notes' toy examples: 10 GB/s, so 1 GB takes
//! 100 ms; clean data; no copy latency.

use tessera_sim::{Buffer, Client, Gpu, Operation, Trace};

/// One GB.
pub const GB: u64 = 1_000_000_000;
/// One millisecond in ns.
pub const MS: u64 = 1_000_000;

/// A trace of clients `(name, GB, compute ms, operations)`, each operation
/// using one persistent buffer of that size.
pub fn trace(memory_bytes: u64, clients: &[(&str, u64, f64, usize)]) -> Trace {
    Trace {
        gpu: Gpu {
            memory_bytes,
            h2d_bytes_per_s: 10.0 * GB as f64,
            d2h_bytes_per_s: 10.0 * GB as f64,
            copy_latency_ns: 0,
        },
        clients: clients
            .iter()
            .map(|&(name, gb, compute_ms, ops)| Client {
                name: name.into(),
                operations: vec![
                    Operation {
                        compute_ms,
                        buffers: vec![Buffer { name: "data".into(), bytes: gb * GB, dirty: false }],
                        ephemeral_bytes: 0,
                    };
                    ops
                ],
            })
            .collect(),
    }
}
