//! The work GPUs made a plan: kept GPUs at their positions, new ones at
//! positions given back, carrying the running plan's node numbering,
//! cluster names and images.

use std::collections::HashSet;

use tessera_core::{GpuAssignment, GpuModel, InstanceAssignment, Plan};

use super::position::GpuPosition;
use super::work::WorkGpu;
use crate::assemble::{instance_at, plan_of};
use crate::problem::Problem;

/// The work GPUs as a plan: kept GPUs at their positions, new ones at the
/// positions of given-back GPUs of their model first (never `removed`
/// ones), then after the last.
pub(super) fn assemble(request: &Problem<'_>, gpus: Vec<WorkGpu>, current: &Plan, removed: &[GpuPosition]) -> Plan {
    let gpus_per_node = current.gpus_per_node.max(1);
    let slot_of = |p: GpuPosition| u64::from(p.node) * u64::from(gpus_per_node) + u64::from(p.index);
    let taken: HashSet<GpuPosition> = gpus.iter().filter_map(|g| g.position).collect();
    let mut free: Vec<(GpuModel, GpuPosition)> = current
        .gpus
        .iter()
        .map(|g| (g.gpu_model, GpuPosition { node: g.node, index: g.index }))
        .filter(|(_, p)| !taken.contains(p) && !removed.contains(p))
        .collect();
    let mut next =
        current.gpus.iter().map(|g| slot_of(GpuPosition { node: g.node, index: g.index }) + 1).max().unwrap_or(0);
    let mut assignments: Vec<GpuAssignment> = Vec::with_capacity(gpus.len());
    for gpu in gpus {
        let position = gpu.position.unwrap_or_else(|| {
            if let Some(at) = free.iter().position(|(model, _)| *model == gpu.model) {
                return free.remove(at).1;
            }
            let position = GpuPosition {
                node: (next / u64::from(gpus_per_node)) as u32,
                index: (next % u64::from(gpus_per_node)) as u32,
            };
            next += 1;
            position
        });
        let mut instances: Vec<InstanceAssignment> = gpu
            .slots
            .iter()
            .filter_map(|slot| Some(instance_at(request, gpu.model, &slot.placement, &slot.segment?)))
            .collect();
        instances.sort_by(|a, b| b.size.cmp(&a.size).then(a.start.cmp(&b.start)));
        assignments.push(GpuAssignment {
            node: position.node,
            index: position.index,
            gpu_model: gpu.model,
            instances,
            shared: Vec::new(),
        });
    }
    assignments.sort_by_key(|g| (g.node, g.index));
    finish_plan(request, current, assignments, "replan")
}

/// A plan of `gpus` for `request`, carrying the current plan's node
/// numbering, cluster names and images.
fn finish_plan(request: &Problem<'_>, current: &Plan, gpus: Vec<GpuAssignment>, strategy: &str) -> Plan {
    let nodes_named = gpus.iter().all(|g| (g.node as usize) < current.node_names.len());
    Plan {
        node_names: if nodes_named { current.node_names.clone() } else { Vec::new() },
        images: current.images.clone(),
        ..plan_of(request, gpus, strategy, current.gpus_per_node.max(1))
    }
}
