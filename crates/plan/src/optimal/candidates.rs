//! The mixes the relaxation's prices point at, shared by the rounding and
//! the branch and bound: the search's [`Context`], a service's choice for
//! given instances, and every mix priced within a room of the service's
//! cheapest cover.

use std::time::Instant;

use tessera_core::SizeCounts;

use super::bounds::COST_TOLERANCE;
use super::table::{mix_index, Choice, OptionTable};
use crate::bound::PriceSpace;
use crate::error::PlanError;
use crate::fleet_model::FleetModel;
use crate::options::{mix_with_counts, priced_mixes};
use crate::problem::Problem;
use crate::round::Candidate;

/// Most mixes per service and model in the branch and bound.
const BRANCH_MIXES: usize = 2_000;

/// Most mixes of all services together in the branch and bound.
const BRANCH_CANDIDATES: usize = 200_000;

/// Per service, the mixes the branch and bound chooses from.
type Candidates = Vec<Vec<Candidate>>;

/// What the rounding and the branch and bound share.
pub(super) struct Context<'a> {
    pub request: &'a Problem<'a>,
    pub models: &'a [FleetModel],
    pub space: &'a PriceSpace,
    /// The relaxation's prices.
    pub prices: &'a [f64],
    /// Per service and model, its cheapest cover's cost at those prices.
    pub relaxed: &'a [Vec<Option<f64>>],
    /// When the search must stop.
    pub deadline: Option<Instant>,
}

impl Context<'_> {
    /// The price of one instance per size on `model`, in its cost.
    fn size_prices(&self, model: usize) -> [f64; 8] {
        let mut prices = [0.0; 8];
        for (g, price) in prices.iter_mut().enumerate().skip(1) {
            *price = self.space.price_of(self.prices, model, &SizeCounts::EMPTY.with(g as u8));
        }
        prices
    }

    /// The least cost of a service's cheapest cover over the models.
    fn cheapest(&self, service: usize) -> f64 {
        self.relaxed[service].iter().flatten().copied().fold(f64::INFINITY, f64::min)
    }
}

/// A choice for `service` with the instances `counts` on `model`: its mix
/// if it is a real one (added to the options if new); else the service's
/// cheapest choice at the relaxation's prices.
pub(super) fn choice_for(
    context: &Context<'_>,
    table: &mut OptionTable,
    service: usize,
    model: usize,
    counts: &SizeCounts,
) -> Choice {
    let request = context.request;
    let slo = &request.services[service];
    if let Some(options) = table[model][service].as_mut() {
        if let Some(mix) = options.mixes.iter().position(|m| m.counts == *counts) {
            return Choice { model, mix };
        }
        let profile = request.profile(slo, request.fleet[model].model).ok();
        if let Some(mix) = profile.and_then(|p| mix_with_counts(p, slo, request.judge(), request.max_procs, counts)) {
            return Choice { model, mix: mix_index(options, mix) };
        }
    }
    let mut cheapest: Option<(f64, Choice)> = None;
    for (m, options) in table.iter().enumerate() {
        for (index, mix) in options[service].iter().flat_map(|o| o.mixes.iter().enumerate()) {
            let price = context.space.price_of(context.prices, m, &mix.counts);
            if cheapest.is_none_or(|(best, _)| price < best) {
                cheapest = Some((price, Choice { model: m, mix: index }));
            }
        }
    }
    cheapest.expect("every service has options on some model").1
}

/// Every real mix of `service` whose price at the relaxation's prices is at
/// most `room` above its cheapest cover, at most `max_mixes` per model,
/// added to the options; and whether none was left out.
pub(super) fn candidates_within(
    context: &Context<'_>,
    table: &mut OptionTable,
    service: usize,
    room: f64,
    max_mixes: usize,
) -> Result<(Vec<Candidate>, bool), PlanError> {
    let request = context.request;
    let slo = &request.services[service];
    let most = context.cheapest(service) + room.max(0.0);
    let mut candidates = Vec::new();
    let mut complete = true;
    for (m, offer) in request.fleet.iter().enumerate() {
        let Some(options) = table[m][service].as_mut() else { continue };
        // A cover never costs more than the real mix it relaxes.
        let most_here = most + COST_TOLERANCE * most.abs().max(1.0);
        if context.relaxed[service][m].is_none_or(|cheapest| cheapest > most_here) {
            continue;
        }
        let profile = request.profile(slo, offer.model)?;
        let found =
            priced_mixes(profile, slo, request.judge(), request.max_procs, context.size_prices(m), most_here, max_mixes)?;
        complete &= found.complete_up_to >= most_here;
        for mix in found.mixes {
            let counts = mix.counts;
            candidates.push(Candidate { model: m, mix: mix_index(options, mix), counts });
        }
    }
    Ok((candidates, complete))
}

/// The candidates of the branch and bound: per service, every mix whose
/// price at the relaxation's prices exceeds its cheapest cover's by at most
/// `room`; and whether the lists are complete (no mix left out by the
/// caps). `None` when there are too many to search.
pub(super) fn branch_candidates(
    context: &Context<'_>,
    table: &mut OptionTable,
    room: f64,
) -> Result<Option<(Candidates, bool)>, PlanError> {
    let mut all = Vec::with_capacity(context.request.services.len());
    let mut complete = true;
    let mut total = 0;
    for service in 0..context.request.services.len() {
        let (candidates, whole) = candidates_within(context, table, service, room, BRANCH_MIXES)?;
        total += candidates.len();
        if total > BRANCH_CANDIDATES || candidates.is_empty() {
            return Ok(None);
        }
        complete &= whole;
        all.push(candidates);
    }
    Ok(Some((all, complete)))
}
