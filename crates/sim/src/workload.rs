//! A trace resolved under a schedule: one global table of buffers (a
//! client's buffer name is one buffer) with the positions that use each,
//! and one step per schedule position with its times and sizes. This is
//! what the engine and the eviction policies look at.

use std::collections::HashMap;

use crate::schedule::Schedule;
use crate::trace::Trace;

/// One buffer of one client.
#[derive(Debug)]
pub(crate) struct BufferInfo {
    /// `client/buffer`, for interval labels.
    pub label: String,
    /// Size of the buffer.
    pub bytes: u64,
    /// Schedule positions that use the buffer, ascending.
    pub uses: Vec<usize>,
}

/// One schedule position.
#[derive(Debug)]
pub(crate) struct Step {
    /// Client id.
    pub client: usize,
    /// `client#operation`, for interval labels.
    pub label: String,
    /// Time on the compute engine.
    pub compute_ns: u64,
    /// Scratch memory held while computing.
    pub ephemeral_bytes: u64,
    /// Buffer ids the step needs resident.
    pub buffers: Vec<usize>,
    /// Buffer ids the step writes.
    pub writes: Vec<usize>,
}

/// The resolved trace.
#[derive(Debug)]
pub(crate) struct Workload {
    pub buffers: Vec<BufferInfo>,
    pub steps: Vec<Step>,
}

impl Workload {
    /// Resolves `trace` under `schedule` (both already validated).
    pub fn new(trace: &Trace, schedule: &Schedule) -> Workload {
        let mut ids: HashMap<(usize, &str), usize> = HashMap::new();
        let mut buffers: Vec<BufferInfo> = Vec::new();
        let mut steps = Vec::with_capacity(schedule.steps().len());
        for (position, &(client, operation)) in schedule.steps().iter().enumerate() {
            let name = &trace.clients[client].name;
            let op = &trace.clients[client].operations[operation];
            let mut step = Step {
                client,
                label: format!("{name}#{operation}"),
                compute_ns: op.compute_ns(),
                ephemeral_bytes: op.ephemeral_bytes,
                buffers: Vec::with_capacity(op.buffers.len()),
                writes: Vec::new(),
            };
            for buffer in &op.buffers {
                let id = *ids.entry((client, buffer.name.as_str())).or_insert_with(|| {
                    buffers.push(BufferInfo {
                        label: format!("{name}/{}", buffer.name),
                        bytes: buffer.bytes,
                        uses: vec![],
                    });
                    buffers.len() - 1
                });
                buffers[id].uses.push(position);
                step.buffers.push(id);
                if buffer.dirty {
                    step.writes.push(id);
                }
            }
            steps.push(step);
        }
        Workload { buffers, steps }
    }

    /// The first position at or after `from` that uses `buffer`, if any.
    pub fn next_use(&self, buffer: usize, from: usize) -> Option<usize> {
        let uses = &self.buffers[buffer].uses;
        uses.get(uses.partition_point(|&p| p < from)).copied()
    }

    /// Whether `position` is the last use of `buffer`.
    pub fn is_last_use(&self, buffer: usize, position: usize) -> bool {
        self.buffers[buffer].uses.last() == Some(&position)
    }
}
