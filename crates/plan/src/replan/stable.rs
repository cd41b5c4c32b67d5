//! The stable plan: rounds of keeping the inherited layouts, moving
//! segments within them, planning the residual and absorbing it, with the
//! kept GPUs that waste the most compute dissolved while the plan is over
//! the GPU bound.

use std::collections::{BTreeSet, HashMap};

use tessera_core::Plan;

use super::absorb::absorb_new_gpus;
use super::assemble::assemble;
use super::candidates::Candidates;
use super::fill::{assign_leftovers, fill_deficits, release_over_provisioned};
use super::position::GpuPosition;
use super::residual::plan_residual;
use super::work::{Ledger, WorkGpu};
use crate::error::PlanError;
use crate::problem::Problem;

/// Rounds of dissolving kept GPUs before the stable plan gives up (each
/// dissolves twice as many as the one before).
const MAX_DISSOLVE_ROUNDS: usize = 8;

/// The stable plan: inherit, fill, plan the residual, and dissolve the most
/// wasteful kept GPUs while over `bound`.
pub(super) fn stable_plan(
    request: &Problem<'_>,
    inherited: &[WorkGpu],
    bound: u64,
    current: &Plan,
    removed: &[GpuPosition],
) -> Result<Plan, PlanError> {
    let mut dissolved: BTreeSet<usize> = BTreeSet::new();
    let mut spread = false;
    for round in 0.. {
        let (gpus, kept) = build(request, inherited, &dissolved, spread)?;
        let over = (gpus.len() as u64).saturating_sub(bound);
        let remaining: Vec<usize> = (0..inherited.len()).filter(|i| !dissolved.contains(i)).collect();
        if over == 0 || remaining.is_empty() || round > MAX_DISSOLVE_ROUNDS {
            return Ok(assemble(request, gpus, current, removed));
        }
        if !spread {
            spread = true;
            continue;
        }
        let ledger = Ledger::of(request.services, &gpus);
        let mut by_waste: Vec<(u32, usize)> =
            remaining.iter().map(|&i| (kept.get(&i).map_or(u32::MAX, |&g| waste(&gpus[g], &ledger)), i)).collect();
        by_waste.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        // As many as are over the bound, doubling each round.
        let count = (over as usize).saturating_mul(1 << (round - 1).min(16));
        dissolved.extend(by_waste.iter().take(count).map(|&(_, i)| i));
    }
    unreachable!("the loop returns")
}

/// The stable plan's first round within the inherited instances alone:
/// segments move between them (steps 1 and 3 of the module
/// documentation), nothing is planned on new GPUs and nothing dissolved;
/// a free instance nobody can run is destroyed and a GPU left with
/// nothing to run given back, as in every round. Fails when a service is
/// still short.
pub(super) fn within_layouts(
    request: &Problem<'_>,
    inherited: &[WorkGpu],
    current: &Plan,
    removed: &[GpuPosition],
) -> Result<Plan, PlanError> {
    let mut gpus = inherited.to_vec();
    let mut candidates = Candidates::new(request);
    release_over_provisioned(request, &mut gpus, &mut candidates);
    fill_deficits(request, &mut gpus, &mut candidates);
    let ledger = Ledger::of(request.services, &gpus);
    let short: Vec<&str> = (request.services.iter().enumerate())
        .filter(|&(service, _)| ledger.deficit(service) > 0.0)
        .map(|(_, slo)| slo.service.as_str())
        .collect();
    if !short.is_empty() {
        return Err(PlanError::NotWithinLayouts { short: short.join(", ") });
    }
    assign_leftovers(request, &mut gpus, &mut candidates);
    gpus.retain(|gpu| gpu.slots.iter().any(|slot| slot.segment.is_some()));
    Ok(assemble(request, gpus, current, removed))
}

/// Compute slices of `gpu` that serve nothing needed: unused slices, free
/// instances, and segments whose services can spare them one at a time.
fn waste(gpu: &WorkGpu, ledger: &Ledger) -> u32 {
    let slices = u32::from(gpu.model.spec().compute_slices);
    let spare: u32 = gpu
        .slots
        .iter()
        .filter(|slot| slot.segment.is_none_or(|s| ledger.can_spare(s.service, s.point.throughput_rps)))
        .map(|slot| u32::from(slot.placement.profile.compute_slices))
        .sum();
    slices.saturating_sub(gpu.used_gpcs()) + spare
}

/// One round of the stable plan with the inherited GPUs of `dissolved`
/// emptied (new GPUs spread over several kept ones with `spread`): the
/// GPUs, and where each surviving inherited GPU went.
fn build(
    request: &Problem<'_>,
    inherited: &[WorkGpu],
    dissolved: &BTreeSet<usize>,
    spread: bool,
) -> Result<(Vec<WorkGpu>, HashMap<usize, usize>), PlanError> {
    let mut gpus: Vec<WorkGpu> =
        inherited.iter().enumerate().filter(|(i, _)| !dissolved.contains(i)).map(|(_, gpu)| gpu.clone()).collect();
    let mut candidates = Candidates::new(request);
    release_over_provisioned(request, &mut gpus, &mut candidates);
    fill_deficits(request, &mut gpus, &mut candidates);
    let kept_count = gpus.len();
    gpus.extend(plan_residual(request, &gpus)?);
    absorb_new_gpus(&mut gpus, kept_count, spread);
    assign_leftovers(request, &mut gpus, &mut candidates);
    // Inherited GPUs keep their order, so map them back before dropping.
    let survivors: Vec<usize> = (0..inherited.len()).filter(|i| !dissolved.contains(i)).collect();
    let mut kept = HashMap::new();
    let mut result = Vec::with_capacity(gpus.len());
    for (position, gpu) in gpus.into_iter().enumerate() {
        if gpu.slots.iter().all(|s| s.segment.is_none()) {
            continue;
        }
        if position < kept_count {
            kept.insert(survivors[position], result.len());
        }
        result.push(gpu);
    }
    Ok((result, kept))
}
