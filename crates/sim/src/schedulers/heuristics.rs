//! The constructive schedulers: Fifo, Johnson per round and Greedy, and
//! the client-by-client orders the genetic search also starts from.

use std::collections::HashMap;

use crate::trace::{Operation, Trace};

/// The number of rounds: the most operations any client has.
fn rounds(trace: &Trace) -> usize {
    trace.clients.iter().map(|c| c.operations.len()).max().unwrap_or(0)
}

/// The clients with an `r`-th operation, with that operation.
fn round(trace: &Trace, r: usize) -> impl Iterator<Item = (usize, &Operation)> {
    trace.clients.iter().enumerate().filter_map(move |(id, c)| c.operations.get(r).map(|op| (id, op)))
}

/// Round-robin over the clients, one round after another.
pub(crate) fn fifo_order(trace: &Trace) -> Vec<usize> {
    (0..rounds(trace)).flat_map(|r| round(trace, r).map(|(id, _)| id).collect::<Vec<_>>()).collect()
}

/// Johnson's rule applied to each round on its own: operations whose copy
/// is shorter than their compute first, by increasing copy time; then the
/// rest by decreasing compute time; ties by client id. On a one-pass trace
/// this is [`crate::johnson`]'s order.
pub(crate) fn johnson_order(trace: &Trace) -> Vec<usize> {
    let mut order = Vec::new();
    for r in 0..rounds(trace) {
        let jobs: Vec<(usize, u64, u64)> =
            round(trace, r).map(|(id, op)| (id, trace.gpu.fetch_ns(op), op.compute_ns())).collect();
        let (mut first, mut second): (Vec<_>, Vec<_>) = jobs.into_iter().partition(|&(_, t, c)| t < c);
        first.sort_by_key(|&(id, t, _)| (t, id));
        second.sort_by_key(|&(id, _, c)| (std::cmp::Reverse(c), id));
        order.extend(first.into_iter().chain(second).map(|(id, _, _)| id));
    }
    order
}

/// Each client's operations back to back (its data copied in once), the
/// clients in Johnson's order with a client's copy-in time (its first
/// operation's buffers) as the first machine and its total compute as the
/// second; ties by client id.
pub(crate) fn blocks_johnson_order(trace: &Trace) -> Vec<usize> {
    let jobs = trace.clients.iter().enumerate().map(|(id, c)| {
        (id, trace.gpu.fetch_ns(&c.operations[0]), c.operations.iter().map(Operation::compute_ns).sum::<u64>())
    });
    let (mut first, mut second): (Vec<_>, Vec<_>) = jobs.partition(|&(_, t, c)| t < c);
    first.sort_by_key(|&(id, t, _)| (t, id));
    second.sort_by_key(|&(id, _, c)| (std::cmp::Reverse(c), id));
    blocks(trace, first.into_iter().chain(second).map(|(id, _, _)| id))
}

/// Each client's operations back to back, the clients by increasing
/// largest working set (ties by client id): clients that leave room to
/// fetch the next one's data run while that is still possible.
pub(crate) fn blocks_by_working_set_order(trace: &Trace) -> Vec<usize> {
    let mut clients: Vec<(u64, usize)> = trace
        .clients
        .iter()
        .enumerate()
        .map(|(id, c)| (c.operations.iter().map(Operation::working_set_bytes).max().unwrap_or(0), id))
        .collect();
    clients.sort_unstable();
    blocks(trace, clients.into_iter().map(|(_, id)| id))
}

/// The clients in `order`, each repeated once per operation.
fn blocks(trace: &Trace, order: impl Iterator<Item = usize>) -> Vec<usize> {
    order.flat_map(|id| std::iter::repeat_n(id, trace.clients[id].operations.len())).collect()
}

/// The penalty used when an operation has nothing to copy (nanoseconds).
const EPSILON_NS: f64 = 1.0;

/// The design notes' weight-based greedy schedule, round by round.
///
/// For each client with an operation in the round: `idle` is the time to
/// copy in the operation's missing buffers at host-to-device bandwidth
/// (latency included, one copy per buffer), `reward = compute / (compute +
/// idle)` (1 when both are 0), `penalty = idle` (1 ns when 0) and `weight =
/// reward / penalty`. The round runs highest weight, lowest, second
/// highest, second lowest, … (ties by client id).
///
/// Approximation of what is resident: nothing before the first round; before
/// round `r + 1`, the buffers of round `r` walked from its last operation
/// back to its first, each kept if it still fits in GPU memory with those
/// already kept (newest first, as LRU would leave them). Data of older
/// rounds, ephemeral memory, write-backs and the policies are ignored.
pub fn greedy_order(trace: &Trace) -> Vec<usize> {
    let mut order = Vec::new();
    // (client, buffer name) -> bytes, resident at the start of the round.
    let mut resident: HashMap<(usize, &str), u64> = HashMap::new();
    for r in 0..rounds(trace) {
        let mut weighted: Vec<(f64, usize)> = round(trace, r)
            .map(|(id, op)| {
                let idle_ns: u64 = op
                    .buffers
                    .iter()
                    .filter(|b| !resident.contains_key(&(id, b.name.as_str())))
                    .map(|b| trace.gpu.h2d_ns(b.bytes))
                    .sum();
                let (compute, idle) = (op.compute_ns() as f64, idle_ns as f64);
                let reward = if compute + idle == 0.0 { 1.0 } else { compute / (compute + idle) };
                let penalty = if idle_ns == 0 { EPSILON_NS } else { idle };
                (reward / penalty, id)
            })
            .collect();
        weighted.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let (mut lo, mut hi) = (0, weighted.len());
        let mut round_order = Vec::with_capacity(weighted.len());
        while lo < hi {
            round_order.push(weighted[lo].1);
            lo += 1;
            if lo < hi {
                hi -= 1;
                round_order.push(weighted[hi].1);
            }
        }
        resident.clear();
        let mut used = 0u64;
        for &id in round_order.iter().rev() {
            for b in &trace.clients[id].operations[r].buffers {
                let key = (id, b.name.as_str());
                if !resident.contains_key(&key)
                    && used.checked_add(b.bytes).is_some_and(|u| u <= trace.gpu.memory_bytes)
                {
                    used += b.bytes;
                    resident.insert(key, b.bytes);
                }
            }
        }
        order.extend(round_order);
    }
    order
}
