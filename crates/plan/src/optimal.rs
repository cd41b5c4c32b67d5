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
//! **Bound.** The linear-programming relaxation, solved to optimality by
//! [`crate::bound`] (prices per GPU model and instance size; every service
//! pays its cheapest cover), and the compute bound; on one GPU model, in
//! whole GPUs. The bound ignores the fleet's count limits, so it stays
//! valid with them.
//!
//! **Search.** First the relaxation's own solution, rounded
//! ([`crate::round`]): the services it serves with one cover keep it, the
//! few it splits are chosen exactly. Then a local search moves single
//! services to other choices while the objective improves, from that start
//! and, unless it already meets the bound, from every service's cheapest
//! choice in compute and in price. Limits constrain it: a start that puts
//! more GPUs on a limited model than its limit is first repaired, moving the
//! services that cost least to move per compute slice freed to their
//! cheapest choice on a model with room, and no move takes a model over its
//! limit. If the best plan is still above the bound, for up to
//! [`BRANCH_SERVICE_LIMIT`] services a best-bound-first branch and bound
//! ([`crate::branch`]) with the relaxation's bound at every node searches
//! every mix that could still lead to a cheaper plan (reduced-cost
//! fixing: a mix whose price exceeds the service's cheapest by more than
//! the incumbent leaves above the bound cannot be in a better plan). If it
//! finishes, the plan is proven optimal; under the time limit it stops with
//! the best plan found and the least bound of the nodes left open.
//!
//! **Time.** The time limit bounds every phase: past it, the remaining
//! services get only their cheapest mixes, the relaxation stops with the
//! best prices so far (still a valid bound), the local search stops with
//! what it has, and the branch and bound is skipped or cut short.
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
use crate::bound::{round_up, solve, CostGrid, LpBound, PriceSpace, Pricing};
use crate::branch::branch_and_bound;
use crate::cover::{cover_items, CoverPricing};
use crate::error::PlanError;
use crate::latency::LatencyRule;
use crate::objective::Objective;
use crate::options::{mix_with_counts, priced_mixes, service_options, Mix, OptionLimits, ServiceOptions};
use crate::parva::plan_parva;
use crate::problem::{usable_points, Problem};
use crate::round::{add_to_share, complete_exactly, purify, Candidate, Share};

/// How long the search may run by default.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(10);

/// Largest instance (in services) the branch and bound runs on.
pub const BRANCH_SERVICE_LIMIT: usize = 1_000;

/// Mixes per service and GPU model for the local search: a few compute
/// slices above the cheapest, at most this many.
const HEURISTIC_LIMITS: OptionLimits = OptionLimits { extra_gpcs: 3, max_mixes: 24 };

/// The cheapest mix only: what a service gets once the time is up.
const CHEAPEST_ONLY: OptionLimits = OptionLimits { extra_gpcs: 0, max_mixes: 1 };

/// Most mixes per service and model a split service chooses from in the
/// rounding.
const ROUNDING_MIXES: usize = 64;

/// Most mixes per service and model in the branch and bound.
const BRANCH_MIXES: usize = 2_000;

/// Most mixes of all services together in the branch and bound.
const BRANCH_CANDIDATES: usize = 200_000;

/// Most search nodes of the exact choice for the services the relaxation
/// splits.
const ROUNDING_NODES: u64 = 200_000;

/// Relative tolerance of cost comparisons.
const COST_TOLERANCE: f64 = 1e-9;

/// One GPU model of the fleet, ready for planning.
pub(crate) struct FleetModel {
    /// The model, its cost and limit.
    pub offer: GpuOffer,
    /// The cost the search uses: 1 for a fleet of one model (GPUs are the
    /// objective), the offer's cost otherwise.
    pub cost: f64,
    /// Its packer.
    pub packer: Packer,
    /// Compute slices per GPU.
    pub slices: u64,
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

/// Per service, the mixes the branch and bound chooses from.
type Candidates = Vec<Vec<Candidate>>;

/// `true` once `deadline` has passed.
fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|deadline| Instant::now() >= deadline)
}

/// Where the search starts from.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// The relaxation's solution, rounded.
    Rounded,
    /// Every service's cheapest choice in compute (`true`: on unlimited
    /// models where it can).
    Compute(bool),
    /// Every service's cheapest choice at the relaxation's prices.
    Price(bool),
}

/// Plans `request` with the `optimal` strategy.
pub fn plan_optimal(request: &Problem<'_>) -> Result<Plan, PlanError> {
    request.check()?;
    // A limit too far away to be an instant is no limit.
    let deadline = request.time_limit.and_then(|limit| Instant::now().checked_add(limit));
    // Only the cheapest mix per service at first: the rounded relaxation
    // adds the mixes it picks, and usually proves the plan; the local
    // search's wider table is built only if it does not.
    let mut table = option_table(request, CHEAPEST_ONLY, deadline)?;
    let mut widened = false;
    let single = request.fleet.len() == 1;
    let models: Vec<FleetModel> = request
        .fleet
        .iter()
        .map(|offer| FleetModel {
            offer: *offer,
            cost: if single { 1.0 } else { offer.cost },
            packer: Packer::new(offer.model),
            slices: u64::from(offer.model.spec().compute_slices),
        })
        .collect();
    let space = PriceSpace::new(&models.iter().map(|m| (m.offer.model, m.cost, m.offer.limit)).collect::<Vec<_>>());
    let pricing = cover_pricing(request);
    let relaxation = solve(&space, &pricing, &[], &|_, _| false, deadline);
    let relaxed = pricing.per_model_values(&space, &relaxation.prices);
    let lower_bound = lower_bound(&models, &table, relaxation.value);
    if !single {
        // In GPUs: the limited models' prices brought within their layouts.
        let in_gpus = pricing.per_model_values(&space, &space.within_layouts(&relaxation.prices));
        limited_need(&models, &table, &in_gpus)?;
    } else if let Some(limit) = models[0].offer.limit {
        // The bound above may charge the limit (a Lagrangian penalty), which
        // proves a limit too small but counts no GPUs; the bound at prices
        // within the layouts does.
        let prices = space.within_layouts(&relaxation.prices);
        let needed = round_up(self::lower_bound(
            &models,
            &table,
            pricing.evaluate(&space, &prices, &mut vec![0.0; space.dims()]),
        ));
        if needed > limit {
            let gpus = models[0].offer.model.to_string();
            return Err(PlanError::NoPlanWithinLimits { gpus, needed, allowed: limit });
        }
    }
    let context =
        Context { request, models: &models, space: &space, prices: &relaxation.prices, relaxed: &relaxed, deadline };
    let proven = |value: &Objective| value.cost <= lower_bound + COST_TOLERANCE * lower_bound.max(1.0);

    let mut starts = vec![Start::Rounded, Start::Compute(false), Start::Price(false)];
    if models.iter().any(|m| m.offer.limit.is_some()) && models.iter().any(|m| m.offer.limit.is_none()) {
        // Also from the plans that leave the limited models empty wherever
        // an unlimited one can serve: within the limits from the start.
        starts.extend([Start::Compute(true), Start::Price(true)]);
    }
    let mut shortfall = None;
    let mut best: Option<(Vec<Choice>, Objective)> = None;
    for start in starts {
        if best.as_ref().is_some_and(|(_, value)| proven(value) || past(deadline)) {
            break;
        }
        if !widened && !matches!(start, Start::Rounded) {
            let chosen = best.as_mut().map(|(choice, _)| choice);
            table = widen(request, table, chosen, deadline)?;
            widened = true;
        }
        let start = match start {
            Start::Rounded => round_relaxation(&context, &pricing, &relaxation, &mut table),
            Start::Compute(unlimited_first) => {
                let choices = choice_lists(&models, &table);
                let search = LocalSearch { models: &models, table: &table, choices: &choices, deadline };
                search.cheapest_start(
                    |m, mix| models[m].cost * f64::from(mix.gpcs) / models[m].slices as f64,
                    unlimited_first,
                )
            }
            Start::Price(unlimited_first) => {
                let choices = choice_lists(&models, &table);
                let search = LocalSearch { models: &models, table: &table, choices: &choices, deadline };
                search.cheapest_start(|m, mix| space.price_of(&relaxation.prices, m, &mix.counts), unlimited_first)
            }
        };
        let choices = choice_lists(&models, &table);
        let search = LocalSearch { models: &models, table: &table, choices: &choices, deadline };
        // One model: fewer GPUs is the objective itself; nothing to move.
        match if single { Ok(start) } else { search.within_limits(start) } {
            Ok(start) => {
                let found = search.improve(start);
                if best.as_ref().is_none_or(|(_, value)| found.1.better_than(value)) {
                    best = Some(found);
                }
            }
            Err(over) => shortfall = Some(over),
        }
    }
    let Some((choice, incumbent)) = best else {
        let (model, gpus) = shortfall.expect("a start failed");
        let offer = &models[model].offer;
        return Err(PlanError::LimitsNotMet {
            gpu: offer.model.to_string(),
            needed: gpus,
            limit: offer.limit.expect("only limits fail"),
        });
    };
    if proven(&incumbent) || request.services.len() > BRANCH_SERVICE_LIMIT || past(deadline) {
        return finish(request, &models, &table, &choice, lower_bound);
    }

    // Search exactly among the mixes that could be in a cheaper plan.
    let step = if single { 1.0 } else { COST_TOLERANCE * incumbent.cost.max(1.0) };
    let room = incumbent.cost - step - relaxation.value;
    let Some((candidates, complete)) = branch_candidates(&context, &mut table, room)? else {
        return finish(request, &models, &table, &choice, lower_bound);
    };
    let outcome = branch_and_bound(&space, &models, &candidates, &relaxation.prices, incumbent.cost, deadline);
    let bound = if complete { lower_bound.max(outcome.bound) } else { lower_bound };
    let Some(found) = outcome.choice else {
        return finish(request, &models, &table, &choice, bound);
    };
    // A cheaper plan: keep its cost, lower its slack.
    let start: Vec<Choice> = found.iter().map(|c| Choice { model: c.model, mix: c.mix }).collect();
    let choices = choice_lists(&models, &table);
    let search = LocalSearch { models: &models, table: &table, choices: &choices, deadline: None };
    let (improved, _) = search.improve(start);
    finish(request, &models, &table, &improved, bound)
}

/// The options of every service within [`HEURISTIC_LIMITS`], keeping the
/// mixes of `table` (and the choices of `chosen` pointing at them).
fn widen(
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

/// The linear-programming bound of a request (see [`relaxation_bound`]).
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
fn cover_pricing(request: &Problem<'_>) -> CoverPricing {
    let services = request
        .services
        .iter()
        .map(|slo| {
            let per_model = request
                .fleet
                .iter()
                .enumerate()
                .map(|(m, offer)| {
                    let points =
                        request.profile(slo, offer.model).and_then(|p| usable_points(p, slo, request.max_procs));
                    (m, points.map(|points| cover_items(&points, slo, request.rule)).unwrap_or_default())
                })
                .collect();
            (slo.rate_rps, per_model)
        })
        .collect();
    CoverPricing::new(services)
}

/// What the rounding and the branch and bound share.
struct Context<'a> {
    request: &'a Problem<'a>,
    models: &'a [FleetModel],
    space: &'a PriceSpace,
    /// The relaxation's prices.
    prices: &'a [f64],
    /// Per service and model, its cheapest cover's cost at those prices.
    relaxed: &'a [Vec<Option<f64>>],
    /// When the search must stop.
    deadline: Option<Instant>,
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

/// The index of `mix` among a service's options on a model, added if new.
fn mix_index(options: &mut ServiceOptions, mix: Mix) -> usize {
    match options.mixes.iter().position(|m| m.counts == mix.counts) {
        Some(index) => index,
        None => {
            options.mixes.push(mix);
            options.mixes.len() - 1
        }
    }
}

/// A choice for `service` with the instances `counts` on `model`: its mix
/// if it is a real one (added to the options if new); else the service's
/// cheapest choice at the relaxation's prices.
fn choice_for(
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
        if let Some(mix) = profile.and_then(|p| mix_with_counts(p, slo, request.rule, request.max_procs, counts)) {
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
fn candidates_within(
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
            priced_mixes(profile, slo, request.rule, request.max_procs, context.size_prices(m), most_here, max_mixes)?;
        complete &= found.complete_up_to >= most_here;
        for mix in found.mixes {
            let counts = mix.counts;
            candidates.push(Candidate { model: m, mix: mix_index(options, mix), counts });
        }
    }
    Ok((candidates, complete))
}

/// The relaxation's solution made whole: its support's choices per service,
/// purified down to a few split services, which [`complete_exactly`]
/// settles given the rest.
fn round_relaxation(
    context: &Context<'_>,
    pricing: &CoverPricing,
    relaxation: &LpBound,
    table: &mut OptionTable,
) -> Vec<Choice> {
    let services = context.request.services.len();
    let mut shares: Vec<Share<(usize, SizeCounts)>> = vec![Vec::new(); services];
    for (prices, weight) in &relaxation.support {
        for (share, choice) in shares.iter_mut().zip(pricing.choices(context.space, prices)) {
            if let Some(choice) = choice {
                add_to_share(share, choice, *weight);
            }
        }
    }
    purify(context.space, &mut shares, |_, choice| choice);
    let mut fixed = vec![SizeCounts::EMPTY; context.models.len()];
    let mut choice = Vec::with_capacity(services);
    let mut split = Vec::new();
    for (service, share) in shares.iter().enumerate() {
        // The heaviest entry (or the cheapest choice, for an empty share).
        let heaviest = share.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|(c, _)| *c);
        let picked = match heaviest {
            Some((model, counts)) => choice_for(context, table, service, model, &counts),
            None => choice_for(context, table, service, 0, &SizeCounts::EMPTY),
        };
        if share.len() > 1 {
            split.push(service);
        } else {
            let mix = &table[picked.model][service].as_ref().expect("chosen options exist").mixes[picked.mix];
            fixed[picked.model] = fixed[picked.model].plus(&mix.counts);
        }
        choice.push(picked);
    }
    if split.is_empty() {
        return choice;
    }
    // Room for plans up to one GPU (or the dearest GPU) above the bound.
    let room = context.models.iter().map(|m| m.cost).fold(0.0, f64::max);
    let mut lists: Vec<Vec<Candidate>> = Vec::with_capacity(split.len());
    for &service in &split {
        let mut list =
            candidates_within(context, table, service, room, ROUNDING_MIXES).map(|(c, _)| c).unwrap_or_default();
        let current = choice[service];
        let counts = table[current.model][service].as_ref().expect("chosen options exist").mixes[current.mix].counts;
        if !list.iter().any(|c| c.model == current.model && c.mix == current.mix) {
            list.push(Candidate { model: current.model, mix: current.mix, counts });
        }
        lists.push(list);
    }
    let open: Vec<&[Candidate]> = lists.iter().map(Vec::as_slice).collect();
    if let Some((picked, _)) =
        complete_exactly(context.models, &fixed, &open, f64::INFINITY, ROUNDING_NODES, context.deadline).best
    {
        for ((&service, list), index) in split.iter().zip(&lists).zip(picked) {
            choice[service] = Choice { model: list[index].model, mix: list[index].mix };
        }
    }
    choice
}

/// The candidates of the branch and bound: per service, every mix whose
/// price at the relaxation's prices exceeds its cheapest cover's by at most
/// `room`; and whether the lists are complete (no mix left out by the
/// caps). `None` when there are too many to search.
fn branch_candidates(
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

/// Options of every service on every model of the fleet, within `limits`
/// (only the cheapest mix for services reached after `deadline`). A service
/// that no model can serve is an error (the most telling one: an unmeetable
/// SLO before a missing profile).
fn option_table(
    request: &Problem<'_>,
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
fn lower_bound(models: &[FleetModel], table: &OptionTable, relaxation: f64) -> f64 {
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
fn limited_need(models: &[FleetModel], table: &OptionTable, relaxed: &[Vec<Option<f64>>]) -> Result<(), PlanError> {
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
    fn cheapest_start(&self, score: impl Fn(usize, &Mix) -> f64, unlimited_first: bool) -> Vec<Choice> {
        self.choices
            .iter()
            .enumerate()
            .map(|(s, choices)| {
                let value = |c: &Choice| score(c.model, self.mix(s, *c));
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
            let request = Problem { rule, ..Problem::parva(GpuModel::A100_80GB, &catalog, &services) };
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
        let request =
            Problem { time_limit: Some(Duration::MAX), ..Problem::parva(GpuModel::A100_80GB, &catalog, &services) };
        assert!(plan_optimal(&request).unwrap().optimality.unwrap().proven_optimal);
    }

    #[test]
    fn every_service_that_cannot_be_served_is_named() {
        let catalog = builtin_catalog();
        let mut services = demo_services();
        services[1].latency_slo_ms = 0.001;
        services[4].model = "alexnet".to_string();
        let request = Problem::parva(GpuModel::A100_80GB, &catalog, &services);
        for planned in [plan_optimal(&request), plan_parva(&request)] {
            let message = planned.unwrap_err().to_string();
            assert!(message.starts_with("2 services cannot be served: service 'fraud-check' "), "{message}");
            assert!(message.contains("; service 'thumbnails': no profile for model 'alexnet'"), "{message}");
        }
        services[4].model = "mobilenetv2".to_string();
        let request = Problem::parva(GpuModel::A100_80GB, &catalog, &services);
        assert!(matches!(plan_optimal(&request), Err(PlanError::Unmeetable(_))), "one alone is itself");
    }

    #[test]
    fn never_uses_more_gpus_than_parva() {
        let catalog = builtin_catalog();
        let services = demo_services();
        let request = Problem::parva(GpuModel::A100_80GB, &catalog, &services);
        let optimal = plan_optimal(&request).unwrap();
        let parva = plan_parva(&request).unwrap();
        assert!(optimal.gpu_count <= parva.gpu_count);
    }

    fn mixed_request<'a>(
        catalog: &'a tessera_core::ProfileCatalog,
        services: &'a [tessera_core::ServiceSlo],
        h100_cost: f64,
        h100_limit: Option<u64>,
    ) -> Problem<'a> {
        Problem {
            fleet: vec![
                GpuOffer::plain(GpuModel::A100_80GB),
                GpuOffer { model: GpuModel::H100_80GB, cost: h100_cost, limit: h100_limit },
            ],
            rule: LatencyRule::Queueing,
            ..Problem::parva(GpuModel::A100_80GB, catalog, services)
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
                // The exact search may take long on some of these; what is
                // checked here holds for whatever it has when time is up.
                let request = Problem {
                    rule: LatencyRule::Parva,
                    time_limit: Some(Duration::from_millis(500)),
                    ..mixed_request(&catalog, &services, 1.6, Some(limit))
                };
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
        let request = Problem {
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
        let request = Problem {
            fleet: vec![GpuOffer { model: GpuModel::A100_80GB, cost: 1.0, limit: Some(1) }],
            ..Problem::parva(GpuModel::A100_80GB, &catalog, &services)
        };
        // The bound alone proves it: the demo needs more than one A100.
        let error = plan_optimal(&request).unwrap_err();
        assert!(matches!(error, PlanError::NoPlanWithinLimits { allowed: 1, .. }), "{error}");
    }
}
