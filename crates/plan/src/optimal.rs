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
//! [`crate::bound`]); summed over services, either bounds the optimum.
//!
//! **Search.** A local search starts from every service's cheapest choice
//! in compute and in price, and moves single services to other choices
//! while the objective improves. On one GPU model, for instances of up to
//! [`EXACT_SERVICE_LIMIT`] services within [`EXACT_GAP_GPUS`] of the bound,
//! a branch and bound ([`crate::branch`]) then explores every mix that could
//! still lead to fewer GPUs (a service may exceed its cheapest mix by at
//! most the compute the incumbent leaves unused). If it finishes, the GPU
//! count is proven optimal; under the time limit it stops with the best plan
//! found and the gap to the bound. A second, node-budgeted pass looks for
//! less slack and fewer segments among plans with that many GPUs.
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

/// Most mixes per service in the exact search.
const EXACT_MAX_MIXES: usize = 5_000;

/// Search nodes spent on tie-breaks among plans with the fewest GPUs.
const TIE_BREAK_NODES: u64 = 200_000;

/// Penalty per GPU over a fleet limit, in units of the largest GPU cost.
const OVER_LIMIT_PENALTY: f64 = 1e6;

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

/// A choice of one service: a GPU model (fleet index) and a mix on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Choice {
    model: usize,
    mix: usize,
}

/// The options of every service on every GPU model: `[model][service]`.
type OptionTable = Vec<Vec<Option<ServiceOptions>>>;

/// Plans `request` with the `optimal` strategy.
pub fn plan_optimal(request: &PlanRequest<'_>) -> Result<Plan, PlanError> {
    request.check()?;
    // A limit too far away to be an instant is no limit.
    let deadline = request.time_limit.and_then(|limit| Instant::now().checked_add(limit));
    let table = option_table(request, HEURISTIC_LIMITS)?;
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
                prices: tune_prices(&PriceRegion::new(offer.model), spec.compute_slices, &known),
            }
        })
        .collect();
    let lower_bound = lower_bound(request, &models, &table)?;
    let choices = choice_lists(&models, &table);
    let search = LocalSearch { models: &models, table: &table, choices: &choices };
    let compute_start = search.cheapest_start(|model, mix| model.cost * f64::from(mix.gpcs) / model.slices as f64);
    let price_start = search.cheapest_start(|model, mix| model.cost * price_of(&model.prices, &mix.counts));
    let (choice, incumbent) = [compute_start, price_start]
        .into_iter()
        .map(|start| search.improve(start))
        .reduce(|a, b| if b.1.better_than(&a.1) { b } else { a })
        .expect("two starts");

    let plain = |choice: &[Choice], bound| finish(request, &models, &table, choice, bound);
    if !single || request.services.len() > EXACT_SERVICE_LIMIT || incumbent.cost - lower_bound > EXACT_GAP_GPUS as f64 {
        return plain(&choice, lower_bound);
    }

    // One GPU model, close to the bound: search exactly. A plan with at most
    // the incumbent's GPUs leaves any service at most this many slices above
    // its cheapest mix.
    let model = &models[0];
    let min_gpcs: u64 = table[0].iter().flatten().map(|o| u64::from(o.min_gpcs)).sum();
    let extra = (incumbent.cost as u64 * model.slices).saturating_sub(min_gpcs).min(u64::from(u32::MAX)) as u32;
    let wide_limits = OptionLimits { extra_gpcs: extra, max_mixes: EXACT_MAX_MIXES };
    let wide = option_table(request, wide_limits)?;
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

/// Options of every service on every model of the fleet. A service that
/// no model can serve is an error (the most telling one: an unmeetable SLO
/// before a missing profile).
fn option_table(request: &PlanRequest<'_>, limits: OptionLimits) -> Result<OptionTable, PlanError> {
    let mut table: OptionTable = vec![Vec::with_capacity(request.services.len()); request.fleet.len()];
    for slo in request.services {
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
            return Err(failure.expect("a failure per model"));
        }
    }
    Ok(table)
}

/// The best lower bound on the objective: compute and price bounds, per
/// service the cheapest GPU model; in whole GPUs for a single model.
fn lower_bound(request: &PlanRequest<'_>, models: &[FleetModel], table: &OptionTable) -> Result<f64, PlanError> {
    let (mut compute, mut priced) = (0.0, 0.0);
    for (s, slo) in request.services.iter().enumerate() {
        let (mut cheapest_compute, mut cheapest_price) = (f64::INFINITY, f64::INFINITY);
        for (model, options) in models.iter().zip(table) {
            let Some(options) = &options[s] else { continue };
            cheapest_compute = cheapest_compute.min(model.cost * f64::from(options.min_gpcs) / model.slices as f64);
            let profile = request.profile(slo, model.offer.model)?;
            let points = usable_points(profile, slo, request.max_procs)?;
            let price = service_price(&points, slo, request.rule, &model.prices);
            cheapest_price = cheapest_price.min(model.cost * price);
        }
        compute += cheapest_compute;
        priced += cheapest_price;
    }
    Ok(match models {
        // Whole GPUs; the compute bound is exact in slices.
        [model] => {
            let slices: u64 = table[0].iter().flatten().map(|o| u64::from(o.min_gpcs)).sum();
            slices.div_ceil(model.slices).max(round_up(priced)) as f64
        }
        _ => compute.max(priced),
    })
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
}

impl LocalSearch<'_> {
    fn mix(&self, service: usize, choice: Choice) -> &Mix {
        &self.table[choice.model][service].as_ref().expect("choices exist only where options do").mixes[choice.mix]
    }

    /// Every service's choice with the lowest `score` (first on ties).
    fn cheapest_start(&self, score: impl Fn(&FleetModel, &Mix) -> f64) -> Vec<Choice> {
        self.choices
            .iter()
            .enumerate()
            .map(|(s, choices)| {
                let value = |c: &Choice| score(&self.models[c.model], self.mix(s, *c));
                *choices
                    .iter()
                    .reduce(|best, c| if value(c) < value(best) - 1e-12 { c } else { best })
                    .expect("a choice")
            })
            .collect()
    }

    /// The cost of one model's instance counts, its limit enforced by a
    /// penalty.
    fn model_cost(&self, model: usize, counts: &SizeCounts) -> f64 {
        let fleet_model = &self.models[model];
        let gpus = fleet_model.packer.min_gpus(counts);
        let over = fleet_model.offer.limit.map_or(0, |limit| gpus.saturating_sub(limit));
        let top = self.models.iter().map(|m| m.cost).fold(0.0, f64::max);
        fleet_model.cost * gpus as f64 + OVER_LIMIT_PENALTY * top * over as f64
    }

    /// Moves single services to other choices while that improves the
    /// objective; returns the final choice and its value.
    fn improve(&self, mut choice: Vec<Choice>) -> (Vec<Choice>, Objective) {
        let mut counts = vec![SizeCounts::EMPTY; self.models.len()];
        let (mut slack, mut segments) = (0.0, 0u64);
        for (s, c) in choice.iter().enumerate() {
            let mix = self.mix(s, *c);
            counts[c.model] = counts[c.model].plus(&mix.counts);
            slack += mix.slack;
            segments += u64::from(mix.segments);
        }
        let mut costs: Vec<f64> = counts.iter().enumerate().map(|(m, c)| self.model_cost(m, c)).collect();
        let mut current = Objective { cost: costs.iter().sum(), slack, segments };
        loop {
            let mut improved = false;
            for (s, chosen) in choice.iter_mut().enumerate() {
                let (from, old) = (chosen.model, self.mix(s, *chosen));
                let without = counts[from].minus(&old.counts);
                for &candidate in &self.choices[s] {
                    let (to, new) = (candidate.model, self.mix(s, candidate));
                    // The new counts and costs of the one or two models touched.
                    let (from_counts, to_counts) = if from == to {
                        (without.plus(&new.counts), without.plus(&new.counts))
                    } else {
                        (without, counts[to].plus(&new.counts))
                    };
                    let from_cost = self.model_cost(from, &from_counts);
                    let to_cost = if from == to { from_cost } else { self.model_cost(to, &to_counts) };
                    let cost = if from == to {
                        current.cost - costs[from] + from_cost
                    } else {
                        current.cost - costs[from] - costs[to] + from_cost + to_cost
                    };
                    let value = Objective {
                        cost,
                        slack: current.slack - old.slack + new.slack,
                        segments: current.segments - u64::from(old.segments) + u64::from(new.segments),
                    };
                    if value.better_than(&current) {
                        (counts[from], costs[from]) = (from_counts, from_cost);
                        (counts[to], costs[to]) = (to_counts, to_cost);
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

/// Builds the plan of `choice`, checks the fleet limits, and under the
/// `parva` rule on one model falls back to the `parva` strategy's plan if it
/// is smaller (possible only when the search was cut short), so `optimal`
/// is never worse.
fn finish(
    request: &PlanRequest<'_>,
    models: &[FleetModel],
    table: &OptionTable,
    choice: &[Choice],
    lower_bound: f64,
) -> Result<Plan, PlanError> {
    let mut plan = assemble(request, models, table, choice);
    if request.rule == LatencyRule::Parva && models.len() == 1 {
        let parva = plan_parva(request)?;
        if parva.gpu_count < plan.gpu_count {
            plan = Plan { strategy: "optimal".to_string(), ..parva };
        }
    }
    if let Some(over) = plan.fleet.iter().find(|f| f.limit.is_some_and(|limit| f.gpus > limit)) {
        return Err(PlanError::FleetTooSmall {
            gpu: over.gpu_model.to_string(),
            needed: over.gpus,
            limit: over.limit.expect("limited"),
        });
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
    use tessera_core::synthetic::{builtin_catalog, demo_services};

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
    fn fleet_limits_hold_or_fail_clearly() {
        let catalog = builtin_catalog();
        let services = demo_services();
        let limited = plan_optimal(&mixed_request(&catalog, &services, 1.2, Some(1))).unwrap();
        assert!(limited.fleet.iter().all(|f| f.limit.is_none_or(|limit| f.gpus <= limit)), "{:?}", limited.fleet);
        let request = PlanRequest {
            fleet: vec![GpuOffer { model: GpuModel::A100_80GB, cost: 1.0, limit: Some(1) }],
            ..PlanRequest::new(GpuModel::A100_80GB, &catalog, &services)
        };
        assert!(matches!(plan_optimal(&request), Err(PlanError::FleetTooSmall { .. })));
    }
}
