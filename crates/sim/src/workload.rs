//! A trace resolved under a schedule: buffers numbered trace-wide (a
//! client's buffer name is one buffer) with the positions that use each,
//! and the operation at each schedule position with its times and sizes. This is
//! what the engine and the eviction policies look at.
//!
//! [`Compiled`] does the per-trace work once (buffer names to numbers,
//! times to nanoseconds), so a search can resolve many schedules of one
//! trace cheaply; labels for charts are made only when asked for.

use std::collections::HashMap;

use crate::trace::Trace;

/// One operation of a compiled trace.
#[derive(Debug)]
pub(crate) struct CompiledOp {
    pub compute_ns: u64,
    pub ephemeral_bytes: u64,
    /// Trace-wide buffer numbers (see [`Compiled`]).
    pub buffers: Vec<usize>,
    /// The subset the operation writes.
    pub writes: Vec<usize>,
}

/// A validated trace with buffers numbered trace-wide, client by client in
/// order of first use, and every time in nanoseconds.
#[derive(Debug)]
pub(crate) struct Compiled {
    /// `[client][operation]`.
    pub ops: Vec<Vec<CompiledOp>>,
    /// Size of each trace-wide buffer.
    pub buffer_bytes: Vec<u64>,
    /// `(client, name)` of each trace-wide buffer, for labels.
    pub buffer_names: Vec<(usize, String)>,
    /// Where each buffer's uses start in [`Workload`]'s flat list (one
    /// more entry at the end): how many operations use a buffer does not
    /// depend on the schedule.
    use_offsets: Vec<usize>,
}

impl Compiled {
    /// Compiles `trace` (already validated).
    pub fn new(trace: &Trace) -> Compiled {
        let mut buffer_bytes = Vec::new();
        let mut buffer_names = Vec::new();
        let ops: Vec<Vec<CompiledOp>> = trace
            .clients
            .iter()
            .enumerate()
            .map(|(client, c)| {
                let mut numbers: HashMap<&str, usize> = HashMap::new();
                c.operations
                    .iter()
                    .map(|op| {
                        let mut compiled = CompiledOp {
                            compute_ns: op.compute_ns(),
                            ephemeral_bytes: op.ephemeral_bytes,
                            buffers: Vec::with_capacity(op.buffers.len()),
                            writes: Vec::new(),
                        };
                        for buffer in &op.buffers {
                            let id = *numbers.entry(buffer.name.as_str()).or_insert_with(|| {
                                buffer_bytes.push(buffer.bytes);
                                buffer_names.push((client, buffer.name.clone()));
                                buffer_bytes.len() - 1
                            });
                            compiled.buffers.push(id);
                            if buffer.dirty {
                                compiled.writes.push(id);
                            }
                        }
                        compiled
                    })
                    .collect()
            })
            .collect();
        let mut use_offsets = vec![0usize; buffer_bytes.len() + 1];
        for &b in ops.iter().flatten().flat_map(|op| &op.buffers) {
            use_offsets[b + 1] += 1;
        }
        for b in 0..buffer_bytes.len() {
            use_offsets[b + 1] += use_offsets[b];
        }
        Compiled { ops, buffer_bytes, buffer_names, use_offsets }
    }
}

/// A compiled trace under one schedule. Buffers keep their trace-wide
/// numbers; `rank` orders them by first use in the schedule (for ties).
#[derive(Debug, Clone)]
pub(crate) struct Workload<'c> {
    pub compiled: &'c Compiled,
    /// `(client, operation)` at each position.
    pub steps: Vec<(usize, usize)>,
    /// Each buffer's place in order of first use in the schedule.
    pub rank: Vec<usize>,
    /// Every buffer's uses, ascending, at `compiled.use_offsets[b]..[b + 1]`.
    uses: Vec<usize>,
}

impl<'c> Workload<'c> {
    /// Resolves `compiled` under the client-id sequence `ids`, which must
    /// name each client as many times as it has operations.
    pub fn new(compiled: &'c Compiled, ids: &[usize]) -> Workload<'c> {
        let buffers = compiled.buffer_bytes.len();
        let mut rank = vec![usize::MAX; buffers];
        let mut ranked = 0;
        let mut uses = vec![0usize; compiled.use_offsets[buffers]];
        let mut filled = compiled.use_offsets[..buffers].to_vec();
        let mut steps = Vec::with_capacity(ids.len());
        let mut next_op = vec![0usize; compiled.ops.len()];
        for (position, &client) in ids.iter().enumerate() {
            let operation = next_op[client];
            next_op[client] += 1;
            for &b in &compiled.ops[client][operation].buffers {
                if rank[b] == usize::MAX {
                    rank[b] = ranked;
                    ranked += 1;
                }
                uses[filled[b]] = position;
                filled[b] += 1;
            }
            steps.push((client, operation));
        }
        Workload { compiled, steps, rank, uses }
    }

    /// The operation at `position`.
    pub fn op(&self, position: usize) -> &'c CompiledOp {
        let (client, operation) = self.steps[position];
        &self.compiled.ops[client][operation]
    }

    /// Size of `buffer`.
    pub fn bytes(&self, buffer: usize) -> u64 {
        self.compiled.buffer_bytes[buffer]
    }

    fn uses(&self, buffer: usize) -> &[usize] {
        &self.uses[self.compiled.use_offsets[buffer]..self.compiled.use_offsets[buffer + 1]]
    }

    /// The first position at or after `from` that uses `buffer`, if any.
    pub fn next_use(&self, buffer: usize, from: usize) -> Option<usize> {
        let uses = self.uses(buffer);
        uses.get(uses.partition_point(|&p| p < from)).copied()
    }

    /// Whether `position` is the last use of `buffer`.
    pub fn is_last_use(&self, buffer: usize, position: usize) -> bool {
        self.uses(buffer).last() == Some(&position)
    }
}
