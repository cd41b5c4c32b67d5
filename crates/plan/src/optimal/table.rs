//! The options every service has on every GPU model of the fleet (the
//! table the searches choose from): built within limits, only the cheapest
//! mix once the time is up, widened for the local search, and indexed by
//! choices.

use std::time::Instant;

use crate::error::PlanError;
use crate::fleet_model::FleetModel;
use crate::options::{service_options, Mix, OptionLimits, ServiceOptions};
use crate::problem::Problem;

/// Mixes per service and GPU model for the local search: a few compute
/// slices above the cheapest, at most this many.
const HEURISTIC_LIMITS: OptionLimits = OptionLimits { extra_gpcs: 3, max_mixes: 24 };

/// The cheapest mix only: what a service gets once the time is up.
pub(super) const CHEAPEST_ONLY: OptionLimits = OptionLimits { extra_gpcs: 0, max_mixes: 1 };

/// A choice of one service: a GPU model (fleet index) and a mix on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Choice {
    pub model: usize,
    pub mix: usize,
}

/// The options of every service on every GPU model: `[model][service]`.
pub(super) type OptionTable = Vec<Vec<Option<ServiceOptions>>>;

/// `true` once `deadline` has passed.
pub(super) fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|deadline| Instant::now() >= deadline)
}

/// Options of every service on every model of the fleet, within `limits`
/// (only the cheapest mix for services reached after `deadline`). A service
/// that no model can serve is an error (the most telling one: an unmeetable
/// SLO before a missing profile).
pub(super) fn option_table(
    request: &Problem<'_>,
    limits: OptionLimits,
    deadline: Option<Instant>,
) -> Result<OptionTable, PlanError> {
    let mut table: OptionTable = vec![Vec::with_capacity(request.services.len()); request.fleet.len()];
    let mut unservable = Vec::new();
    for slo in request.services {
        request.check_cancelled()?;
        let limits = if past(deadline) { CHEAPEST_ONLY } else { limits };
        let mut failure = None;
        for (m, offer) in request.fleet.iter().enumerate() {
            let options = request
                .profile(slo, offer.model)
                .and_then(|profile| service_options(profile, slo, request.judge(), request.max_procs, limits));
            match options {
                Ok(options) => table[m].push(Some(options)),
                Err(error) => {
                    if failure.is_none() || matches!(error, PlanError::Unmeetable(_)) {
                        failure = Some(error);
                    }
                    table[m].push(None);
                }
            }
        }
        if table.iter().all(|options| options.last().is_some_and(Option::is_none)) {
            unservable.extend(failure);
        }
    }
    PlanError::all(unservable)?;
    Ok(table)
}

/// The options of every service within [`HEURISTIC_LIMITS`], keeping the
/// mixes of `table` (and the choices of `chosen` pointing at them).
pub(super) fn widen(
    request: &Problem<'_>,
    table: OptionTable,
    chosen: Option<&mut Vec<Choice>>,
    deadline: Option<Instant>,
) -> Result<OptionTable, PlanError> {
    let mut wide = option_table(request, HEURISTIC_LIMITS, deadline)?;
    let mut moved: Vec<Vec<Vec<usize>>> = Vec::with_capacity(table.len());
    for (narrow, wider) in table.into_iter().zip(&mut wide) {
        let per_service = narrow
            .into_iter()
            .zip(wider.iter_mut())
            .map(|(narrow, wider)| match (narrow, wider) {
                (Some(narrow), Some(wider)) => narrow.mixes.into_iter().map(|mix| mix_index(wider, mix)).collect(),
                _ => Vec::new(),
            })
            .collect();
        moved.push(per_service);
    }
    for (service, choice) in chosen.into_iter().flat_map(|c| c.iter_mut().enumerate()) {
        choice.mix = moved[choice.model][service][choice.mix];
    }
    Ok(wide)
}

/// The index of `mix` among a service's options on a model, added if new.
pub(super) fn mix_index(options: &mut ServiceOptions, mix: Mix) -> usize {
    match options.mixes.iter().position(|m| m.counts == mix.counts) {
        Some(index) => index,
        None => {
            options.mixes.push(mix);
            options.mixes.len() - 1
        }
    }
}

/// Every (model, mix) choice of every service.
pub(super) fn choice_lists(models: &[FleetModel], table: &OptionTable) -> Vec<Vec<Choice>> {
    let services = table.first().map_or(0, Vec::len);
    (0..services)
        .map(|s| {
            (0..models.len())
                .filter_map(|m| table[m][s].as_ref().map(|o| (m, o)))
                .flat_map(|(model, options)| (0..options.mixes.len()).map(move |mix| Choice { model, mix }))
                .collect()
        })
        .collect()
}
