//! The running plan's GPUs (less the drained or lost ones) as work GPUs:
//! each keeps its MIG layout, and each instance its segment where the
//! service still exists with the same model and may still run it.

use std::collections::{HashMap, HashSet};

use tessera_core::{Placement, Plan};

use super::candidates::Candidates;
use super::position::GpuPosition;
use super::work::{Slot, WorkGpu};
use crate::allocate::Segment;
use crate::error::PlanError;
use crate::problem::Problem;

/// The current plan's GPUs (less the removed ones) as work GPUs, each
/// instance keeping its segment where the service may still run it.
pub(super) fn inherit(plan: &Problem<'_>, current: &Plan, removed: &[GpuPosition]) -> Result<Vec<WorkGpu>, PlanError> {
    let positions: HashSet<GpuPosition> =
        current.gpus.iter().map(|g| GpuPosition { node: g.node, index: g.index }).collect();
    if let Some(missing) = removed.iter().find(|p| !positions.contains(p)) {
        return Err(PlanError::GpuNotInPlan { node: missing.node, index: missing.index, known: known_gpus(current) });
    }
    let index: HashMap<&str, usize> = plan.services.iter().enumerate().map(|(i, s)| (s.service.as_str(), i)).collect();
    let mut candidates = Candidates::new(plan);
    let mut gpus = Vec::with_capacity(current.gpus.len());
    for gpu in &current.gpus {
        let position = GpuPosition { node: gpu.node, index: gpu.index };
        if !plan.fleet.iter().any(|offer| offer.model == gpu.gpu_model) {
            return Err(PlanError::ForeignGpu {
                node: gpu.node,
                index: gpu.index,
                gpu: gpu.gpu_model.to_string(),
                fleet: plan.fleet.iter().map(|o| o.model.to_string()).collect::<Vec<_>>().join(", "),
            });
        }
        let mut slots = Vec::with_capacity(gpu.instances.len());
        for instance in &gpu.instances {
            let profile =
                gpu.gpu_model.spec().profile_by_name(&instance.profile).map_err(|_| PlanError::ForeignProfile {
                    node: gpu.node,
                    index: gpu.index,
                    gpu: gpu.gpu_model.to_string(),
                    profile: instance.profile.clone(),
                })?;
            let segment = index
                .get(instance.service.as_str())
                .filter(|&&service| plan.services[service].model == instance.model)
                .and_then(|&service| {
                    candidates.current(gpu.gpu_model, service, instance).map(|point| Segment { service, point })
                });
            slots.push(Slot { placement: Placement { profile, start: instance.start }, segment });
        }
        if !removed.contains(&position) {
            gpus.push(WorkGpu { model: gpu.gpu_model, position: Some(position), slots });
        }
    }
    Ok(gpus)
}

fn known_gpus(plan: &Plan) -> String {
    let mut names: Vec<String> = plan.gpus.iter().take(8).map(|g| format!("{}:{}", g.node, g.index)).collect();
    if plan.gpus.len() > names.len() {
        names.push(format!("… {} in all", plan.gpus.len()));
    }
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}
