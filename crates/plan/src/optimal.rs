//! The `optimal` strategy: the fewest GPUs that meet every SLO, with a
//! proof (or a measured gap) against a lower bound.
//!
//! **Objective**, lexicographic: (1) GPUs; (2) provisioned slack, the sum
//! over services of provisioned / rate − 1; (3) segments.
//!
//! **Model.** Each service chooses one [`Mix`] (how many segments of which
//! configuration, see [`crate::options`]); what the GPUs must hold is the sum
//! of the chosen instance multisets, and [`Packer::min_gpus`] gives, exactly,
//! the fewest GPUs that hold it on the real MIG lattice. So the problem is
//! to pick one mix per service minimizing the packed GPU count.
//!
//! **Bound.** Every service needs at least its cheapest mix's compute
//! slices, so `⌈Σ min slices / slices per GPU⌉` GPUs are necessary.
//!
//! **Search.** A local search starts from every service's cheapest mix and
//! switches single services to other mixes while the objective improves.
//! For instances of up to [`EXACT_SERVICE_LIMIT`] services, a depth-first
//! branch and bound then explores every mix that could still lead to fewer
//! GPUs (a service may exceed its cheapest mix by at most the compute the
//! incumbent leaves unused), pruning on the bound above and memoizing
//! (depth, instance multiset) states. If it finishes, the GPU count is
//! proven optimal; under `--time-limit` it stops with the best plan found
//! and the gap to the bound. A second, node-budgeted pass then looks for
//! less slack and fewer segments among plans with that many GPUs.
//!
//! Under `parva` the mixes cover every plan (one size's best configuration
//! dominates its others), so "proven optimal" holds over all plans. Under
//! `queueing` a mix runs one configuration per size, and the proof holds
//! over plans of that form.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use tessera_core::{Lattice, Optimality, Packer, Plan, SizeCounts};

use crate::allocate::Segment;
use crate::bound::{price_of, round_up, service_price, tune_prices, PriceRegion, Prices};
use crate::error::PlanError;
use crate::latency::LatencyRule;
use crate::options::{service_options, Mix, OptionLimits, ServiceOptions};
use crate::parva::{build_plan, plan_parva, PlanRequest};

/// Largest instance (in services) the exact branch and bound is tried on.
pub const EXACT_SERVICE_LIMIT: usize = 400;

/// The exact search runs only when the heuristic is at most this many GPUs
/// above the lower bound (beyond that its option space explodes).
pub const EXACT_GAP_GPUS: u64 = 2;

/// Mixes per service for the local search: a few compute slices above the
/// cheapest, at most this many.
const HEURISTIC_LIMITS: OptionLimits = OptionLimits { extra_gpcs: 3, max_mixes: 24 };

/// Most mixes per service in the exact search.
const EXACT_MAX_MIXES: usize = 5_000;

/// Search nodes spent on tie-breaks among plans with the fewest GPUs.
const TIE_BREAK_NODES: u64 = 200_000;

/// Most memoized search states (beyond this the search runs unmemoized).
const MEMO_LIMIT: usize = 2_000_000;

/// Slack differences below this count as ties.
const SLACK_EPSILON: f64 = 1e-9;

/// Plans `request` with the `optimal` strategy.
pub fn plan_optimal(request: &PlanRequest<'_>) -> Result<Plan, PlanError> {
    request.check()?;
    let deadline = request.time_limit.map(|limit| Instant::now() + limit);
    let packer = Packer::new(request.gpu);
    let slices = u64::from(request.gpu.spec().compute_slices);

    let options = all_options(request, HEURISTIC_LIMITS)?;
    let min_gpcs: u64 = options.iter().map(|o| u64::from(o.min_gpcs)).sum();
    let region = PriceRegion::new(request.gpu);
    let prices = tune_prices(&region, request.gpu.spec().compute_slices, &options);
    let priced: f64 = request
        .services
        .iter()
        .map(|slo| Ok(service_price(request.profile(slo)?, slo, request.rule, request.max_procs, &prices)))
        .sum::<Result<f64, PlanError>>()?;
    let lower_bound = min_gpcs.div_ceil(slices).max(round_up(priced));

    // Two starts: every service's cheapest mix in compute, and in prices.
    let cheapest_priced: Vec<usize> = options.iter().map(|o| cheapest_by_price(o, &prices)).collect();
    let (choice, incumbent) = [vec![0; options.len()], cheapest_priced]
        .into_iter()
        .map(|start| {
            let choice = local_search(&options, &packer, start);
            let value = objective(&options, &choice, &packer);
            (choice, value)
        })
        .reduce(|a, b| if b.1.better_than(&a.1) { b } else { a })
        .expect("two starts");

    let gap_gpus = incumbent.gpus - lower_bound.min(incumbent.gpus);
    if request.services.len() > EXACT_SERVICE_LIMIT || gap_gpus > EXACT_GAP_GPUS {
        return finish(request, &options, &choice, lower_bound);
    }
    // A plan with at most the incumbent's GPUs leaves any one service at
    // most this many slices above its cheapest mix.
    let extra = (incumbent.gpus * slices - min_gpcs).min(u64::from(u32::MAX)) as u32;
    let wide = all_options(request, OptionLimits { extra_gpcs: extra, max_mixes: EXACT_MAX_MIXES })?;
    let complete = wide.iter().all(|o| o.mixes.len() < EXACT_MAX_MIXES);

    // Phase 1: the fewest GPUs, proven by exhausting the search.
    let mut fewest = BranchAndBound::new(&wide, packer, slices, prices, incumbent, Goal::FewestGpus, deadline);
    fewest.run();
    let proven = complete && !fewest.stopped;
    let (mut chosen_from, mut chosen, best) = match fewest.best_choice.take() {
        Some(found) => (&wide, found, fewest.best),
        None => (&options, choice, incumbent),
    };
    // Phase 2: among plans with that many GPUs, the least slack, then the
    // fewest segments, within a node budget.
    let mut ties = BranchAndBound::new(&wide, packer, slices, prices, best, Goal::Lexicographic, deadline);
    ties.node_budget = Some(TIE_BREAK_NODES);
    ties.run();
    if let Some(found) = ties.best_choice.take() {
        (chosen_from, chosen) = (&wide, found);
    }
    let bound = if proven { best.gpus } else { lower_bound };
    finish(request, chosen_from, &chosen, bound)
}

/// Builds the plan of `choice` and, under the `parva` rule, falls back to
/// the `parva` strategy's plan if that one is smaller (possible only when
/// the search was cut short), so `optimal` is never worse.
fn finish(
    request: &PlanRequest<'_>,
    options: &[ServiceOptions],
    choice: &[usize],
    lower_bound: u64,
) -> Result<Plan, PlanError> {
    let mixes: Vec<&Mix> = options.iter().zip(choice).map(|(o, &c)| &o.mixes[c]).collect();
    let mut plan = assemble(request, &mixes);
    if request.rule == LatencyRule::Parva {
        let parva = plan_parva(request)?;
        if parva.gpu_count < plan.gpu_count {
            plan = Plan { strategy: "optimal".to_string(), ..parva };
        }
    }
    let gpus = plan.gpu_count as u64;
    plan.optimality = Some(Optimality {
        lower_bound_gpus: lower_bound,
        proven_optimal: gpus == lower_bound,
        gap: if lower_bound > 0 { (gpus - lower_bound) as f64 / lower_bound as f64 } else { 0.0 },
    });
    Ok(plan)
}

fn all_options(request: &PlanRequest<'_>, limits: OptionLimits) -> Result<Vec<ServiceOptions>, PlanError> {
    request
        .services
        .iter()
        .map(|slo| service_options(request.profile(slo)?, slo, request.rule, request.max_procs, limits))
        .collect()
}

/// The value of a choice of mixes.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Objective {
    gpus: u64,
    slack: f64,
    segments: u64,
}

impl Objective {
    /// Lexicographically smaller, with slack ties within [`SLACK_EPSILON`].
    fn better_than(&self, other: &Objective) -> bool {
        if self.gpus != other.gpus {
            return self.gpus < other.gpus;
        }
        if (self.slack - other.slack).abs() > SLACK_EPSILON {
            return self.slack < other.slack;
        }
        self.segments < other.segments
    }
}

fn objective(options: &[ServiceOptions], choice: &[usize], packer: &Packer) -> Objective {
    let mixes = options.iter().zip(choice).map(|(o, &c)| &o.mixes[c]);
    let (counts, slack, segments) = mixes.fold((SizeCounts::EMPTY, 0.0, 0), |(counts, slack, segments), mix| {
        (counts.plus(&mix.counts), slack + mix.slack, segments + u64::from(mix.segments))
    });
    Objective { gpus: packer.min_gpus(&counts), slack, segments }
}

/// The index of a service's mix with the lowest price (first on ties).
fn cheapest_by_price(options: &ServiceOptions, prices: &Prices) -> usize {
    let price = |i: usize| price_of(prices, &options.mixes[i].counts);
    (0..options.mixes.len()).fold(0, |best, i| if price(i) < price(best) - 1e-12 { i } else { best })
}

/// Moves single services from `choice` to other mixes while that improves
/// the objective.
fn local_search(options: &[ServiceOptions], packer: &Packer, mut choice: Vec<usize>) -> Vec<usize> {
    let mut current = objective(options, &choice, packer);
    let mut counts = options.iter().zip(&choice).fold(SizeCounts::EMPTY, |acc, (o, &c)| acc.plus(&o.mixes[c].counts));
    loop {
        let mut improved = false;
        for (service, option) in options.iter().enumerate() {
            let old = &option.mixes[choice[service]];
            let without = counts.minus(&old.counts);
            for (index, mix) in option.mixes.iter().enumerate() {
                let with = without.plus(&mix.counts);
                let candidate = Objective {
                    gpus: packer.min_gpus(&with),
                    slack: current.slack - old.slack + mix.slack,
                    segments: current.segments - u64::from(old.segments) + u64::from(mix.segments),
                };
                if candidate.better_than(&current) {
                    choice[service] = index;
                    current = candidate;
                    counts = with;
                    improved = true;
                    break;
                }
            }
        }
        if !improved {
            return choice;
        }
    }
}

/// What a branch and bound improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// GPUs only: any plan with fewer GPUs than the incumbent.
    FewestGpus,
    /// The whole objective: GPUs, then slack, then segments.
    Lexicographic,
}

/// Depth-first branch and bound over one mix per service.
struct BranchAndBound<'a> {
    goal: Goal,
    options: &'a [ServiceOptions],
    /// Services in search order (fewest mixes first).
    order: Vec<usize>,
    packer: Packer,
    slices: u64,
    /// Instance prices of the packing bound (see [`crate::bound`]).
    prices: Prices,
    /// Per depth, the least compute, price, slack and segments still to come.
    rest_gpcs: Vec<u64>,
    rest_price: Vec<f64>,
    rest_slack: Vec<f64>,
    rest_segments: Vec<u64>,
    best: Objective,
    best_choice: Option<Vec<usize>>,
    current: Vec<usize>,
    memo: HashMap<(usize, SizeCounts), (f64, u64)>,
    deadline: Option<Instant>,
    /// Most nodes to visit; `None` for no limit.
    node_budget: Option<u64>,
    nodes: u64,
    /// Set when the deadline or the node budget cut the search short.
    stopped: bool,
}

impl<'a> BranchAndBound<'a> {
    fn new(
        options: &'a [ServiceOptions],
        packer: Packer,
        slices: u64,
        prices: Prices,
        incumbent: Objective,
        goal: Goal,
        deadline: Option<Instant>,
    ) -> Self {
        let mut order: Vec<usize> = (0..options.len()).collect();
        order.sort_by_key(|&s| options[s].mixes.len());
        let suffix = |value: &dyn Fn(&ServiceOptions) -> f64| {
            let mut sums = vec![0.0; order.len() + 1];
            for depth in (0..order.len()).rev() {
                sums[depth] = sums[depth + 1] + value(&options[order[depth]]);
            }
            sums
        };
        let min_of = |f: fn(&Mix) -> f64| move |o: &ServiceOptions| o.mixes.iter().map(f).fold(f64::INFINITY, f64::min);
        let rest_gpcs = suffix(&|o| f64::from(o.min_gpcs)).into_iter().map(|v| v as u64).collect();
        let rest_price =
            suffix(&|o| o.mixes.iter().map(|m| price_of(&prices, &m.counts)).fold(f64::INFINITY, f64::min));
        let rest_slack = suffix(&min_of(|m| m.slack));
        let rest_segments = suffix(&min_of(|m| f64::from(m.segments))).into_iter().map(|v| v as u64).collect();
        BranchAndBound {
            goal,
            options,
            current: vec![0; options.len()],
            order,
            packer,
            slices,
            prices,
            rest_gpcs,
            rest_price,
            rest_slack,
            rest_segments,
            best: incumbent,
            best_choice: None,
            memo: HashMap::new(),
            deadline,
            node_budget: None,
            nodes: 0,
            stopped: false,
        }
    }

    /// `true` when a plan bounded below by `bound` could beat the incumbent.
    fn improves(&self, bound: &Objective) -> bool {
        match self.goal {
            Goal::FewestGpus => bound.gpus < self.best.gpus,
            Goal::Lexicographic => bound.better_than(&self.best),
        }
    }

    fn run(&mut self) {
        self.descend(0, SizeCounts::EMPTY, 0.0, 0);
    }

    fn descend(&mut self, depth: usize, counts: SizeCounts, slack: f64, segments: u64) {
        if self.stopped {
            return;
        }
        self.nodes += 1;
        let over_budget = self.node_budget.is_some_and(|budget| self.nodes > budget);
        if over_budget || (self.nodes % 4096 == 0 && self.deadline.is_some_and(|d| Instant::now() >= d)) {
            self.stopped = true;
            return;
        }
        let compute = u64::from(counts.compute_slices()) + self.rest_gpcs[depth];
        let bound = Objective {
            gpus: self
                .packer
                .min_gpus(&counts)
                .max(compute.div_ceil(self.slices))
                .max(round_up(price_of(&self.prices, &counts) + self.rest_price[depth])),
            slack: slack + self.rest_slack[depth],
            segments: segments + self.rest_segments[depth],
        };
        if !self.improves(&bound) {
            return;
        }
        if depth == self.order.len() {
            self.best = bound;
            self.best_choice = Some(self.current.clone());
            return;
        }
        match self.memo.get(&(depth, counts)) {
            Some(&(seen_slack, seen_segments))
                if seen_slack < slack + SLACK_EPSILON
                    && (seen_slack < slack - SLACK_EPSILON || seen_segments <= segments) =>
            {
                return;
            }
            _ if self.memo.len() < MEMO_LIMIT => {
                self.memo.insert((depth, counts), (slack, segments));
            }
            _ => {}
        }
        let service = self.order[depth];
        let compute_before = u64::from(counts.compute_slices()) + self.rest_gpcs[depth + 1];
        for (index, mix) in self.options[service].mixes.iter().enumerate() {
            // Mixes come cheapest first: once the compute bound alone
            // exceeds the incumbent, every later mix does too.
            let gpus_bound = (compute_before + u64::from(mix.gpcs)).div_ceil(self.slices);
            if gpus_bound > self.best.gpus || (self.goal == Goal::FewestGpus && gpus_bound == self.best.gpus) {
                break;
            }
            self.current[service] = index;
            self.descend(depth + 1, counts.plus(&mix.counts), slack + mix.slack, segments + u64::from(mix.segments));
        }
    }
}

/// Packs the chosen mixes onto GPUs and builds the plan.
fn assemble(request: &PlanRequest<'_>, mixes: &[&Mix]) -> Plan {
    let counts = mixes.iter().fold(SizeCounts::EMPTY, |acc, mix| acc.plus(&mix.counts));
    let mut queues: [VecDeque<Segment>; 8] = Default::default();
    for (service, mix) in mixes.iter().enumerate() {
        for &(point, n) in &mix.parts {
            let queue = &mut queues[usize::from(point.config.size_gpcs)];
            queue.extend(std::iter::repeat_n(Segment { service, point }, n as usize));
        }
    }
    let gpus: Vec<Vec<Segment>> = Packer::new(request.gpu)
        .pack(&counts)
        .iter()
        .map(|gpu| {
            gpu.sizes_desc()
                .map(|size| queues[usize::from(size)].pop_front().expect("the packing holds every segment"))
                .collect()
        })
        .collect();
    build_plan(request, &Lattice::new(request.gpu), gpus, "optimal")
}

/// How long the search may run by default.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::{verify, VerifyRequest};
    use tessera_core::synthetic::{builtin_catalog, demo_services};
    use tessera_core::GpuModel;

    #[test]
    fn demo_is_planned_optimally_and_verifies_under_both_rules() {
        let catalog = builtin_catalog();
        let services = demo_services();
        for rule in LatencyRule::ALL {
            let request = PlanRequest { rule, ..PlanRequest::new(GpuModel::A100_80GB, &catalog, &services) };
            let plan = plan_optimal(&request).unwrap();
            let optimality = plan.optimality.unwrap();
            assert!(optimality.lower_bound_gpus as usize <= plan.gpu_count);
            let check = VerifyRequest { catalog: &catalog, services: &services, rule, max_procs: 5 };
            assert_eq!(verify(&plan, &check), vec![], "{rule}");
            assert!(plan
                .services
                .iter()
                .all(|s| s.met && s.worst_latency_ms <= s.latency_slo_ms || rule == LatencyRule::Parva));
        }
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

    #[test]
    fn objective_orders_gpus_then_slack_then_segments() {
        let base = Objective { gpus: 3, slack: 0.5, segments: 9 };
        assert!(Objective { gpus: 2, slack: 9.0, segments: 99 }.better_than(&base));
        assert!(Objective { gpus: 3, slack: 0.4, segments: 99 }.better_than(&base));
        assert!(Objective { gpus: 3, slack: 0.5 + 1e-12, segments: 8 }.better_than(&base));
        assert!(!base.better_than(&base));
    }
}
