//! The memory-aware lower bound: [`memory_lower_bound_ns`].
//!
//! [`crate::lower_bound_ns`] assumes the next client's data can always be
//! copied in while the compute engine works. With little memory it cannot:
//! while an operation `p` computes, its working set `W_p` (buffers and
//! scratch) is held, so at most `M − W_p` bytes of anything else are on the
//! GPU or on their way (`M` the GPU's memory; a copy takes its memory when
//! it starts). When the next operation `q` belongs to another client, its
//! buffers (`D_q` bytes, none shared with `p`'s client) must be whole on the
//! GPU when it starts, so at least `D_q − (M − W_p)` bytes are copied in
//! after `p` ends, and the compute engine waits for them. Likewise `p`'s
//! dirty buffers (`X_p` bytes, dirty from `p`'s end on, pinned until then)
//! hold memory until their write-back *ends*; `q` needs `W_q` bytes when it
//! starts, so at least `X_p + W_q − M` bytes are written back after `p`
//! ends, and the compute engine waits for that too. The wait between `p`
//! and `q` is therefore at least
//!
//! `g(p, q) = max(h2d(D_q + W_p − M), d2h(X_p + W_q − M))`
//!
//! (0 where the bytes are not positive; a copy time here is one copy's
//! latency plus the bytes at the engine's bandwidth, rounded down: the bytes
//! may come in several copies, each paying its own latency).
//!
//! **Which switches every schedule has.** Cut a schedule into blocks of
//! consecutive operations of one client. Each client's last block ends with
//! its last operation; except for the block that ends the schedule, it is
//! followed by a block of another client, whose first operation is one of
//! that client's operations. So the last operations of all clients but one
//! are each followed by a *different* block, and a client with `n`
//! operations has at most `n` blocks. The least total wait over such
//! assignments — a transportation problem from each client's last operation
//! (its `W` and `X`) to the block slots of the others (each slot with the
//! smallest `D` and `W` of any of that client's operations), one tail free —
//! is solved exactly as a min-cost flow. Other waits are at least 0, the
//! first operation waits for its own copy-in, and every operation computes,
//! so the makespan is at least
//!
//! `min first copy-in + Σ compute + that least total wait`.
//!
//! The bound is the larger of this and [`crate::lower_bound_ns`]. It holds for
//! every schedule and every policy (no policy can copy faster, hold more or
//! free a dirty buffer before its write-back ends). Relaxations, each of
//! which can only lower it: a tail may be assigned to its own client's slot,
//! slots take their client's smallest operation, waits the engines could
//! not overlap are taken as overlapped, write-backs after the last operation
//! are not counted, and when there are more than [`MAX_CLASSES`] distinct
//! tails or slots their sizes are rounded *down* onto a coarser grid (the
//! wait only grows with each size).

use crate::policy::{Policies, Prefetch, Retention};
use crate::trace::{Gpu, Operation, Trace};

/// Most distinct tail (and slot) kinds the flow is solved over; beyond it
/// sizes are rounded down onto a grid of `GRID_LEVELS` per dimension.
const MAX_CLASSES: usize = 64;
const GRID_LEVELS: usize = 8;

/// The least time the compute engine must wait at client switches, summed
/// over every schedule's mandatory switches (see the module documentation).
/// `trace` must be valid.
pub(crate) fn switch_wait_ns(trace: &Trace) -> u64 {
    let gpu = &trace.gpu;
    let mut tails: Vec<(u64, u64)> = Vec::with_capacity(trace.clients.len());
    let mut slots: Vec<((u64, u64), u64)> = Vec::with_capacity(trace.clients.len());
    for client in &trace.clients {
        let last = client.operations.last().expect("a valid trace has no empty client");
        tails.push((last.working_set_bytes(), dirty_bytes(last)));
        let data = client.operations.iter().map(data_bytes).min().unwrap_or(0);
        let working_set = client.operations.iter().map(Operation::working_set_bytes).min().unwrap_or(0);
        slots.push(((data, working_set), client.operations.len() as u64));
    }
    let tails = classes(tails.into_iter().map(|key| (key, 1)).collect());
    let slots = classes(slots);
    let cost = |(w_p, x_p): (u64, u64), (d_q, w_q): (u64, u64)| -> u64 {
        let copy_in = excess(d_q, w_p, gpu.memory_bytes).map_or(0, |bytes| floor_copy_ns(gpu, bytes, true));
        let write_back = excess(x_p, w_q, gpu.memory_bytes).map_or(0, |bytes| floor_copy_ns(gpu, bytes, false));
        copy_in.max(write_back)
    };
    let costs: Vec<Vec<u64>> = tails.iter().map(|&(t, _)| slots.iter().map(|&(s, _)| cost(t, s)).collect()).collect();
    let supply: Vec<u64> = tails.iter().map(|&(_, n)| n).collect();
    let mut capacity: Vec<u64> = slots.iter().map(|&(_, n)| n).collect();
    // The client that ends the schedule needs no successor: a free slot.
    capacity.push(1);
    let costs: Vec<Vec<u64>> = costs
        .into_iter()
        .map(|mut row| {
            row.push(0);
            row
        })
        .collect();
    transport(&supply, &capacity, &costs)
}

/// Memory × time: at every instant at most `M` bytes are held, so the
/// makespan is at least the byte-nanoseconds every run must hold, over
/// `M`. Every run holds, at separate times for any one buffer: each
/// operation's working set while it computes; each buffer's bytes while it
/// is first copied in (a whole copy holds them from its start; under
/// `Active`, chunks that arrive one after another hold at least half that:
/// `Σ (c_1 + … + c_i) c_i ≥ b² / 2`); and, when data is released after its
/// last use, each buffer some operation writes while it is written back
/// (its memory is free only when that copy ends). Copy times here leave
/// out the latency. `trace` must be valid.
pub(crate) fn memory_time_ns(trace: &Trace, policies: Policies) -> u64 {
    let gpu = &trace.gpu;
    let mut held: f64 = 0.0; // byte·ns
    for op in trace.clients.iter().flat_map(|c| &c.operations) {
        held += op.working_set_bytes() as f64 * op.compute_ns() as f64;
    }
    let copy_share = if policies.prefetch == Prefetch::Active { 0.5 } else { 1.0 };
    for client in &trace.clients {
        let mut seen = std::collections::HashMap::<&str, bool>::new();
        for buffer in client.operations.iter().flat_map(|op| &op.buffers) {
            *seen.entry(buffer.name.as_str()).or_default() |= buffer.dirty;
        }
        let sizes: std::collections::HashMap<&str, u64> =
            client.operations.iter().flat_map(|op| &op.buffers).map(|b| (b.name.as_str(), b.bytes)).collect();
        for (name, dirty) in seen {
            let bytes = sizes[name] as f64;
            held += copy_share * bytes * bytes * 1e9 / gpu.h2d_bytes_per_s;
            if dirty && policies.retention == Retention::ReleaseAfterLastUse {
                held += bytes * bytes * 1e9 / gpu.d2h_bytes_per_s;
            }
        }
    }
    // A hair below, so that float rounding never lifts it above the truth.
    (held / gpu.memory_bytes.max(1) as f64 * (1.0 - 1e-9)).floor() as u64
}

/// Bytes of an operation's persistent buffers.
fn data_bytes(op: &Operation) -> u64 {
    op.buffers.iter().map(|b| b.bytes).sum()
}

/// Bytes of the buffers an operation writes.
fn dirty_bytes(op: &Operation) -> u64 {
    op.buffers.iter().filter(|b| b.dirty).map(|b| b.bytes).sum()
}

/// `a + b − memory` when positive.
fn excess(a: u64, b: u64, memory: u64) -> Option<u64> {
    let over = u128::from(a) + u128::from(b);
    (over > u128::from(memory)).then(|| (over - u128::from(memory)) as u64)
}

/// One copy's latency plus `bytes` at the bandwidth, rounded down (and a
/// hair below, so that float rounding never lifts it above the engine's
/// per-copy ceilings summed).
fn floor_copy_ns(gpu: &Gpu, bytes: u64, host_to_device: bool) -> u64 {
    let bytes_per_s = if host_to_device { gpu.h2d_bytes_per_s } else { gpu.d2h_bytes_per_s };
    let transfer_ns = (bytes as f64 * 1e9 / bytes_per_s * (1.0 - 1e-12)).floor();
    gpu.copy_latency_ns.saturating_add(transfer_ns as u64)
}

/// Groups equal keys (summing their counts). With more than
/// [`MAX_CLASSES`] groups, each coordinate is first rounded down to one of
/// `GRID_LEVELS` levels taken from its sorted distinct values (the smallest
/// among them), so the result has at most `GRID_LEVELS²` groups.
fn classes(items: Vec<((u64, u64), u64)>) -> Vec<((u64, u64), u64)> {
    let grouped = group(items.iter().copied());
    if grouped.len() <= MAX_CLASSES {
        return grouped;
    }
    let levels = |pick: fn(&(u64, u64)) -> u64| {
        let mut values: Vec<u64> = items.iter().map(|(key, _)| pick(key)).collect();
        values.sort_unstable();
        values.dedup();
        let step = values.len().div_ceil(GRID_LEVELS);
        values.iter().step_by(step.max(1)).copied().collect::<Vec<u64>>()
    };
    let (first, second) = (levels(|k| k.0), levels(|k| k.1));
    let down = |levels: &[u64], value: u64| levels[levels.partition_point(|&l| l <= value) - 1];
    group(items.iter().map(|&((a, b), n)| ((down(&first, a), down(&second, b)), n)))
}

fn group(items: impl Iterator<Item = ((u64, u64), u64)>) -> Vec<((u64, u64), u64)> {
    let mut items: Vec<_> = items.collect();
    items.sort_unstable();
    let mut grouped: Vec<((u64, u64), u64)> = Vec::with_capacity(items.len());
    for (key, n) in items {
        match grouped.last_mut() {
            Some((last, count)) if *last == key => *count += n,
            _ => grouped.push((key, n)),
        }
    }
    grouped
}

/// The least cost of sending every unit of `supply` (one row each) to the
/// columns, at most `capacity[j]` units into column `j`, one unit from row
/// `i` to column `j` costing `costs[i][j]`. Successive shortest paths
/// (Bellman–Ford on the residual graph; the graphs here are small). The
/// total capacity must cover the supply.
fn transport(supply: &[u64], capacity: &[u64], costs: &[Vec<u64>]) -> u64 {
    let (rows, columns) = (supply.len(), capacity.len());
    let (source, sink) = (rows + columns, rows + columns + 1);
    let mut graph = Graph { edges: Vec::new(), out: vec![Vec::new(); rows + columns + 2] };
    for (i, &units) in supply.iter().enumerate() {
        graph.add(source, i, units, 0);
        for (j, &cost) in costs[i].iter().enumerate() {
            graph.add(i, rows + j, u64::MAX, i128::from(cost));
        }
    }
    for (j, &units) in capacity.iter().enumerate() {
        graph.add(rows + j, sink, units, 0);
    }
    let mut left: u64 = supply.iter().sum();
    let mut total: i128 = 0;
    while left > 0 {
        let Some((path, cost)) = graph.shortest_path(source, sink) else { break };
        let units = path.iter().map(|&e| graph.edges[e].capacity).min().unwrap_or(0).min(left);
        for &e in &path {
            graph.edges[e].capacity -= units;
            graph.edges[e ^ 1].capacity += units;
        }
        total += cost * i128::from(units);
        left -= units;
    }
    u64::try_from(total.max(0)).unwrap_or(u64::MAX)
}

struct Edge {
    to: usize,
    capacity: u64,
    cost: i128,
}

struct Graph {
    edges: Vec<Edge>,
    out: Vec<Vec<usize>>,
}

impl Graph {
    /// An edge and its residual twin (at index ^ 1).
    fn add(&mut self, from: usize, to: usize, capacity: u64, cost: i128) {
        self.out[from].push(self.edges.len());
        self.edges.push(Edge { to, capacity, cost });
        self.out[to].push(self.edges.len());
        self.edges.push(Edge { to: from, capacity: 0, cost: -cost });
    }

    /// The cheapest path with room from `from` to `to` (edge indices) and
    /// its cost.
    fn shortest_path(&self, from: usize, to: usize) -> Option<(Vec<usize>, i128)> {
        let nodes = self.out.len();
        let mut distance: Vec<Option<i128>> = vec![None; nodes];
        let mut via: Vec<Option<usize>> = vec![None; nodes];
        distance[from] = Some(0);
        for _ in 0..nodes {
            let mut changed = false;
            for node in 0..nodes {
                let Some(d) = distance[node] else { continue };
                for &e in &self.out[node] {
                    let edge = &self.edges[e];
                    if edge.capacity > 0 && distance[edge.to].is_none_or(|old| d + edge.cost < old) {
                        distance[edge.to] = Some(d + edge.cost);
                        via[edge.to] = Some(e);
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let cost = distance[to]?;
        let mut path = Vec::new();
        let mut node = to;
        while node != from {
            let e = via[node]?;
            path.push(e);
            node = self.edges[e ^ 1].to;
        }
        Some((path, cost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every assignment of rows to columns within capacity, by brute force.
    fn brute(supply: &[u64], capacity: &[u64], costs: &[Vec<u64>]) -> u64 {
        let units: Vec<usize> = supply.iter().enumerate().flat_map(|(i, &n)| vec![i; n as usize]).collect();
        fn go(k: usize, units: &[usize], left: &mut Vec<u64>, costs: &[Vec<u64>]) -> u64 {
            if k == units.len() {
                return 0;
            }
            let mut best = u64::MAX;
            for j in 0..left.len() {
                if left[j] > 0 {
                    left[j] -= 1;
                    best = best.min(costs[units[k]][j].saturating_add(go(k + 1, units, left, costs)));
                    left[j] += 1;
                }
            }
            best
        }
        go(0, &units, &mut capacity.to_vec(), costs)
    }

    #[test]
    fn transport_is_the_least_cost_assignment() {
        let mut rng = tessera_core::rng::SplitMix64::new(5);
        for _ in 0..200 {
            let rows = 1 + rng.below(3);
            let columns = 1 + rng.below(3);
            let supply: Vec<u64> = (0..rows).map(|_| 1 + rng.below(2) as u64).collect();
            let mut capacity: Vec<u64> = (0..columns).map(|_| rng.below(3) as u64).collect();
            let needed: u64 = supply.iter().sum::<u64>().saturating_sub(capacity.iter().sum());
            capacity[0] += needed;
            let costs: Vec<Vec<u64>> =
                (0..rows).map(|_| (0..columns).map(|_| rng.below(10) as u64).collect()).collect();
            assert_eq!(transport(&supply, &capacity, &costs), brute(&supply, &capacity, &costs));
        }
    }

    #[test]
    fn coarse_classes_round_every_size_down() {
        let items: Vec<((u64, u64), u64)> = (0..500u64).map(|i| ((i * 7 % 499, i * 13 % 491), 1)).collect();
        let coarse = classes(items.clone());
        assert!(coarse.len() <= GRID_LEVELS * GRID_LEVELS, "{}", coarse.len());
        // Each coordinate, sorted with multiplicity, only went down.
        let sorted = |list: &[((u64, u64), u64)], pick: fn(&(u64, u64)) -> u64| {
            let mut all: Vec<u64> =
                list.iter().flat_map(|&(key, n)| std::iter::repeat_n(pick(&key), n as usize)).collect();
            all.sort_unstable();
            all
        };
        for pick in [(|k: &(u64, u64)| k.0) as fn(&(u64, u64)) -> u64, |k| k.1] {
            let (before, after) = (sorted(&items, pick), sorted(&coarse, pick));
            assert_eq!(before.len(), after.len());
            assert!(after.iter().zip(&before).all(|(a, b)| a <= b));
            assert!(after.iter().zip(&before).any(|(a, b)| a < b), "something was rounded");
        }
        let few = classes(vec![((3, 4), 1), ((3, 4), 2), ((1, 9), 1)]);
        assert_eq!(few, vec![((1, 9), 1), ((3, 4), 3)]);
    }
}
