//! The chosen mixes made a plan: packed onto each model's GPUs, checked
//! against the ceiling and the fleet's limits, never worse than `parva`
//! under its rule, with the optimality the bound proves.

use std::collections::VecDeque;

use tessera_core::{GpuModel, Optimality, Plan, SizeCounts};

use super::table::{Choice, OptionTable};
use crate::allocate::Segment;
use crate::assemble::build_plan;
use crate::bound::round_up;
use crate::error::PlanError;
use crate::fleet_model::FleetModel;
use crate::latency::LatencyRule;
use crate::parva::plan_parva;
use crate::problem::Problem;

/// Builds the plan of `choice`, checks the ceiling and the fleet limits,
/// and under the `parva` rule on one model falls back to the `parva`
/// strategy's plan if it is smaller (possible only when the search was cut
/// short), so `optimal` is never worse. `lower_bound` is the proven bound
/// (the optimum itself when the exact search finished).
pub(super) fn finish(
    request: &Problem<'_>,
    models: &[FleetModel],
    table: &OptionTable,
    choice: &[Choice],
    lower_bound: f64,
) -> Result<Plan, PlanError> {
    let mut plan = assemble(request, models, table, choice);
    if request.rule == LatencyRule::Parva && models.len() == 1 {
        if let Ok(parva) = plan_parva(request) {
            if parva.gpu_count < plan.gpu_count {
                plan = Plan { strategy: "optimal".to_string(), ..parva };
            }
        }
    }
    request.check_plan_size(plan.gpu_count)?;
    if let Some(over) = plan.fleet.iter().find(|f| f.limit.is_some_and(|limit| f.gpus > limit)) {
        let limit = over.limit.expect("limited");
        let gpu = over.gpu_model.to_string();
        // On one model the bound is in whole GPUs of it.
        if models.len() == 1 && round_up(lower_bound) > limit {
            return Err(PlanError::NoPlanWithinLimits { gpus: gpu, needed: round_up(lower_bound), allowed: limit });
        }
        return Err(PlanError::LimitsNotMet { gpu, needed: over.gpus, limit });
    }
    let (objective, value) =
        if models.len() == 1 { ("gpus", plan.gpu_count as f64) } else { ("cost", plan.total_cost) };
    let tolerance = 1e-9 * value.max(1.0);
    plan.optimality = Some(Optimality {
        objective: objective.to_string(),
        value,
        lower_bound,
        proven_optimal: value <= lower_bound + tolerance,
        gap: if lower_bound > 0.0 { (value - lower_bound).max(0.0) / lower_bound } else { 0.0 },
    });
    Ok(plan)
}

/// Packs each model's chosen mixes onto its GPUs and builds the plan.
fn assemble(request: &Problem<'_>, models: &[FleetModel], table: &OptionTable, choice: &[Choice]) -> Plan {
    let mut gpus: Vec<(GpuModel, Vec<Segment>)> = Vec::new();
    for (m, model) in models.iter().enumerate() {
        let mut counts = SizeCounts::EMPTY;
        let mut queues: [VecDeque<Segment>; 8] = Default::default();
        for (service, c) in choice.iter().enumerate().filter(|(_, c)| c.model == m) {
            let mix = &table[m][service].as_ref().expect("chosen options exist").mixes[c.mix];
            counts = counts.plus(&mix.counts);
            for &(point, n) in &mix.parts {
                let queue = &mut queues[usize::from(point.config.size_gpcs)];
                queue.extend(std::iter::repeat_n(Segment { service, point }, n as usize));
            }
        }
        for gpu in model.packer.pack(&counts) {
            let segments = gpu
                .sizes_desc()
                .map(|size| queues[usize::from(size)].pop_front().expect("the packing holds every segment"))
                .collect();
            gpus.push((model.offer.model, segments));
        }
    }
    build_plan(request, gpus, "optimal")
}
