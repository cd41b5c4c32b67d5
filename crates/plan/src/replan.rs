//! Replanning: from the plan that runs to a plan for new SLOs that changes
//! as little of the fleet as it can.
//!
//! **Objective**, lexicographic: every SLO met; at most the fresh optimum's
//! GPUs plus [`ReplanRequest::max_extra_gpus`]; then the fewest GPUs whose
//! MIG layout is created, changed or torn down; then the fewest MIG
//! instances created or destroyed; then the fewest MPS processes started
//! (see [`tessera_core::diff`] for what each counts).
//!
//! **Method.** Every GPU of the current plan (less the ones drained or
//! lost) keeps its MIG layout, and every instance keeps its segment where
//! the service still exists with the same model and the segment's
//! configuration is still usable; the rest of its instances are *free*.
//! Services then hold more or less than their new rates:
//!
//! 1. a service short of its rate takes free instances, then instances of
//!    services with more than they need (as long as those stay covered),
//!    running its best configuration of that size — the layout stays;
//! 2. what is still short (the *residual*) is planned by the `optimal`
//!    strategy on new GPUs; a new GPU whose instances all fit in the unused
//!    slices of one kept GPU moves there;
//! 3. free instances left over go to a service that can run them (a
//!    reassigned instance keeps its layout; a destroyed one would not), and
//!    a GPU left with nothing to run is given back;
//! 4. while the plan has more GPUs than the bound, the kept GPUs that waste
//!    the most compute (unused slices, free instances, segments their
//!    services can spare) are dissolved and their services replanned, with
//!    twice as many GPUs dissolved as are over the bound each round.
//!
//! The fresh optimal plan, numbered to match the current plan where it can
//! ([`align_to`]), is the baseline: the replan is kept only when it meets
//! every SLO, passes [`verify`](crate::verify), stays within the bound and
//! changes no more than the fresh plan would; otherwise the fresh plan is
//! returned. Either way [`Replan`] carries both and both diffs.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

use tessera_core::{
    diff_plans, layout::validate_layout, GpuAssignment, GpuModel, InstanceAssignment, Optimality, Placement, Plan,
    PlanDiff, ProfilePoint, ServiceSlo,
};

use crate::allocate::Segment;
use crate::assemble::{instance_at, plan_of};
use crate::error::PlanError;
use crate::optimal::plan_optimal;
use crate::problem::{usable_points, Problem};
use crate::report::{covers, service_reports};
use crate::verify::{verify, VerifyRequest};

/// Rounds of dissolving kept GPUs before the stable plan gives up (each
/// dissolves twice as many as the one before).
const MAX_DISSOLVE_ROUNDS: usize = 8;

/// One GPU of a plan, by node and index within the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuPosition {
    /// Node number.
    pub node: u32,
    /// GPU index within the node.
    pub index: u32,
}

impl fmt::Display for GpuPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.node, self.index)
    }
}

/// What a replan is asked.
#[derive(Debug, Clone)]
pub struct ReplanRequest<'a> {
    /// The new SLOs with the fleet, profiles and rules to plan them under.
    pub plan: Problem<'a>,
    /// The plan that runs now.
    pub current: &'a Plan,
    /// GPUs the replan may use beyond the fresh optimum.
    pub max_extra_gpus: u64,
    /// GPUs of the current plan that must not be used (drained or lost):
    /// their services are replanned onto the rest.
    pub removed_gpus: &'a [GpuPosition],
}

/// A replan, with the fresh optimum beside it.
#[derive(Debug, Clone)]
pub struct Replan {
    /// The plan to move to.
    pub plan: Plan,
    /// The fresh optimal plan of the new SLOs, numbered to match the
    /// current plan where it can.
    pub fresh: Plan,
    /// From the current plan to `plan`.
    pub diff: PlanDiff,
    /// From the current plan to `fresh`.
    pub fresh_diff: PlanDiff,
    /// `true` when `plan` is the fresh plan with its segments reseated
    /// ([`reseat`]) because the layout-keeping plan missed an SLO or the
    /// bound, or changed more.
    pub from_fresh: bool,
}

/// A MIG instance and what it runs, if anything.
#[derive(Debug, Clone, Copy)]
struct Slot {
    placement: Placement,
    segment: Option<Segment>,
}

/// A GPU being replanned: the current plan's (with its position) or new.
#[derive(Debug, Clone)]
struct WorkGpu {
    model: GpuModel,
    position: Option<GpuPosition>,
    slots: Vec<Slot>,
}

impl WorkGpu {
    fn used_gpcs(&self) -> u32 {
        self.slots.iter().map(|s| u32::from(s.placement.profile.compute_slices)).sum()
    }

    fn placements(&self) -> Vec<Placement> {
        self.slots.iter().map(|s| s.placement).collect()
    }
}

/// The configurations each service may run on each GPU model, with their
/// maximum provisioning ratios, by throughput (best first).
struct Candidates<'r> {
    request: &'r Problem<'r>,
    cache: HashMap<(GpuModel, usize), Vec<(ProfilePoint, f64)>>,
}

impl<'r> Candidates<'r> {
    fn new(request: &'r Problem<'r>) -> Self {
        Candidates { request, cache: HashMap::new() }
    }

    fn of(&mut self, model: GpuModel, service: usize) -> &[(ProfilePoint, f64)] {
        let request = self.request;
        self.cache.entry((model, service)).or_insert_with(|| {
            let slo = &request.services[service];
            let Some(profile) = request.catalog.get(model, &slo.model) else {
                return Vec::new();
            };
            let mut points: Vec<(ProfilePoint, f64)> = usable_points(profile, slo, request.max_procs)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| request.rule.max_provision_ratio(&p, slo.latency_slo_ms).map(|ratio| (p, ratio)))
                .collect();
            points.sort_by(|a, b| b.0.throughput_rps.total_cmp(&a.0.throughput_rps));
            points
        })
    }

    /// The best configuration of `size` for `service` once its provisioning
    /// reaches `ratio` (rate multiples).
    fn best(&mut self, model: GpuModel, service: usize, size: u8, ratio: impl Fn(f64) -> f64) -> Option<ProfilePoint> {
        self.of(model, service)
            .iter()
            .find(|(p, cap)| p.config.size_gpcs == size && ratio(p.throughput_rps) <= *cap)
            .map(|(p, _)| *p)
    }

    /// The configuration `point` as the catalogue has it now, if the
    /// service may still run it.
    fn current(&mut self, model: GpuModel, service: usize, instance: &InstanceAssignment) -> Option<ProfilePoint> {
        self.of(model, service)
            .iter()
            .find(|(p, _)| {
                p.config.size_gpcs == instance.size
                    && p.config.batch == instance.batch
                    && p.config.procs == instance.procs
            })
            .map(|(p, _)| *p)
    }

    fn cap(&mut self, model: GpuModel, service: usize, point: &ProfilePoint) -> f64 {
        self.of(model, service).iter().find(|(p, _)| p.config == point.config).map_or(f64::INFINITY, |(_, cap)| *cap)
    }
}

/// Per service: what it has and needs.
#[derive(Debug, Clone)]
struct Ledger {
    rate_rps: Vec<f64>,
    provisioned_rps: Vec<f64>,
}

impl Ledger {
    fn of(services: &[ServiceSlo], gpus: &[WorkGpu]) -> Self {
        let mut provisioned_rps = vec![0.0; services.len()];
        for segment in gpus.iter().flat_map(|g| &g.slots).filter_map(|s| s.segment) {
            provisioned_rps[segment.service] += segment.point.throughput_rps;
        }
        Ledger { rate_rps: services.iter().map(|s| s.rate_rps).collect(), provisioned_rps }
    }

    fn deficit(&self, service: usize) -> f64 {
        if covers(self.provisioned_rps[service], self.rate_rps[service]) {
            0.0
        } else {
            self.rate_rps[service] - self.provisioned_rps[service]
        }
    }

    /// `true` when `service` stays covered without `throughput_rps`.
    fn can_spare(&self, service: usize, throughput_rps: f64) -> bool {
        covers(self.provisioned_rps[service] - throughput_rps, self.rate_rps[service])
    }

    /// The provisioning ratio of `service` with `extra_rps` more.
    fn ratio_with(&self, service: usize, extra_rps: f64) -> f64 {
        (self.provisioned_rps[service] + extra_rps) / self.rate_rps[service]
    }
}

/// Plans the new SLOs from the current plan (see the module documentation).
pub fn replan(request: &ReplanRequest<'_>) -> Result<Replan, PlanError> {
    let plan_request = &request.plan;
    plan_request.check()?;
    let inherited = inherit(request)?;
    let fresh = plan_optimal(plan_request)?;
    let fresh = align_to(request.current, fresh, request.removed_gpus);
    let fresh_diff = diff_plans(request.current, &fresh);
    let bound = fresh.gpu_count as u64 + request.max_extra_gpus;

    let verified = |plan: &Plan| {
        plan.gpu_count as u64 <= bound
            && plan.services.iter().all(|s| s.met)
            && verify(
                plan,
                &VerifyRequest {
                    catalog: plan_request.catalog,
                    services: plan_request.services,
                    rule: plan_request.rule,
                    max_procs: plan_request.max_procs,
                },
            )
            .is_empty()
    };
    // The fresh plan rebuilt on old layouts, or (should that fail the
    // verifier) as it is; either reseated.
    let rebuilt = keep_layouts(plan_request, request.current, fresh.clone(), request.removed_gpus);
    let rebuilt = if verified(&rebuilt) { rebuilt } else { fresh.clone() };
    let reseated = reseat(request.current, rebuilt);
    let reseated_diff = diff_plans(request.current, &reseated);
    let stable = stable_plan(plan_request, &inherited, bound, request.current, request.removed_gpus)
        .ok()
        .filter(|plan| verified(plan))
        .map(|plan| {
            let diff = diff_plans(request.current, &plan);
            (plan, diff)
        });
    let (mut plan, diff, from_fresh) = match stable {
        Some((plan, diff)) if diff.totals.churn() <= reseated_diff.totals.churn() => (plan, diff, false),
        _ => (reseated, reseated_diff, true),
    };
    plan.optimality = fresh.optimality.as_ref().map(|fresh_optimality| {
        let value = if fresh_optimality.objective == "gpus" { plan.gpu_count as f64 } else { plan.total_cost };
        let lower_bound = fresh_optimality.lower_bound;
        Optimality {
            objective: fresh_optimality.objective.clone(),
            value,
            lower_bound,
            proven_optimal: value <= lower_bound,
            gap: if lower_bound > 0.0 { (value - lower_bound) / lower_bound } else { 0.0 },
        }
    });
    plan.notes.push(format!(
        "replanned from a plan of {}; fresh optimum: {} (+{} allowed)",
        tessera_core::text::count(request.current.gpu_count, "GPU"),
        tessera_core::text::count(fresh.gpu_count, "GPU"),
        request.max_extra_gpus
    ));
    if from_fresh {
        plan.notes.push("the fresh plan's layouts, segments reseated, change least".to_string());
    }
    Ok(Replan { plan, fresh, diff, fresh_diff, from_fresh })
}

/// The current plan's GPUs (less the removed ones) as work GPUs, each
/// instance keeping its segment where the service may still run it.
fn inherit(request: &ReplanRequest<'_>) -> Result<Vec<WorkGpu>, PlanError> {
    let current = request.current;
    let plan = &request.plan;
    let positions: HashSet<GpuPosition> =
        current.gpus.iter().map(|g| GpuPosition { node: g.node, index: g.index }).collect();
    if let Some(missing) = request.removed_gpus.iter().find(|p| !positions.contains(p)) {
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
        if !request.removed_gpus.contains(&position) {
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

/// The stable plan: inherit, fill, plan the residual, and dissolve the most
/// wasteful kept GPUs while over `bound`.
fn stable_plan(
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

/// Under a rule that limits over-provisioning, frees segments of services
/// provisioned beyond what their configurations allow, smallest first,
/// while the service stays covered.
fn release_over_provisioned(request: &Problem<'_>, gpus: &mut [WorkGpu], candidates: &mut Candidates<'_>) {
    let mut ledger = Ledger::of(request.services, gpus);
    let mut slots: Vec<(usize, usize)> =
        gpus.iter().enumerate().flat_map(|(g, gpu)| (0..gpu.slots.len()).map(move |s| (g, s))).collect();
    slots.sort_by(|&(ga, sa), &(gb, sb)| {
        let tp = |g: usize, s: usize| gpus[g].slots[s].segment.map_or(0.0, |seg| seg.point.throughput_rps);
        tp(ga, sa).total_cmp(&tp(gb, sb))
    });
    let mut tightest: Vec<f64> = vec![f64::INFINITY; request.services.len()];
    for gpu in gpus.iter() {
        for segment in gpu.slots.iter().filter_map(|s| s.segment) {
            let cap = candidates.cap(gpu.model, segment.service, &segment.point);
            tightest[segment.service] = tightest[segment.service].min(cap);
        }
    }
    for (g, s) in slots {
        let Some(segment) = gpus[g].slots[s].segment else { continue };
        let service = segment.service;
        if ledger.ratio_with(service, 0.0) > tightest[service]
            && ledger.can_spare(service, segment.point.throughput_rps)
        {
            gpus[g].slots[s].segment = None;
            ledger.provisioned_rps[service] -= segment.point.throughput_rps;
        }
    }
}

/// How good an instance is for a service short of its rate, smaller first:
/// whether it leaves the service short, its size (smallest when it covers,
/// largest when not), whether another service gives it up, its throughput.
type PickKey = (bool, u8, bool, f64);

/// Covers deficits in the kept layouts: free instances first, then
/// instances other services can spare (see the module documentation).
fn fill_deficits(request: &Problem<'_>, gpus: &mut [WorkGpu], candidates: &mut Candidates<'_>) {
    let mut ledger = Ledger::of(request.services, gpus);
    let mut short: Vec<usize> = (0..request.services.len()).filter(|&s| ledger.deficit(s) > 0.0).collect();
    short.sort_by(|&a, &b| ledger.deficit(b).total_cmp(&ledger.deficit(a)).then(a.cmp(&b)));
    for service in short {
        while ledger.deficit(service) > 0.0 {
            let deficit = ledger.deficit(service);
            // (short, size, taken from a service, throughput): smaller is better.
            let mut best: Option<(PickKey, usize, usize, ProfilePoint)> = None;
            for (g, gpu) in gpus.iter().enumerate() {
                for (s, slot) in gpu.slots.iter().enumerate() {
                    let taken = match slot.segment {
                        None => false,
                        Some(other)
                            if other.service != service
                                && ledger.can_spare(other.service, other.point.throughput_rps) =>
                        {
                            true
                        }
                        Some(_) => continue,
                    };
                    let size = slot.placement.profile.compute_slices;
                    let Some(point) = candidates.best(gpu.model, service, size, |tp| ledger.ratio_with(service, tp))
                    else {
                        continue;
                    };
                    let covering = point.throughput_rps >= deficit;
                    // Covering candidates: the smallest; others: the most throughput.
                    let key = if covering {
                        (false, size, taken, point.throughput_rps)
                    } else {
                        (true, u8::MAX - size, taken, -point.throughput_rps)
                    };
                    if best.as_ref().is_none_or(|(k, ..)| key.partial_cmp(k) == Some(std::cmp::Ordering::Less)) {
                        best = Some((key, g, s, point));
                    }
                }
            }
            let Some((_, g, s, point)) = best else { break };
            if let Some(other) = gpus[g].slots[s].segment {
                ledger.provisioned_rps[other.service] -= other.point.throughput_rps;
            }
            gpus[g].slots[s].segment = Some(Segment { service, point });
            ledger.provisioned_rps[service] += point.throughput_rps;
        }
    }
}

/// Plans what the kept layouts cannot cover on new GPUs, with the
/// `optimal` strategy and the fleet's limits less the GPUs kept.
fn plan_residual(request: &Problem<'_>, gpus: &[WorkGpu]) -> Result<Vec<WorkGpu>, PlanError> {
    let ledger = Ledger::of(request.services, gpus);
    let residual: Vec<ServiceSlo> = request
        .services
        .iter()
        .enumerate()
        .filter(|&(s, _)| ledger.deficit(s) > 0.0)
        .map(|(s, slo)| ServiceSlo { rate_rps: ledger.deficit(s), ..slo.clone() })
        .collect();
    if residual.is_empty() {
        return Ok(Vec::new());
    }
    let mut fleet = request.fleet.clone();
    for offer in &mut fleet {
        let used = gpus.iter().filter(|g| g.model == offer.model).count() as u64;
        offer.limit = offer.limit.map(|limit| limit.saturating_sub(used));
    }
    fleet.retain(|offer| offer.limit != Some(0));
    if fleet.is_empty() {
        return Err(PlanError::EmptyFleet);
    }
    let sub = Problem { fleet, services: &residual, ..request.clone() };
    let plan = plan_optimal(&sub)?;
    let index: HashMap<&str, usize> =
        request.services.iter().enumerate().map(|(i, s)| (s.service.as_str(), i)).collect();
    Ok(plan
        .gpus
        .iter()
        .map(|gpu| WorkGpu {
            model: gpu.gpu_model,
            position: None,
            slots: gpu
                .instances
                .iter()
                .map(|instance| Slot {
                    placement: Placement {
                        profile: gpu
                            .gpu_model
                            .spec()
                            .profile_by_name(&instance.profile)
                            .expect("planned profiles exist"),
                        start: instance.start,
                    },
                    segment: Some(Segment {
                        service: index[instance.service.as_str()],
                        point: ProfilePoint {
                            config: tessera_core::SegmentConfig {
                                size_gpcs: instance.size,
                                batch: instance.batch,
                                procs: instance.procs,
                            },
                            throughput_rps: instance.throughput_rps,
                            latency_ms: instance.latency_ms,
                            memory_gb: None,
                        },
                    }),
                })
                .collect(),
        })
        .collect())
}

/// A valid start for `profile` beside the instances of `gpu`, if any.
fn free_start(gpu: &WorkGpu, profile: &'static tessera_core::MigProfile) -> Option<u8> {
    let mut placements = gpu.placements();
    placements.push(Placement { profile, start: 0 });
    profile.starts.iter().copied().find(|&start| {
        *placements.last_mut().expect("just pushed") = Placement { profile, start };
        validate_layout(gpu.model, &placements).is_ok()
    })
}

/// Moves each new GPU whose instances all fit in the unused slices of one
/// kept GPU there: one layout changed instead of one GPU added. With
/// `spread`, a new GPU whose instances fit in unused slices of several kept
/// GPUs moves too (GPUs already changed first): more layouts change, one
/// GPU fewer.
fn absorb_new_gpus(gpus: &mut Vec<WorkGpu>, kept_count: usize, spread: bool) {
    let mut touched = vec![false; kept_count];
    let mut g = kept_count;
    while g < gpus.len() {
        let mut order: Vec<usize> = (0..kept_count).filter(|&k| gpus[k].model == gpus[g].model).collect();
        order.sort_by_key(|&k| !touched[k]);
        let targets = if spread { placements_across(gpus, g, &order) } else { placements_within_one(gpus, g, &order) };
        match targets {
            Some(targets) => {
                let new = gpus.remove(g);
                for (slot, (target, start)) in new.slots.into_iter().zip(targets) {
                    touched[target] = true;
                    gpus[target].slots.push(Slot { placement: Placement { start, ..slot.placement }, ..slot });
                }
            }
            None => g += 1,
        }
    }
}

/// Where each instance of `gpus[new]` fits on one GPU of `order`, if any.
fn placements_within_one(gpus: &[WorkGpu], new: usize, order: &[usize]) -> Option<Vec<(usize, u8)>> {
    order.iter().find_map(|&k| {
        let mut trial = gpus[k].clone();
        let mut targets = Vec::new();
        for slot in &gpus[new].slots {
            let start = free_start(&trial, slot.placement.profile)?;
            trial.slots.push(Slot { placement: Placement { start, ..slot.placement }, ..*slot });
            targets.push((k, start));
        }
        Some(targets)
    })
}

/// Where each instance of `gpus[new]` fits, first fit over the GPUs of
/// `order`, if all do.
fn placements_across(gpus: &[WorkGpu], new: usize, order: &[usize]) -> Option<Vec<(usize, u8)>> {
    let mut trials: HashMap<usize, WorkGpu> = HashMap::new();
    let mut targets = Vec::new();
    for slot in &gpus[new].slots {
        let (k, start) = order.iter().find_map(|&k| {
            let trial = trials.get(&k).unwrap_or(&gpus[k]);
            free_start(trial, slot.placement.profile).map(|start| (k, start))
        })?;
        let trial = trials.entry(k).or_insert_with(|| gpus[k].clone());
        trial.slots.push(Slot { placement: Placement { start, ..slot.placement }, ..*slot });
        targets.push((k, start));
    }
    Some(targets)
}

/// Gives each free instance of a GPU that still runs something to the
/// service that can run it with the least over-provisioning (its layout
/// then stays); an instance nobody can run is destroyed.
fn assign_leftovers(request: &Problem<'_>, gpus: &mut [WorkGpu], candidates: &mut Candidates<'_>) {
    let mut ledger = Ledger::of(request.services, gpus);
    for gpu in gpus.iter_mut() {
        if gpu.slots.iter().all(|s| s.segment.is_none()) {
            continue;
        }
        let model = gpu.model;
        let mut s = 0;
        while s < gpu.slots.len() {
            if gpu.slots[s].segment.is_some() {
                s += 1;
                continue;
            }
            let size = gpu.slots[s].placement.profile.compute_slices;
            let mut services: Vec<usize> =
                gpu.slots.iter().filter_map(|slot| slot.segment.map(|x| x.service)).collect();
            services.sort_by(|&a, &b| ledger.ratio_with(a, 0.0).total_cmp(&ledger.ratio_with(b, 0.0)).then(a.cmp(&b)));
            services.dedup();
            let chosen = services.iter().find_map(|&service| {
                candidates.best(model, service, size, |tp| ledger.ratio_with(service, tp)).map(|p| (service, p))
            });
            match chosen {
                Some((service, point)) => {
                    gpu.slots[s].segment = Some(Segment { service, point });
                    ledger.provisioned_rps[service] += point.throughput_rps;
                    s += 1;
                }
                None => {
                    gpu.slots.remove(s);
                }
            }
        }
    }
}

/// The work GPUs as a plan: kept GPUs at their positions, new ones at the
/// positions of given-back GPUs of their model first (never `removed`
/// ones), then after the last.
fn assemble(request: &Problem<'_>, gpus: Vec<WorkGpu>, current: &Plan, removed: &[GpuPosition]) -> Plan {
    let gpus_per_node = current.gpus_per_node.max(1);
    let slot_of = |p: GpuPosition| u64::from(p.node) * u64::from(gpus_per_node) + u64::from(p.index);
    let taken: HashSet<GpuPosition> = gpus.iter().filter_map(|g| g.position).collect();
    let mut free: Vec<(GpuModel, GpuPosition)> = current
        .gpus
        .iter()
        .map(|g| (g.gpu_model, GpuPosition { node: g.node, index: g.index }))
        .filter(|(_, p)| !taken.contains(p) && !removed.contains(p))
        .collect();
    let mut next =
        current.gpus.iter().map(|g| slot_of(GpuPosition { node: g.node, index: g.index }) + 1).max().unwrap_or(0);
    let mut assignments: Vec<GpuAssignment> = Vec::with_capacity(gpus.len());
    for gpu in gpus {
        let position = gpu.position.unwrap_or_else(|| {
            if let Some(at) = free.iter().position(|(model, _)| *model == gpu.model) {
                return free.remove(at).1;
            }
            let position = GpuPosition {
                node: (next / u64::from(gpus_per_node)) as u32,
                index: (next % u64::from(gpus_per_node)) as u32,
            };
            next += 1;
            position
        });
        let mut instances: Vec<InstanceAssignment> =
            gpu.slots.iter().filter_map(|slot| Some(instance_at(request, &slot.placement, &slot.segment?))).collect();
        instances.sort_by(|a, b| b.size.cmp(&a.size).then(a.start.cmp(&b.start)));
        assignments.push(GpuAssignment { node: position.node, index: position.index, gpu_model: gpu.model, instances });
    }
    assignments.sort_by_key(|g| (g.node, g.index));
    finish_plan(request, current, assignments, "replan")
}

/// A plan of `gpus` for `request`, carrying the current plan's node
/// numbering, cluster names and images.
fn finish_plan(request: &Problem<'_>, current: &Plan, gpus: Vec<GpuAssignment>, strategy: &str) -> Plan {
    let nodes_named = gpus.iter().all(|g| (g.node as usize) < current.node_names.len());
    Plan {
        node_names: if nodes_named { current.node_names.clone() } else { Vec::new() },
        images: current.images.clone(),
        ..plan_of(request, gpus, strategy, current.gpus_per_node.max(1))
    }
}

/// `new` renumbered to match `current`: each GPU takes the position of a
/// GPU of `current` (never one of `excluded`) that is identical, else one
/// with the same layout, else one of the same model, else a position after
/// the last; so a diff from `current` counts only what must change.
pub fn align_to(current: &Plan, mut new: Plan, excluded: &[GpuPosition]) -> Plan {
    let gpus_per_node = current.gpus_per_node.max(1);
    let open: Vec<&GpuAssignment> =
        current.gpus.iter().filter(|g| !excluded.contains(&GpuPosition { node: g.node, index: g.index })).collect();
    let mut used = vec![false; open.len()];
    let mut position: Vec<Option<GpuPosition>> = vec![None; new.gpus.len()];
    let mut match_by = |key: &dyn Fn(&GpuAssignment) -> String| {
        let mut pool: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, gpu) in open.iter().enumerate().rev().filter(|(i, _)| !used[*i]) {
            pool.entry(key(gpu)).or_default().push(i);
        }
        for (gpu, at) in new.gpus.iter().zip(position.iter_mut()).filter(|(_, at)| at.is_none()) {
            if let Some(i) = pool.get_mut(&key(gpu)).and_then(Vec::pop) {
                used[i] = true;
                *at = Some(GpuPosition { node: open[i].node, index: open[i].index });
            }
        }
    };
    match_by(&|g| format!("{} {:?}", g.gpu_model, sorted(g.instances.iter().map(segment_key))));
    match_by(&|g| format!("{} {:?}", g.gpu_model, sorted(g.instances.iter().map(|i| (i.profile.clone(), i.start)))));
    match_by(&|g| g.gpu_model.to_string());
    let mut next = current
        .gpus
        .iter()
        .map(|g| u64::from(g.node) * u64::from(gpus_per_node) + u64::from(g.index) + 1)
        .max()
        .unwrap_or(0);
    for (gpu, position) in new.gpus.iter_mut().zip(position) {
        let position = position.unwrap_or_else(|| {
            let at = GpuPosition {
                node: (next / u64::from(gpus_per_node)) as u32,
                index: (next % u64::from(gpus_per_node)) as u32,
            };
            next += 1;
            at
        });
        gpu.node = position.node;
        gpu.index = position.index;
    }
    new.gpus.sort_by_key(|g| (g.node, g.index));
    new.gpus_per_node = gpus_per_node;
    new
}

/// An instance and its segment, as one comparable key.
fn segment_key(instance: &InstanceAssignment) -> (String, u8, String, String, u32, u32) {
    let i = instance;
    (i.profile.clone(), i.start, i.service.clone(), i.model.clone(), i.batch, i.procs)
}

fn sorted<T: Ord>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut items: Vec<T> = items.collect();
    items.sort();
    items
}

/// `plan` with its segments moved between instances of the same GPU model
/// and MIG profile so that as many as possible sit where the same segment
/// runs in `current`: every service keeps the same segments, so the plan
/// stays valid, and fewer processes restart.
pub fn reseat(current: &Plan, mut plan: Plan) -> Plan {
    type PoolKey = (GpuModel, String);
    let old: HashMap<(u32, u32), &GpuAssignment> = current.gpus.iter().map(|g| ((g.node, g.index), g)).collect();
    let mut pool: HashMap<PoolKey, Vec<InstanceAssignment>> = HashMap::new();
    for gpu in &plan.gpus {
        for instance in &gpu.instances {
            pool.entry((gpu.gpu_model, instance.profile.clone())).or_default().push(instance.clone());
        }
    }
    let mut filled: Vec<Vec<bool>> = plan.gpus.iter().map(|g| vec![false; g.instances.len()]).collect();
    for (gpu, filled) in plan.gpus.iter_mut().zip(&mut filled) {
        let Some(before) = old.get(&(gpu.node, gpu.index)).filter(|o| o.gpu_model == gpu.gpu_model) else {
            continue;
        };
        for (instance, filled) in gpu.instances.iter_mut().zip(filled.iter_mut()) {
            let Some(was) =
                before.instances.iter().find(|o| o.profile == instance.profile && o.start == instance.start)
            else {
                continue;
            };
            let Some(candidates) = pool.get_mut(&(gpu.gpu_model, instance.profile.clone())) else { continue };
            let same = |c: &InstanceAssignment| {
                (c.service.as_str(), c.model.as_str(), c.batch, c.procs)
                    == (was.service.as_str(), was.model.as_str(), was.batch, was.procs)
            };
            if let Some(k) = candidates.iter().position(same) {
                let segment = candidates.swap_remove(k);
                *instance = InstanceAssignment { start: instance.start, ..segment };
                *filled = true;
            }
        }
    }
    for (gpu, filled) in plan.gpus.iter_mut().zip(&filled) {
        for (instance, &done) in gpu.instances.iter_mut().zip(filled) {
            if !done {
                let candidates =
                    pool.get_mut(&(gpu.gpu_model, instance.profile.clone())).expect("every profile pooled");
                let segment = candidates.pop().expect("as many segments as instances per profile");
                *instance = InstanceAssignment { start: instance.start, ..segment };
            }
        }
    }
    plan
}

/// Rebuilds GPUs of `plan` (aligned to `current`) whose layout no GPU of
/// `current` at their position has on the layout of such a GPU of
/// `current` that holds all their instances' profiles and more: each
/// segment moves into an instance of its profile, and the extra instances
/// run the segment they ran before (when the service may still run it) or
/// one more segment of a service of the GPU. The layout then stays, at the
/// price of some over-provisioning and no GPU more.
fn keep_layouts(request: &Problem<'_>, current: &Plan, mut plan: Plan, removed: &[GpuPosition]) -> Plan {
    let at = |g: &GpuAssignment| GpuPosition { node: g.node, index: g.index };
    let layout = |g: &GpuAssignment| sorted(g.instances.iter().map(|i| (i.profile.clone(), i.start)));
    let old: HashMap<GpuPosition, &GpuAssignment> = current.gpus.iter().map(|g| (at(g), g)).collect();
    let new_layouts: HashMap<GpuPosition, (GpuModel, Vec<(String, u8)>)> =
        plan.gpus.iter().map(|g| (at(g), (g.gpu_model, layout(g)))).collect();
    let changed_new: Vec<usize> = (0..plan.gpus.len())
        .filter(|&n| {
            old.get(&at(&plan.gpus[n]))
                .is_none_or(|o| (o.gpu_model, layout(o)) != (plan.gpus[n].gpu_model, layout(&plan.gpus[n])))
        })
        .collect();
    let mut free_old: Vec<&GpuAssignment> = current
        .gpus
        .iter()
        .filter(|o| !removed.contains(&at(o)))
        .filter(|o| new_layouts.get(&at(o)).is_none_or(|l| *l != (o.gpu_model, layout(o))))
        .collect();
    if changed_new.is_empty() || free_old.is_empty() {
        return plan;
    }
    let index: HashMap<&str, usize> =
        request.services.iter().enumerate().map(|(i, s)| (s.service.as_str(), i)).collect();
    let mut candidates = Candidates::new(request);
    let mut provisioned_rps = vec![0.0; request.services.len()];
    for instance in plan.gpus.iter().flat_map(|g| &g.instances) {
        if let Some(&s) = index.get(instance.service.as_str()) {
            provisioned_rps[s] += instance.throughput_rps;
        }
    }
    let mut ledger = Ledger { rate_rps: request.services.iter().map(|s| s.rate_rps).collect(), provisioned_rps };
    let mut positions_freed: Vec<GpuPosition> = Vec::new();
    let mut unplaced: Vec<usize> = Vec::new();
    let mut order = changed_new.clone();
    order.sort_by_key(|&n| std::cmp::Reverse(plan.gpus[n].instances.len()));
    for n in order {
        let rebuilt = free_old.iter().enumerate().find_map(|(k, o)| {
            rebuild_on(&plan.gpus[n], o, request, &index, &mut candidates, &mut ledger).map(|gpu| (k, gpu))
        });
        match rebuilt {
            Some((k, gpu)) => {
                free_old.remove(k);
                positions_freed.push(at(&plan.gpus[n]));
                plan.gpus[n] = gpu;
            }
            None => unplaced.push(n),
        }
    }
    // GPUs not rebuilt keep their position unless a rebuilt GPU took it;
    // those must move to a position nobody keeps.
    let taken: HashSet<GpuPosition> =
        (0..plan.gpus.len()).filter(|n| !unplaced.contains(n)).map(|n| at(&plan.gpus[n])).collect();
    let (staying, moving): (Vec<usize>, Vec<usize>) =
        unplaced.into_iter().partition(|&n| !taken.contains(&at(&plan.gpus[n])));
    let occupied: HashSet<GpuPosition> =
        taken.iter().copied().chain(staying.iter().map(|&n| at(&plan.gpus[n]))).collect();
    let mut spare: Vec<GpuPosition> = positions_freed;
    spare.extend(free_old.iter().map(|o| at(o)));
    let mut spare: Vec<GpuPosition> = sorted(spare.into_iter().filter(|p| !occupied.contains(p)));
    spare.dedup();
    let per_node = current.gpus_per_node.max(1);
    let mut next = plan.gpus.iter().chain(&current.gpus).map(|g| g.node * per_node + g.index + 1).max().unwrap_or(0);
    for n in moving {
        let model = plan.gpus[n].gpu_model;
        let k = spare.iter().position(|p| old.get(p).is_none_or(|o| o.gpu_model == model));
        let position = k.map(|k| spare.remove(k)).unwrap_or_else(|| {
            next += 1;
            GpuPosition { node: (next - 1) / per_node, index: (next - 1) % per_node }
        });
        (plan.gpus[n].node, plan.gpus[n].index) = (position.node, position.index);
    }
    plan.gpus.sort_by_key(|g| (g.node, g.index));
    plan.services = service_reports(plan.gpus.iter().flat_map(|g| &g.instances), request.services, request.rule);
    plan
}

/// `gpu`'s segments on the layout of `old` (see [`keep_layouts`]), if they
/// fit and every extra instance finds a segment.
fn rebuild_on(
    gpu: &GpuAssignment,
    old: &GpuAssignment,
    request: &Problem<'_>,
    index: &HashMap<&str, usize>,
    candidates: &mut Candidates<'_>,
    ledger: &mut Ledger,
) -> Option<GpuAssignment> {
    if old.gpu_model != gpu.gpu_model || old.instances.len() < gpu.instances.len() {
        return None;
    }
    let same = |a: &InstanceAssignment, b: &InstanceAssignment| {
        (a.service.as_str(), a.model.as_str(), a.batch, a.procs)
            == (b.service.as_str(), b.model.as_str(), b.batch, b.procs)
    };
    let mut slots: Vec<Option<InstanceAssignment>> = vec![None; old.instances.len()];
    for instance in &gpu.instances {
        let fits = |k: usize, o: &InstanceAssignment| slots[k].is_none() && o.profile == instance.profile;
        let k = old
            .instances
            .iter()
            .enumerate()
            .position(|(k, o)| fits(k, o) && same(o, instance))
            .or_else(|| old.instances.iter().enumerate().position(|(k, o)| fits(k, o)))?;
        slots[k] = Some(InstanceAssignment { start: old.instances[k].start, ..instance.clone() });
    }
    let mut added: Vec<(usize, f64)> = Vec::new();
    let mut extra = Vec::new();
    for (k, was) in old.instances.iter().enumerate().filter(|(k, _)| slots[*k].is_none()) {
        let size = was.size;
        let previous = index
            .get(was.service.as_str())
            .copied()
            .filter(|&s| request.services[s].model == was.model)
            .and_then(|s| candidates.current(gpu.gpu_model, s, was).map(|p| (s, p)))
            .filter(|(s, p)| ledger.ratio_with(*s, p.throughput_rps) <= candidates.cap(gpu.gpu_model, *s, p));
        let others = gpu.instances.iter().filter_map(|i| index.get(i.service.as_str()).copied());
        let chosen = previous.or_else(|| {
            others
                .clone()
                .find_map(|s| candidates.best(gpu.gpu_model, s, size, |tp| ledger.ratio_with(s, tp)).map(|p| (s, p)))
        });
        let Some((service, point)) = chosen else {
            for (s, tp) in added {
                ledger.provisioned_rps[s] -= tp;
            }
            return None;
        };
        ledger.provisioned_rps[service] += point.throughput_rps;
        added.push((service, point.throughput_rps));
        let slo = &request.services[service];
        extra.push((
            k,
            InstanceAssignment {
                profile: was.profile.clone(),
                size,
                start: was.start,
                service: slo.service.clone(),
                model: slo.model.clone(),
                batch: point.config.batch,
                procs: point.config.procs,
                throughput_rps: point.throughput_rps,
                latency_ms: point.latency_ms,
            },
        ));
    }
    for (k, instance) in extra {
        slots[k] = Some(instance);
    }
    let mut instances: Vec<InstanceAssignment> = slots.into_iter().map(|s| s.expect("every slot filled")).collect();
    instances.sort_by(|a, b| b.size.cmp(&a.size).then(a.start.cmp(&b.start)));
    Some(GpuAssignment { node: old.node, index: old.index, gpu_model: gpu.gpu_model, instances })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::LatencyRule;
    use tessera_core::rng::SplitMix64;
    use tessera_core::synthetic::builtin_catalog;
    use tessera_core::ProfileCatalog;

    /// `count` services over the built-in models, rates spread by `seed`.
    fn services(count: usize, seed: u64) -> Vec<ServiceSlo> {
        let base = tessera_core::synthetic::demo_services();
        let mut rng = SplitMix64::new(seed);
        (0..count)
            .map(|i| {
                let slo = &base[i % base.len()];
                ServiceSlo::new(
                    format!("s{i:03}"),
                    slo.model.clone(),
                    slo.rate_rps * rng.uniform(0.2, 3.0),
                    slo.latency_slo_ms,
                )
                .unwrap()
            })
            .collect()
    }

    fn request<'a>(catalog: &'a ProfileCatalog, services: &'a [ServiceSlo]) -> Problem<'a> {
        Problem { rule: LatencyRule::Parva, ..Problem::parva(GpuModel::A100_80GB, catalog, services) }
    }

    /// Replans `services` on the built-in catalogue from `current`.
    fn replan_of(catalog: &ProfileCatalog, services: &[ServiceSlo], current: &Plan, max_extra_gpus: u64) -> Replan {
        replan(&ReplanRequest { plan: request(catalog, services), current, max_extra_gpus, removed_gpus: &[] }).unwrap()
    }

    fn check(replanned: &Replan, catalog: &ProfileCatalog, services: &[ServiceSlo]) {
        let plan = &replanned.plan;
        let violations = verify(
            plan,
            &VerifyRequest { catalog, services, rule: LatencyRule::Parva, max_procs: crate::DEFAULT_MAX_PROCS },
        );
        assert!(violations.is_empty(), "{violations:#?}");
        assert!(plan.services.iter().all(|s| s.met));
        assert_eq!(diff_plans(&replanned.fresh, &replanned.fresh).totals.gpus_unchanged, replanned.fresh.gpu_count);
    }

    #[test]
    fn unchanged_slos_give_the_same_plan() {
        let catalog = builtin_catalog();
        let services = services(24, 1);
        let current = plan_optimal(&request(&catalog, &services)).unwrap();
        let replanned = replan_of(&catalog, &services, &current, 0);
        assert!(!replanned.from_fresh);
        assert!(replanned.diff.totals.is_empty(), "{:?}", replanned.diff.totals);
        assert_eq!(replanned.plan.gpus, current.gpus);
        check(&replanned, &catalog, &services);
    }

    #[test]
    fn changed_rates_keep_most_layouts_within_the_bound() {
        let catalog = builtin_catalog();
        let old = services(40, 2);
        let current = plan_optimal(&request(&catalog, &old)).unwrap();
        let mut rng = SplitMix64::new(7);
        let new: Vec<ServiceSlo> =
            old.iter().map(|s| ServiceSlo { rate_rps: s.rate_rps * rng.uniform(0.8, 1.2), ..s.clone() }).collect();
        for max_extra_gpus in [0, 1, 3] {
            let replanned = replan_of(&catalog, &new, &current, max_extra_gpus);
            check(&replanned, &catalog, &new);
            assert!(replanned.plan.gpu_count as u64 <= replanned.fresh.gpu_count as u64 + max_extra_gpus);
            let (stable, fresh) = (replanned.diff.totals, replanned.fresh_diff.totals);
            assert!(stable.churn() <= fresh.churn(), "{stable:?} vs {fresh:?}");
            assert_eq!(
                stable.gpus_unchanged + stable.gpus_services_changed + stable.gpus_layout_changed + stable.gpus_removed,
                current.gpu_count
            );
        }
    }

    #[test]
    fn a_drained_gpu_is_left_and_its_services_move() {
        let catalog = builtin_catalog();
        let services = services(24, 3);
        let current = plan_optimal(&request(&catalog, &services)).unwrap();
        let drained = GpuPosition { node: current.gpus[0].node, index: current.gpus[0].index };
        let replanned = replan(&ReplanRequest {
            plan: request(&catalog, &services),
            current: &current,
            max_extra_gpus: 1,
            removed_gpus: &[drained],
        })
        .unwrap();
        check(&replanned, &catalog, &services);
        assert!(replanned.plan.gpus.iter().all(|g| (g.node, g.index) != (drained.node, drained.index)));
        assert!(replanned.fresh.gpus.iter().all(|g| (g.node, g.index) != (drained.node, drained.index)));
        let removed = replanned.diff.gpus.iter().find(|g| (g.node, g.index) == (0, 0)).unwrap();
        assert_eq!(removed.change, tessera_core::GpuChange::Removed);
    }

    #[test]
    fn a_leaving_tenant_frees_its_instances_and_an_arriving_one_is_placed() {
        let catalog = builtin_catalog();
        let old = services(24, 4);
        let current = plan_optimal(&request(&catalog, &old)).unwrap();
        let mut new = old[1..].to_vec();
        new.push(ServiceSlo::new("newcomer", "resnet50", 300.0, 80.0).unwrap());
        let replanned = replan_of(&catalog, &new, &current, 1);
        check(&replanned, &catalog, &new);
        let instances = || replanned.plan.gpus.iter().flat_map(|g| &g.instances);
        assert!(instances().all(|i| i.service != old[0].service));
        assert!(instances().any(|i| i.service == "newcomer"));
        assert!(replanned.diff.totals.layouts_kept() * 2 >= current.gpu_count, "{:?}", replanned.diff.totals);
    }

    #[test]
    fn a_plan_of_another_gpu_or_an_unknown_gpu_is_refused() {
        let catalog = builtin_catalog();
        let services = services(6, 5);
        let current = plan_optimal(&request(&catalog, &services)).unwrap();
        let on_h100 = Problem::parva(GpuModel::H100_80GB, &catalog, &services);
        let error = replan(&ReplanRequest { plan: on_h100, current: &current, max_extra_gpus: 0, removed_gpus: &[] })
            .unwrap_err();
        assert!(matches!(error, PlanError::ForeignGpu { .. }), "{error}");
        assert!(error.to_string().contains("a100-80gb"), "{error}");
        let nowhere = [GpuPosition { node: 9, index: 7 }];
        let error = replan(&ReplanRequest {
            plan: request(&catalog, &services),
            current: &current,
            max_extra_gpus: 0,
            removed_gpus: &nowhere,
        })
        .unwrap_err();
        assert!(matches!(error, PlanError::GpuNotInPlan { node: 9, index: 7, .. }), "{error}");
    }

    #[test]
    fn alignment_puts_identical_gpus_back_in_place() {
        let catalog = builtin_catalog();
        let services = services(24, 6);
        let current = plan_optimal(&request(&catalog, &services)).unwrap();
        let mut shuffled = current.clone();
        shuffled.gpus.reverse();
        for (i, gpu) in shuffled.gpus.iter_mut().enumerate() {
            (gpu.node, gpu.index) = (i as u32 / 8, i as u32 % 8);
        }
        let aligned = align_to(&current, shuffled, &[]);
        assert_eq!(aligned.gpus, current.gpus);
    }

    #[test]
    fn a_segment_dropped_from_a_gpu_is_put_back_to_keep_its_layout() {
        let catalog = builtin_catalog();
        let services = services(24, 8);
        let request = request(&catalog, &services);
        let current = plan_optimal(&request).unwrap();
        // A GPU with several instances, one of whose services has another
        // segment elsewhere: dropping that instance changes the layout.
        let count = |name: &str| current.gpus.iter().flat_map(|g| &g.instances).filter(|i| i.service == name).count();
        let (g, k) = current
            .gpus
            .iter()
            .enumerate()
            .filter(|(_, gpu)| gpu.instances.len() > 1)
            .find_map(|(g, gpu)| gpu.instances.iter().position(|i| count(&i.service) > 1).map(|k| (g, k)))
            .expect("a plan of 24 services has such a GPU");
        let mut thinner = current.clone();
        thinner.gpus[g].instances.remove(k);
        assert_eq!(diff_plans(&current, &thinner).totals.gpus_layout_changed, 1);
        let kept = keep_layouts(&request, &current, thinner, &[]);
        let totals = diff_plans(&current, &kept).totals;
        assert_eq!(totals.layouts_kept(), current.gpu_count, "{totals:?}");
        assert_eq!(kept.gpus[g].instances, current.gpus[g].instances, "the dropped segment ran there before");
    }

    #[test]
    fn reseating_puts_swapped_segments_back_where_they_ran() {
        let catalog = builtin_catalog();
        let services = services(24, 9);
        let current = plan_optimal(&request(&catalog, &services)).unwrap();
        let instances: Vec<(usize, usize)> = current
            .gpus
            .iter()
            .enumerate()
            .flat_map(|(g, gpu)| (0..gpu.instances.len()).map(move |k| (g, k)))
            .collect();
        let (first, second) = instances
            .iter()
            .flat_map(|&a| instances.iter().map(move |&b| (a, b)))
            .find(|&((ga, ka), (gb, kb))| {
                let (a, b) = (&current.gpus[ga].instances[ka], &current.gpus[gb].instances[kb]);
                ga != gb && a.profile == b.profile && a.service != b.service
            })
            .expect("two GPUs share a profile with different services");
        let mut swapped = current.clone();
        let (a, b) =
            (current.gpus[first.0].instances[first.1].clone(), current.gpus[second.0].instances[second.1].clone());
        swapped.gpus[first.0].instances[first.1] = InstanceAssignment { start: a.start, ..b.clone() };
        swapped.gpus[second.0].instances[second.1] = InstanceAssignment { start: b.start, ..a };
        assert_eq!(diff_plans(&current, &swapped).totals.gpus_services_changed, 2);
        let reseated = reseat(&current, swapped);
        assert!(diff_plans(&current, &reseated).totals.is_empty());
    }
}
