//! What the `optimal` strategy proves its plans against: the
//! linear-programming relaxation (see [`crate::bound`]) over every
//! service's covers, the compute bound, the best of them rounded up to a
//! cost a plan can have, and the proof that a mixed fleet's limited models
//! are too small.

use std::time::Instant;

use tessera_core::GpuModel;

use super::table::{option_table, OptionTable, CHEAPEST_ONLY};
use crate::bound::{round_up, solve, CostGrid, PriceSpace};
use crate::cover::{cover_items, CoverPricing};
use crate::error::PlanError;
use crate::fleet_model::FleetModel;
use crate::problem::Problem;

/// Relative tolerance of cost comparisons.
pub(super) const COST_TOLERANCE: f64 = 1e-9;

/// The linear-programming bound of a request (see
/// [`relaxation_bound`](crate::relaxation_bound)).
#[derive(Debug, Clone, PartialEq)]
pub struct RelaxationBound {
    /// No plan uses fewer GPUs (one GPU model) or costs less (a fleet of
    /// several) than this; not rounded up.
    pub value: f64,
    /// `true` when `value` is the relaxation's optimum (within a relative
    /// 1e-9); `false` when the time limit stopped the solver first (`value`
    /// is then a bound below it).
    pub optimal: bool,
    /// The prices that prove it: (GPU model, instance size in compute
    /// slices, price in GPUs of that model). No maximal MIG layout of a
    /// model costs more than one GPU at these prices.
    pub prices: Vec<(GpuModel, u8, f64)>,
}

/// The optimum of the linear-programming relaxation of `request` (each
/// service a convex combination of covers, GPUs fractional per layout),
/// solved as the `optimal` strategy does, under the request's time limit.
pub fn relaxation_bound(request: &Problem<'_>) -> Result<RelaxationBound, PlanError> {
    request.check()?;
    let deadline = request.time_limit.and_then(|limit| Instant::now().checked_add(limit));
    // Only for its errors: every service must be servable somewhere.
    option_table(request, CHEAPEST_ONLY, None)?;
    let single = request.fleet.len() == 1;
    let fleet: Vec<(GpuModel, f64, Option<u64>)> =
        request.fleet.iter().map(|offer| (offer.model, if single { 1.0 } else { offer.cost }, offer.limit)).collect();
    let space = PriceSpace::new(&fleet);
    let relaxation = solve(&space, &cover_pricing(request), &[], &|_, _| false, deadline);
    let prices = space
        .labels()
        .into_iter()
        .zip(&relaxation.prices)
        .map(|((model, size), &price)| (fleet[model].0, size, price))
        .collect();
    Ok(RelaxationBound { value: relaxation.value, optimal: relaxation.converged(), prices })
}

/// The relaxation's pricing of every service: its rate and, per fleet
/// model with a profile, its cover items.
pub(super) fn cover_pricing(request: &Problem<'_>) -> CoverPricing {
    let services = request
        .services
        .iter()
        .map(|slo| {
            let per_model = request
                .fleet
                .iter()
                .enumerate()
                .map(|(m, offer)| {
                    let points = request
                        .profile(slo, offer.model)
                        .and_then(|p| request.judge().judged_points(p, slo, request.max_procs));
                    (m, points.map(|points| cover_items(&points, slo, request.rule)).unwrap_or_default())
                })
                .collect();
            (slo.rate_rps, per_model)
        })
        .collect();
    CoverPricing::new(services)
}

/// The compute bound: every service's fewest compute slices on its
/// cheapest model (in cost), in GPUs.
fn compute_bound(models: &[FleetModel], table: &OptionTable) -> f64 {
    let services = table.first().map_or(0, Vec::len);
    (0..services)
        .map(|s| {
            models
                .iter()
                .zip(table)
                .filter_map(|(m, options)| {
                    options[s].as_ref().map(|o| m.cost * f64::from(o.min_gpcs) / m.slices as f64)
                })
                .fold(f64::INFINITY, f64::min)
        })
        .sum()
}

/// The best lower bound on the objective: the relaxation's and the compute
/// bound, rounded up to a cost a plan can have (whole GPUs on one model).
pub(super) fn lower_bound(models: &[FleetModel], table: &OptionTable, relaxation: f64) -> f64 {
    match models {
        // Whole GPUs; the compute bound is exact in slices.
        [model] => {
            let slices: u64 = table[0].iter().flatten().map(|o| u64::from(o.min_gpcs)).sum();
            slices.div_ceil(model.slices).max(round_up(relaxation)) as f64
        }
        _ => {
            let grid = CostGrid::new(&models.iter().map(|m| (m.cost, m.offer.limit)).collect::<Vec<_>>());
            grid.round_up(compute_bound(models, table).max(relaxation))
        }
    }
}

/// Proves a mixed fleet too small: the services that only limited models
/// can serve need, by the compute bound and the relaxation's prices (each
/// model's in its own GPUs), more GPUs than those models' limits allow
/// together.
pub(super) fn limited_need(
    models: &[FleetModel],
    table: &OptionTable,
    relaxed: &[Vec<Option<f64>>],
) -> Result<(), PlanError> {
    let (mut compute, mut priced) = (0.0, 0.0);
    for (s, values) in relaxed.iter().enumerate() {
        let served = || models.iter().enumerate().filter(|(m, _)| table[*m][s].is_some());
        if served().any(|(_, m)| m.offer.limit.is_none()) {
            continue;
        }
        compute += served()
            .map(|(m, model)| f64::from(table[m][s].as_ref().expect("served").min_gpcs) / model.slices as f64)
            .fold(f64::INFINITY, f64::min);
        priced += served().filter_map(|(m, model)| values[m].map(|v| v / model.cost)).fold(f64::INFINITY, f64::min);
    }
    let needed = round_up(compute.max(priced));
    let limited: Vec<&FleetModel> = models.iter().filter(|m| m.offer.limit.is_some()).collect();
    let allowed: u64 = limited.iter().filter_map(|m| m.offer.limit).sum();
    if needed > allowed {
        let gpus: Vec<String> = limited.iter().map(|m| m.offer.model.to_string()).collect();
        return Err(PlanError::NoPlanWithinLimits { gpus: gpus.join(", "), needed, allowed });
    }
    Ok(())
}
