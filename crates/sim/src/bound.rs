//! Schedule-independent bounds and Johnson's rule.
//!
//! [`lower_bound_ns`] holds for every schedule and policy of a trace:
//! - compute side: nothing computes before the first operation's buffers
//!   arrive, so the cheapest client's first copy-in plus all compute;
//! - copy side: every distinct buffer is copied in at least once on the one
//!   host-to-device engine, and an operation that uses the last copy
//!   computes after it, so all those copies plus the smallest compute of an
//!   operation with buffers.
//!
//! On a one-pass trace (one operation per client, distinct buffers) this is
//! `max(Σ transfer + min compute, min transfer + Σ compute)`. Write-backs
//! are ignored, which keeps it a valid bound.
//!
//! Every sum here is at most the trace's total time, which
//! [`Trace::validate`] keeps within `u64` nanoseconds.
//!
//! [`johnson`] treats a one-pass trace as a two-machine flow shop (copy in,
//! then compute) with unlimited memory and returns Johnson's optimal order
//! and its makespan.

use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::policy::Policies;
use crate::trace::{Operation, Trace};

/// Johnson's order for a one-pass trace and its flow-shop makespan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JohnsonPlan {
    /// Client ids in Johnson's order (a valid schedule).
    pub order: Vec<usize>,
    /// Makespan of that order with unlimited memory.
    pub makespan_ns: u64,
}

/// A lower bound on the makespan of any schedule of `trace` under any
/// policy (see the module documentation).
pub fn lower_bound_ns(trace: &Trace) -> Result<u64, SimError> {
    trace.validate()?;
    Ok(unchecked_lower_bound_ns(trace))
}

/// A lower bound on the makespan of any schedule of `trace` under
/// `policies` that also counts what memory forces (never below
/// [`lower_bound_ns`]; the arguments are in `crates/sim/src/memory_bound.rs`):
///
/// - the compute engine's waits at the client switches every schedule has;
/// - memory × time: no more than the GPU's memory is held at any instant,
///   and every operation holds its working set while it computes, every
///   buffer its bytes while it is first copied in and, when data is
///   released after its last use, every dirty buffer while it is written
///   back.
pub fn memory_lower_bound_ns(trace: &Trace, policies: Policies) -> Result<u64, SimError> {
    trace.validate()?;
    let compute_side_ns = first_copy_ns(trace)
        .saturating_add(compute_ns(trace))
        .saturating_add(crate::memory_bound::switch_wait_ns(trace));
    let area_ns = crate::memory_bound::memory_time_ns(trace, policies);
    Ok(unchecked_lower_bound_ns(trace).max(compute_side_ns).max(area_ns))
}

fn compute_ns(trace: &Trace) -> u64 {
    trace.clients.iter().flat_map(|c| &c.operations).map(Operation::compute_ns).sum()
}

/// The cheapest copy-in of any client's first operation.
fn first_copy_ns(trace: &Trace) -> u64 {
    trace.clients.iter().map(|c| trace.gpu.fetch_ns(&c.operations[0])).min().unwrap_or(0)
}

fn unchecked_lower_bound_ns(trace: &Trace) -> u64 {
    let ops = || trace.clients.iter().flat_map(|c| &c.operations);
    let compute_ns = compute_ns(trace);
    let first_copy_ns = first_copy_ns(trace);
    let distinct_copy_ns: u64 = trace.distinct_buffers().map(|b| trace.gpu.h2d_ns(b.bytes)).sum();
    let last_compute_ns = ops().filter(|op| !op.buffers.is_empty()).map(Operation::compute_ns).min().unwrap_or(0);
    let copy_side_ns = if distinct_copy_ns == 0 { 0 } else { distinct_copy_ns + last_compute_ns };
    (first_copy_ns + compute_ns).max(copy_side_ns)
}

/// Johnson's rule for a one-pass trace: clients whose copy is shorter than
/// their compute first, by increasing copy time; then the rest by
/// decreasing compute time (ties by client id).
pub fn johnson(trace: &Trace) -> Result<JohnsonPlan, SimError> {
    trace.validate()?;
    let mut jobs = Vec::with_capacity(trace.clients.len());
    for (id, client) in trace.clients.iter().enumerate() {
        let [op] = client.operations.as_slice() else {
            return Err(SimError::NotOnePass { client: client.name.clone(), operations: client.operations.len() });
        };
        jobs.push((id, trace.gpu.fetch_ns(op), op.compute_ns()));
    }
    let (mut first, mut second): (Vec<_>, Vec<_>) = jobs.iter().copied().partition(|&(_, t, c)| t < c);
    first.sort_by_key(|&(id, t, _)| (t, id));
    second.sort_by_key(|&(id, _, c)| (std::cmp::Reverse(c), id));
    let (mut copy_end_ns, mut compute_end_ns) = (0u64, 0u64);
    let mut order = Vec::with_capacity(jobs.len());
    for (id, t, c) in first.into_iter().chain(second) {
        copy_end_ns += t;
        compute_end_ns = compute_end_ns.max(copy_end_ns) + c;
        order.push(id);
    }
    Ok(JohnsonPlan { order, makespan_ns: compute_end_ns })
}
