//! The `optimal` strategy: the fewest GPUs (or, for a fleet of several GPU
//! models, the lowest cost) that meet every SLO, with a proof or a measured
//! gap against a lower bound.
//!
//! **Objective**, lexicographic (see [`crate::objective`]): GPUs or cost;
//! then provisioned slack, the sum over services of provisioned / rate − 1;
//! then segments. Fleet limits (`count=`) must hold.
//!
//! **Model.** Each service chooses one GPU model of the fleet and one
//! [`Mix`] on it (how many segments of which configuration, see
//! [`crate::options`]). What the GPUs of a model must hold is the sum of the
//! multisets chosen on it, and [`Packer::min_gpus`] gives, exactly, the
//! fewest GPUs that hold it on that model's MIG lattice.
//!
//! **Bound.** Every service needs at least its cheapest mix's compute, and
//! at least its cheapest price under packing-aware instance prices (see
//! [`crate::bound`]); summed over services, either bounds the optimum. The
//! bound ignores the fleet's count limits, so it stays valid with them.
//!
//! **Search.** A local search starts from every service's cheapest choice
//! in compute and in price, and moves single services to other choices
//! while the objective improves. Limits constrain it: a start that puts more
//! GPUs on a limited model than its limit is first repaired, moving the
//! services that cost least to move per compute slice freed to their
//! cheapest choice on a model with room, and no move takes a model over its
//! limit. On one GPU model, for instances of up to
//! [`EXACT_SERVICE_LIMIT`] services within [`EXACT_GAP_GPUS`] of the bound,
//! a branch and bound ([`crate::branch`]) then explores every mix that could
//! still lead to fewer GPUs (a service may exceed its cheapest mix by at
//! most the compute the incumbent leaves unused). If it finishes, the GPU
//! count is proven optimal; under the time limit it stops with the best plan
//! found and the gap to the bound. A second, node-budgeted pass looks for
//! less slack and fewer segments among plans with that many GPUs.
//!
//! **Time.** The time limit bounds every phase: past it, the remaining
//! services get only their cheapest mixes, the price tuning and the local
//! search stop with what they have, and the exact search is skipped or cut
//! short.
//!
//! **Limits.** "The fleet is too small" is reported as proven when a bound
//! shows that the services only limited models can serve need more GPUs
//! than those limits allow (or, on one model, when the bound or the
//! finished exact search exceeds the limit); otherwise as "no plan within
//! the limits was found".
//!
//! Under `parva` the mixes cover every plan (one size's best configuration
//! dominates its others), so "proven optimal" holds over all plans. Under
//! `queueing` a mix runs one configuration per size, and the proof holds
//! over plans of that form.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tessera_core::{GpuModel, GpuOffer, Optimality, Packer, Plan, SizeCounts};

use crate::allocate::Segment;
use crate::assemble::build_plan;
use crate::bound::{price_of, round_up, service_price, tune_prices, PriceRegion, Prices};
use crate::branch::{BranchAndBound, Goal};
use crate::error::PlanError;
use crate::latency::LatencyRule;
use crate::objective::Objective;
use crate::options::{service_options, Mix, OptionLimits, ServiceOptions};
use crate::parva::plan_parva;
use crate::request::{usable_points, PlanRequest};

/// How long the search may run by default.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(10);

/// Largest instance (in services) the exact branch and bound is tried on.
pub const EXACT_SERVICE_LIMIT: usize = 400;

/// The exact search runs only when the heuristic is at most this many GPUs
/// above the lower bound (beyond that its option space explodes).
pub const EXACT_GAP_GPUS: u64 = 2;

/// Mixes per service and GPU model for the local search: a few compute
/// slices above the cheapest, at most this many.
const HEURISTIC_LIMITS: OptionLimits = OptionLimits { extra_gpcs: 3, max_mixes: 24 };

/// The cheapest mix only: what a service gets once the time is up.
const CHEAPEST_ONLY: OptionLimits = OptionLimits { extra_gpcs: 0, max_mixes: 1 };

/// Most mixes per service in the exact search.
const EXACT_MAX_MIXES: usize = 5_000;

/// Search nodes spent on tie-breaks among plans with the fewest GPUs.
const TIE_BREAK_NODES: u64 = 200_000;

/// One GPU model of the fleet, ready for planning.
struct FleetModel {
    offer: GpuOffer,
    /// The cost the search uses: 1 for a fleet of one model (GPUs are the
    /// objective), the offer's cost otherwise.
    cost: f64,
    packer: Packer,
    slices: u64,
    prices: Prices,
}

impl FleetModel {
    /// `true` when `gpus` of this model are within its limit, or no more
    /// than `current` (a model already over its limit may shrink).
    fn allows(&self, gpus: u64, current: u64) -> bool {
        self.offer.limit.is_none_or(|limit| gpus <= limit.max(current))
    }
}

/// A choice of one service: a GPU model (fleet index) and a mix on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Choice {
    model: usize,
    mix: usize,
}

/// The options of every service on every GPU model: `[model][service]`.
type OptionTable = Vec<Vec<Option<ServiceOptions>>>;

/// `true` once `deadline` has passed.
fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|deadline| Instant::now() >= deadline)
}

/// Plans `request` with the `optimal` strategy.
pub fn plan_optimal(request: &PlanRequest<'_>) -> Result<Plan, PlanError> {
    request.check()?;
    // A limit too far away to be an instant is no limit.
    let deadline = request.time_limit.and_then(|limit| Instant::now().checked_add(limit));
    let table = option_table(request, HEURISTIC_LIMITS, deadline)?;
    let single = request.fleet.len() == 1;
    let models: Vec<FleetModel> = request
        .fleet
        .iter()
        .zip(&table)
        .map(|(offer, options)| {
            let spec = offer.model.spec();
            let known: Vec<ServiceOptions> = options.iter().flatten().cloned().collect();
            FleetModel {
                offer: *offer,
                cost: if single { 1.0 } else { offer.cost },
                packer: Packer::new(offer.model),
                slices: u64::from(spec.compute_slices),
                prices: tune_prices(&PriceRegion::new(offer.model), spec.compute_slices, &known, deadline),
            }
        })
        .collect();
    let bounds = service_bounds(request, &models, &table)?;
    let lower_bound = lower_bound(&models, &table, &bounds);
    if !single {
        limited_need(&models, &bounds)?;
    }
    let choices = choice_lists(&models, &table);
    let search = LocalSearch { models: &models, table: &table, choices: &choices, deadline };
    let compute = |model: &FleetModel, mix: &Mix| model.cost * f64::from(mix.gpcs) / model.slices as f64;
    let price = |model: &FleetModel, mix: &Mix| model.cost * price_of(&model.prices, &mix.counts);
    let mut starts = vec![search.cheapest_start(compute, false), search.cheapest_start(price, false)];
    if models.iter().any(|m| m.offer.limit.is_some()) && models.iter().any(|m| m.offer.limit.is_none()) {
        // Also from the plans that leave the limited models empty wherever
        // an unlimited one can serve: within the limits from the start.
        starts.extend([search.cheapest_start(compute, true), search.cheapest_start(price, true)]);
    }
    let mut shortfall = None;
    let mut improved = Vec::new();
    for start in starts {
        // One model: fewer GPUs is the objective itself; nothing to move.
        match if single { Ok(start) } else { search.within_limits(start) } {
            Ok(start) => improved.push(search.improve(start)),
            Err(over) => shortfall = Some(over),
        }
    }
    let Some((choice, incumbent)) = improved.into_iter().reduce(|a, b| if b.1.better_than(&a.1) { b } else { a })
    else {
        let (model, gpus) = shortfall.expect("a start failed");
        let offer = &models[model].offer;
        return Err(PlanError::LimitsNotMet {
            gpu: offer.model.to_string(),
            needed: gpus,
            limit: offer.limit.expect("only limits fail"),
        });
    };

    let plain = |choice: &[Choice], bound| finish(request, &models, &table, choice, bound);
    if !single
        || request.services.len() > EXACT_SERVICE_LIMIT
        || incumbent.cost - lower_bound > EXACT_GAP_GPUS as f64
        || past(deadline)
    {
        return plain(&choice, lower_bound);
    }

    // One GPU model, close to the bound: search exactly. A plan with at most
    // the incumbent's GPUs leaves any service at most this many slices above
    // its cheapest mix.
    let model = &models[0];
    let min_gpcs: u64 = table[0].iter().flatten().map(|o| u64::from(o.min_gpcs)).sum();
    let extra = (incumbent.cost as u64 * model.slices).saturating_sub(min_gpcs).min(u64::from(u32::MAX)) as u32;
    let wide_limits = OptionLimits { extra_gpcs: extra, max_mixes: EXACT_MAX_MIXES };
    let wide = option_table(request, wide_limits, deadline)?;
    if past(deadline) {
        // The wide options may be cut short: no proof can come from them.
        return plain(&choice, lower_bound);
    }
    let wide_options: Vec<ServiceOptions> = wide[0].iter().map(|o| o.clone().expect("one model serves all")).collect();
    let complete = wide_options.iter().all(|o| o.mixes.len() < EXACT_MAX_MIXES);
    let branch = |incumbent, goal| {
        BranchAndBound::new(&wide_options, model.packer, model.slices, model.prices, incumbent, goal, deadline)
    };

    // Phase 1: the fewest GPUs, proven by exhausting the search.
    let mut fewest = branch(incumbent, Goal::FewestGpus);
    fewest.run();
    let proven = complete && !fewest.stopped;
    let best = fewest.best;
    // Phase 2: the least slack, then the fewest segments, at that count.
    let mut ties = branch(best, Goal::Lexicographic);
    ties.node_budget = Some(TIE_BREAK_NODES);
    ties.run();
    let bound = if proven { best.cost } else { lower_bound };
    match ties.best_choice.take().or(fewest.best_choice.take()) {
        Some(found) => {
            let choice: Vec<Choice> = found.into_iter().map(|mix| Choice { model: 0, mix }).collect();
            finish(request, &models, &wide, &choice, bound)
        }
        None => plain(&choice, bound),
    }
}

/// Options of every service on every model of the fleet, within `limits`
/// (only the cheapest mix for services reached after `deadline`). A service
/// that no model can serve is an error (the most telling one: an unmeetable
/// SLO before a missing profile).
fn option_table(
    request: &PlanRequest<'_>,
    limits: OptionLimits,
    deadline: Option<Instant>,
) -> Result<OptionTable, PlanError> {
    let mut table: OptionTable = vec![Vec::with_capacity(request.services.len()); request.fleet.len()];
    let mut unservable = Vec::new();
    for slo in request.services {
        let limits = if past(deadline) { CHEAPEST_ONLY } else { limits };
        let mut failure = None;
        for (m, offer) in request.fleet.iter().enumerate() {
            let options = request
                .profile(slo, offer.model)
                .and_then(|profile| service_options(profile, slo, request.rule, request.max_procs, limits));
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

/// Per service and model, its GPU bounds: (compute, price), in GPUs of that
/// model; `None` where the model cannot serve it.
type ServiceBounds = Vec<Vec<Option<(f64, f64)>>>;

/// The [`ServiceBounds`] of every service.
fn service_bounds(
    request: &PlanRequest<'_>,
    models: &[FleetModel],
    table: &OptionTable,
) -> Result<ServiceBounds, PlanError> {
    request
        .services
        .iter()
        .enumerate()
        .map(|(s, slo)| {
            models
                .iter()
                .zip(table)
                .map(|(model, options)| {
                    let Some(options) = &options[s] else { return Ok(None) };
                    let compute = f64::from(options.min_gpcs) / model.slices as f64;
                    let points = usable_points(request.profile(slo, model.offer.model)?, slo, request.max_procs)?;
                    Ok(Some((compute, service_price(&points, slo, request.rule, &model.prices))))
                })
                .collect()
        })
        .collect()
}

/// The best lower bound on the objective: compute and price bounds, per
/// service the cheapest GPU model; in whole GPUs for a single model.
fn lower_bound(models: &[FleetModel], table: &OptionTable, bounds: &ServiceBounds) -> f64 {
    let (mut compute, mut priced) = (0.0, 0.0);
    for bounds in bounds {
        let cheapest = |pick: fn(&(f64, f64)) -> f64| {
            models
                .iter()
                .zip(bounds)
                .filter_map(|(m, b)| b.as_ref().map(|b| m.cost * pick(b)))
                .fold(f64::INFINITY, f64::min)
        };
        compute += cheapest(|b| b.0);
        priced += cheapest(|b| b.1);
    }
    match models {
        // Whole GPUs; the compute bound is exact in slices.
        [model] => {
            let slices: u64 = table[0].iter().flatten().map(|o| u64::from(o.min_gpcs)).sum();
            slices.div_ceil(model.slices).max(round_up(priced)) as f64
        }
        _ => compute.max(priced),
    }
}

/// Proves a mixed fleet too small: the services that only limited models
/// can serve need, by the compute and the price bounds in GPUs, more GPUs
/// than those models' limits allow together.
fn limited_need(models: &[FleetModel], bounds: &ServiceBounds) -> Result<(), PlanError> {
    let (mut compute, mut priced) = (0.0, 0.0);
    for bounds in bounds {
        let served = || models.iter().zip(bounds).filter_map(|(m, b)| b.map(|b| (m, b)));
        if served().any(|(m, _)| m.offer.limit.is_none()) {
            continue;
        }
        compute += served().map(|(_, b)| b.0).fold(f64::INFINITY, f64::min);
        priced += served().map(|(_, b)| b.1).fold(f64::INFINITY, f64::min);
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

/// Every (model, mix) choice of every service.
fn choice_lists(models: &[FleetModel], table: &OptionTable) -> Vec<Vec<Choice>> {
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

/// Local search over single-service moves.
struct LocalSearch<'a> {
    models: &'a [FleetModel],
    table: &'a OptionTable,
    choices: &'a [Vec<Choice>],
    deadline: Option<Instant>,
}

impl LocalSearch<'_> {
    fn mix(&self, service: usize, choice: Choice) -> &Mix {
        &self.table[choice.model][service].as_ref().expect("choices exist only where options do").mixes[choice.mix]
    }

    /// Every service's choice with the lowest `score` (first on ties); with
    /// `unlimited_first`, among its choices on unlimited models if it has any.
    fn cheapest_start(&self, score: impl Fn(&FleetModel, &Mix) -> f64, unlimited_first: bool) -> Vec<Choice> {
        self.choices
            .iter()
            .enumerate()
            .map(|(s, choices)| {
                let value = |c: &Choice| score(&self.models[c.model], self.mix(s, *c));
                let unlimited = |c: &&Choice| self.models[c.model].offer.limit.is_none();
                let pool: Vec<&Choice> = match choices.iter().filter(unlimited).collect::<Vec<_>>() {
                    free if unlimited_first && !free.is_empty() => free,
                    _ => choices.iter().collect(),
                };
                *pool
                    .into_iter()
                    .reduce(|best, c| if value(c) < value(best) - 1e-12 { c } else { best })
                    .expect("a choice")
            })
            .collect()
    }

    /// Instances per model of `choice`.
    fn counts(&self, choice: &[Choice]) -> Vec<SizeCounts> {
        let mut counts = vec![SizeCounts::EMPTY; self.models.len()];
        for (s, c) in choice.iter().enumerate() {
            counts[c.model] = counts[c.model].plus(&self.mix(s, *c).counts);
        }
        counts
    }

    /// The compute cost of a choice: its model's cost per slice × slices.
    fn compute_cost(&self, service: usize, choice: Choice) -> f64 {
        let model = &self.models[choice.model];
        model.cost * f64::from(self.mix(service, choice).gpcs) / model.slices as f64
    }

    /// Repairs `choice` so that every limited model holds at most its
    /// limit: from a model over its limit, services move to their cheapest
    /// choice (in compute cost) on a model with room, those that cost least
    /// per compute slice freed first. Fails with the model still over and
    /// its GPUs when moving every service it can does not suffice.
    fn within_limits(&self, mut choice: Vec<Choice>) -> Result<Vec<Choice>, (usize, u64)> {
        let mut counts = self.counts(&choice);
        for (m, model) in self.models.iter().enumerate() {
            let Some(limit) = model.offer.limit else { continue };
            if model.packer.min_gpus(&counts[m]) <= limit {
                continue;
            }
            let elsewhere = |s: usize| self.choices[s].iter().copied().filter(move |c| c.model != m);
            let mut ranked: Vec<(f64, usize)> = (0..choice.len())
                .filter(|&s| choice[s].model == m)
                .filter_map(|s| {
                    let cheapest = elsewhere(s).map(|c| self.compute_cost(s, c)).fold(f64::INFINITY, f64::min);
                    let freed = f64::from(self.mix(s, choice[s]).gpcs);
                    cheapest.is_finite().then(|| ((cheapest - self.compute_cost(s, choice[s])) / freed, s))
                })
                .collect();
            ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (_, s) in ranked {
                if model.packer.min_gpus(&counts[m]) <= limit {
                    break;
                }
                let target = elsewhere(s)
                    .filter(|c| {
                        let to = &self.models[c.model];
                        let gpus = to.packer.min_gpus(&counts[c.model].plus(&self.mix(s, *c).counts));
                        to.offer.limit.is_none_or(|limit| gpus <= limit)
                    })
                    .min_by(|a, b| self.compute_cost(s, *a).total_cmp(&self.compute_cost(s, *b)));
                if let Some(target) = target {
                    counts[m] = counts[m].minus(&self.mix(s, choice[s]).counts);
                    counts[target.model] = counts[target.model].plus(&self.mix(s, target).counts);
                    choice[s] = target;
                }
            }
            let gpus = model.packer.min_gpus(&counts[m]);
            if gpus > limit {
                return Err((m, gpus));
            }
        }
        Ok(choice)
    }

    /// Moves single services to other choices while that improves the
    /// objective, never taking a model over its limit (or further over
    /// it), until no move helps or the deadline passes; returns the final
    /// choice and its value.
    fn improve(&self, mut choice: Vec<Choice>) -> (Vec<Choice>, Objective) {
        let mut counts = self.counts(&choice);
        let (mut slack, mut segments) = (0.0, 0u64);
        for (s, c) in choice.iter().enumerate() {
            let mix = self.mix(s, *c);
            slack += mix.slack;
            segments += u64::from(mix.segments);
        }
        let mut gpus: Vec<u64> = self.models.iter().zip(&counts).map(|(m, c)| m.packer.min_gpus(c)).collect();
        let cost = |m: usize, gpus: u64| self.models[m].cost * gpus as f64;
        let mut current = Objective { cost: gpus.iter().enumerate().map(|(m, &g)| cost(m, g)).sum(), slack, segments };
        loop {
            let mut improved = false;
            for (s, chosen) in choice.iter_mut().enumerate() {
                if past(self.deadline) {
                    return (choice, current);
                }
                let (from, old) = (chosen.model, self.mix(s, *chosen));
                let without = counts[from].minus(&old.counts);
                for &candidate in &self.choices[s] {
                    let (to, new) = (candidate.model, self.mix(s, candidate));
                    // The new counts and GPUs of the one or two models touched.
                    let (from_counts, to_counts) = if from == to {
                        (without.plus(&new.counts), without.plus(&new.counts))
                    } else {
                        (without, counts[to].plus(&new.counts))
                    };
                    let from_gpus = self.models[from].packer.min_gpus(&from_counts);
                    let to_gpus = if from == to { from_gpus } else { self.models[to].packer.min_gpus(&to_counts) };
                    if !self.models[from].allows(from_gpus, gpus[from]) || !self.models[to].allows(to_gpus, gpus[to]) {
                        continue;
                    }
                    let cost = if from == to {
                        current.cost - cost(from, gpus[from]) + cost(from, from_gpus)
                    } else {
                        current.cost - cost(from, gpus[from]) - cost(to, gpus[to])
                            + cost(from, from_gpus)
                            + cost(to, to_gpus)
                    };
                    let value = Objective {
                        cost,
                        slack: current.slack - old.slack + new.slack,
                        segments: current.segments - u64::from(old.segments) + u64::from(new.segments),
                    };
                    if value.better_than(&current) {
                        (counts[from], gpus[from]) = (from_counts, from_gpus);
                        (counts[to], gpus[to]) = (to_counts, to_gpus);
                        (*chosen, current, improved) = (candidate, value, true);
                        break;
                    }
                }
            }
            if !improved {
                return (choice, current);
            }
        }
    }
}

/// Builds the plan of `choice`, checks the ceiling and the fleet limits,
/// and under the `parva` rule on one model falls back to the `parva`
/// strategy's plan if it is smaller (possible only when the search was cut
/// short), so `optimal` is never worse. `lower_bound` is the proven bound
/// (the optimum itself when the exact search finished).
fn finish(
    request: &PlanRequest<'_>,
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
fn assemble(request: &PlanRequest<'_>, models: &[FleetModel], table: &OptionTable, choice: &[Choice]) -> Plan {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::{verify, VerifyRequest};
    use tessera_core::rng::SplitMix64;
    use tessera_core::synthetic::{builtin_catalog, demo_services};
    use tessera_core::ServiceSlo;

    #[test]
    fn demo_is_planned_optimally_and_verifies_under_both_rules() {
        let catalog = builtin_catalog();
        let services = demo_services();
        for rule in LatencyRule::ALL {
            let request = PlanRequest { rule, ..PlanRequest::new(GpuModel::A100_80GB, &catalog, &services) };
            let plan = plan_optimal(&request).unwrap();
            let optimality = plan.optimality.clone().unwrap();
            assert!(optimality.lower_bound <= plan.gpu_count as f64);
            let check = VerifyRequest { catalog: &catalog, services: &services, rule, max_procs: 5 };
            assert_eq!(verify(&plan, &check), vec![], "{rule}");
            if rule == LatencyRule::Queueing {
                assert!(plan.services.iter().all(|s| s.met && s.worst_latency_ms <= s.latency_slo_ms));
            }
        }
    }

    #[test]
    fn a_time_limit_beyond_any_instant_means_no_limit() {
        let catalog = builtin_catalog();
        let services = demo_services();
        let request = PlanRequest {
            time_limit: Some(Duration::MAX),
            ..PlanRequest::new(GpuModel::A100_80GB, &catalog, &services)
        };
        assert!(plan_optimal(&request).unwrap().optimality.unwrap().proven_optimal);
    }

    #[test]
    fn every_service_that_cannot_be_served_is_named() {
        let catalog = builtin_catalog();
        let mut services = demo_services();
        services[1].latency_slo_ms = 0.001;
        services[4].model = "alexnet".to_string();
        let request = PlanRequest::new(GpuModel::A100_80GB, &catalog, &services);
        for planned in [plan_optimal(&request), plan_parva(&request)] {
            let message = planned.unwrap_err().to_string();
            assert!(message.starts_with("2 services cannot be served: service 'fraud-check' "), "{message}");
            assert!(message.contains("; service 'thumbnails': no profile for model 'alexnet'"), "{message}");
        }
        services[4].model = "mobilenetv2".to_string();
        let request = PlanRequest::new(GpuModel::A100_80GB, &catalog, &services);
        assert!(matches!(plan_optimal(&request), Err(PlanError::Unmeetable(_))), "one alone is itself");
    }

    #[test]
    fn never_uses_more_gpus_than_parva() {
        let catalog = builtin_catalog();
        let services = demo_services();
        let request = PlanRequest::new(GpuModel::A100_80GB, &catalog, &services);
        let optimal = plan_optimal(&request).unwrap();
        let parva = plan_parva(&request).unwrap();
        assert!(optimal.gpu_count <= parva.gpu_count);
    }

    fn mixed_request<'a>(
        catalog: &'a tessera_core::ProfileCatalog,
        services: &'a [tessera_core::ServiceSlo],
        h100_cost: f64,
        h100_limit: Option<u64>,
    ) -> PlanRequest<'a> {
        PlanRequest {
            fleet: vec![
                GpuOffer::plain(GpuModel::A100_80GB),
                GpuOffer { model: GpuModel::H100_80GB, cost: h100_cost, limit: h100_limit },
            ],
            rule: LatencyRule::Queueing,
            ..PlanRequest::new(GpuModel::A100_80GB, catalog, services)
        }
    }

    #[test]
    fn a_mixed_fleet_follows_the_costs() {
        // The synthetic H100 is 1.8× as fast as the A100: at cost 1.2 it
        // wins, at cost 3 it loses.
        let catalog = builtin_catalog();
        let services = demo_services();
        let cheap = plan_optimal(&mixed_request(&catalog, &services, 1.2, None)).unwrap();
        let dear = plan_optimal(&mixed_request(&catalog, &services, 3.0, None)).unwrap();
        let uses = |plan: &Plan, model| plan.fleet.iter().find(|f| f.gpu_model == model).unwrap().gpus;
        assert!(uses(&cheap, GpuModel::H100_80GB) > 0, "{:?}", cheap.fleet);
        assert_eq!(uses(&dear, GpuModel::H100_80GB), 0, "{:?}", dear.fleet);
        for plan in [&cheap, &dear] {
            let optimality = plan.optimality.as_ref().unwrap();
            assert_eq!(optimality.objective, "cost");
            assert!(optimality.lower_bound <= plan.total_cost + 1e-9);
            let check =
                VerifyRequest { catalog: &catalog, services: &services, rule: LatencyRule::Queueing, max_procs: 5 };
            assert_eq!(verify(plan, &check), vec![]);
        }
    }

    #[test]
    fn a_limited_cheaper_model_takes_what_fits_and_the_rest_goes_elsewhere() {
        // The H100 is cheaper per unit of work at cost 1.6, so every service
        // would rather run there, but only `limit` GPUs exist. A penalty on
        // the limit left the search stuck over it (seeds 19, 48, 52 and 55
        // with one H100 failed with "the fleet is too small").
        let catalog = builtin_catalog();
        let models: Vec<&str> = catalog.models(GpuModel::A100_80GB).collect();
        for seed in 0..60u64 {
            let mut rng = SplitMix64::new(seed);
            let count = 3 + rng.below(10);
            let services: Vec<ServiceSlo> = (0..count)
                .map(|i| {
                    let model = models[rng.below(models.len())];
                    let (rate_rps, latency_ms) = (rng.uniform(50.0, 3000.0), rng.uniform(50.0, 1000.0));
                    ServiceSlo::new(format!("s{i}"), model, rate_rps, latency_ms).unwrap()
                })
                .collect();
            for limit in 1..=3 {
                let request =
                    PlanRequest { rule: LatencyRule::Parva, ..mixed_request(&catalog, &services, 1.6, Some(limit)) };
                let plan = plan_optimal(&request).unwrap_or_else(|e| panic!("seed {seed}, {limit} H100: {e}"));
                let h100 = plan.fleet.iter().find(|f| f.gpu_model == GpuModel::H100_80GB).unwrap();
                assert!(h100.gpus <= limit, "seed {seed}: {:?}", plan.fleet);
                let check =
                    VerifyRequest { catalog: &catalog, services: &services, rule: LatencyRule::Parva, max_procs: 5 };
                assert_eq!(verify(&plan, &check), vec![], "seed {seed}, {limit} H100");
            }
        }
    }

    #[test]
    fn a_mixed_fleet_too_small_for_its_services_is_proven_so() {
        let catalog = builtin_catalog();
        let services = demo_services();
        let request = PlanRequest {
            fleet: vec![
                GpuOffer { limit: Some(1), ..GpuOffer::plain(GpuModel::A100_80GB) },
                GpuOffer { model: GpuModel::H100_80GB, cost: 1.5, limit: Some(1) },
            ],
            ..mixed_request(&catalog, &services, 1.5, Some(1))
        };
        let error = plan_optimal(&request).unwrap_err();
        assert!(
            matches!(&error, PlanError::NoPlanWithinLimits { gpus, allowed: 2, .. } if gpus == "a100-80gb, h100-80gb"),
            "{error}"
        );
    }

    #[test]
    fn fleet_limits_hold_or_fail_clearly() {
        let catalog = builtin_catalog();
        let services = demo_services();
        let limited = plan_optimal(&mixed_request(&catalog, &services, 1.2, Some(1))).unwrap();
        assert!(limited.fleet.iter().all(|f| f.limit.is_none_or(|limit| f.gpus <= limit)), "{:?}", limited.fleet);
        let request = PlanRequest {
            fleet: vec![GpuOffer { model: GpuModel::A100_80GB, cost: 1.0, limit: Some(1) }],
            ..PlanRequest::new(GpuModel::A100_80GB, &catalog, &services)
        };
        // The bound alone proves it: the demo needs more than one A100.
        let error = plan_optimal(&request).unwrap_err();
        assert!(matches!(error, PlanError::NoPlanWithinLimits { allowed: 1, .. }), "{error}");
    }
}
