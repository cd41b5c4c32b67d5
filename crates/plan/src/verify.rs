//! An independent plan verifier.
//!
//! It trusts nothing the planner wrote except the assignment itself: each
//! GPU's layout is checked against the MIG lattice, each segment against the
//! profiles (it must exist, be feasible, and carry the profiled numbers), and
//! each service's throughput is recomputed from the profiles. It shares no
//! code with the planners but the latency rule, which defines "feasible".
//! Under a capacity rule it computes each segment's capacity itself; a
//! segment routed no more than that meets its percentile by the capacity's
//! definition (the largest rate the serving model finds within the SLO,
//! whose percentile latency grows with the rate), and only a segment routed
//! more is evaluated at its routed rate.

use std::collections::{HashMap, HashSet};

use tessera_core::layout::validate_layout;
use tessera_core::{
    GpuAssignment, InstanceAssignment, ModelProfile, Placement, Plan, ProfilePoint, SegmentConfig, ServiceSlo,
};

use tessera_serving::analytic;
use tessera_serving::SegmentShape;
use tessera_serving::{ArrivalModel, Capacities};

use crate::error::PlanError;
use crate::judge::PREDICTION_TOLERANCE;
use crate::report::{covers, utilization};
use crate::service_check::{service_checks, Judged, SegmentFigures, SegmentKey, ServiceCheck};
use crate::verify_shared::check_shared;

use crate::violation::claims_beyond_profile;
pub use crate::violation::{InstanceRef, VerifyRequest, Violation};

/// The checks that need no profiles and no SLOs: the GPU count, the fleet
/// (models it offers, its count limits), each GPU listed once and holding
/// an instance, and each GPU's layout on the MIG lattice (profiles of its
/// model, placements at allowed starts, no two instances sharing a memory
/// slice). [`verify`] makes them too, in the same order.
pub fn verify_structure(plan: &Plan) -> Vec<Violation> {
    let mut violations = check_plan_structure(plan);
    let mut positions = HashSet::new();
    for gpu in &plan.gpus {
        check_gpu_structure(gpu, &mut positions, &mut violations);
    }
    violations
}

/// Refuses a plan [`verify_structure`] finds fault with, naming every
/// violation (one line).
pub fn check_structure(plan: &Plan) -> Result<(), PlanError> {
    let violations = verify_structure(plan);
    if violations.is_empty() {
        return Ok(());
    }
    Err(PlanError::Invalid(violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))
}

/// The plan-wide structural checks.
fn check_plan_structure(plan: &Plan) -> Vec<Violation> {
    let mut violations = Vec::new();
    if plan.gpu_count != plan.gpus.len() {
        violations.push(Violation::GpuCount { claimed: plan.gpu_count, listed: plan.gpus.len() });
    }
    check_fleet(plan, &mut violations);
    violations
}

/// One GPU's structural checks; `positions` are the GPUs seen so far.
fn check_gpu_structure(gpu: &GpuAssignment, positions: &mut HashSet<(u32, u32)>, violations: &mut Vec<Violation>) {
    if !positions.insert((gpu.node, gpu.index)) {
        violations.push(Violation::DuplicateGpu { node: gpu.node, index: gpu.index });
    }
    if gpu.is_empty() {
        violations.push(Violation::EmptyGpu { node: gpu.node, index: gpu.index });
    }
    check_layout(gpu, violations);
}

/// Every violation of `plan` against `request`; empty when the plan is sound.
pub fn verify(plan: &Plan, request: &VerifyRequest<'_>) -> Vec<Violation> {
    check(plan, request, &Capacities::new(), None)
}

/// [`verify`], with the serving model's capacities memoised in
/// `capacities` (e.g. the planner's, when one plan after another is
/// verified against the same services).
pub(crate) fn verify_memoised(plan: &Plan, request: &VerifyRequest<'_>, capacities: &Capacities) -> Vec<Violation> {
    check(plan, request, capacities, None)
}

/// [`verify`], and every service's figures as the verifier sees them
/// (see [`ServiceCheck`]), in `request.services`' order.
pub fn verify_services(plan: &Plan, request: &VerifyRequest<'_>) -> (Vec<Violation>, Vec<ServiceCheck>) {
    let mut figures = SegmentFigures::default();
    let violations = check(plan, request, &Capacities::new(), Some(&mut figures));
    let judged = Judged {
        services: request.services,
        rule: request.rule,
        margin: request.margin,
        flagged: violations.iter().filter_map(Violation::service).collect(),
    };
    let checks = service_checks(&judged, figures);
    (violations, checks)
}

/// The checks of [`verify`], noting each service's segments in `figures`
/// when asked.
fn check<'a>(
    plan: &Plan,
    request: &VerifyRequest<'a>,
    capacities: &Capacities,
    mut figures: Option<&mut SegmentFigures<'a>>,
) -> Vec<Violation> {
    let mut violations = check_plan_structure(plan);
    let services: HashMap<&str, &ServiceSlo> = request.services.iter().map(|s| (s.service.as_str(), s)).collect();
    let mut provisioned_rps: HashMap<&str, f64> = HashMap::new();
    // Under a capacity rule: the plan's routing weights per service, and
    // the serving model's capacities (memoised in `capacities`).
    let mut routing_weight: HashMap<&str, f64> = HashMap::new();
    let mut served = Vec::new();
    let mut shared_services: HashSet<&str> = HashSet::new();
    let mut positions = HashSet::new();
    for gpu in &plan.gpus {
        check_gpu_structure(gpu, &mut positions, &mut violations);
        for instance in &gpu.instances {
            let at = InstanceRef {
                node: gpu.node,
                index: gpu.index,
                profile: instance.profile.clone(),
                start: instance.start,
            };
            let Some((slo, profile, point)) =
                check_segment(gpu, instance, at.clone(), &services, request, &mut violations)
            else {
                continue;
            };
            let served_by = if request.rule.uses_capacity() {
                let Some(shape) = checked_capacity(
                    profile,
                    &point,
                    slo,
                    instance,
                    &at,
                    (capacities, request.arrivals, request.margin),
                    &mut violations,
                ) else {
                    continue;
                };
                *provisioned_rps.entry(slo.service.as_str()).or_default() += shape.1;
                *routing_weight.entry(slo.service.as_str()).or_default() += instance.capacity();
                Served::Capacity { shape: shape.0, capacity_rps: shape.1, weight: instance.capacity() }
            } else {
                *provisioned_rps.entry(slo.service.as_str()).or_default() += point.throughput_rps;
                Served::Throughput
            };
            served.push((at, gpu.gpu_model, slo, point, served_by));
        }
        for shared in &gpu.shared {
            let findings = check_shared(gpu, shared, &services, request, &mut violations);
            for (slo, capacity_rps) in findings.provisioned {
                *provisioned_rps.entry(slo.service.as_str()).or_default() += capacity_rps;
                shared_services.insert(slo.service.as_str());
            }
            if let Some(figures) = figures.as_deref_mut() {
                figures
                    .shared
                    .extend(findings.figures.into_iter().map(|(slo, f, busy)| (slo.service.as_str(), (f, busy))));
            }
        }
    }
    for (at, _, slo, ..) in &served {
        if shared_services.contains(slo.service.as_str()) {
            violations.push(Violation::Profile {
                at: at.clone(),
                problem: format!("service '{}' has a shared instance and segments of its own", slo.service),
            });
        }
    }
    // Segments of one service, GPU model, configuration and weight get the
    // same rate: each is judged once (`None`: within the SLO; else its
    // predicted percentile latency).
    let mut judged: HashMap<SegmentKey<'a>, Option<f64>> = HashMap::new();
    for (at, gpu_model, slo, point, served_by) in served {
        // A segment that misses: its worst latency and utilization.
        let missed = match served_by {
            Served::Throughput => {
                let utilization = utilization(slo.rate_rps, provisioned_rps[slo.service.as_str()]);
                let worst_ms = request.rule.worst_latency_ms(&point, utilization);
                if let Some(figures) = figures.as_deref_mut() {
                    let slowest = figures.rule_worst_ms.entry(slo.service.as_str()).or_insert(worst_ms);
                    *slowest = slowest.max(worst_ms);
                }
                let meets = request.rule.meets(&point, utilization, slo.latency_slo_ms);
                (!meets).then_some((worst_ms, utilization))
            }
            Served::Capacity { capacity_rps, weight, .. } if *request.arrivals != ArrivalModel::Poisson => {
                let routed_rps = slo.rate_rps * weight / routing_weight[slo.service.as_str()];
                let over = |rate_rps: f64| rate_rps > capacity_rps * (1.0 + PREDICTION_TOLERANCE);
                // A weight above the capacity is already a CapacityClaimed.
                if over(routed_rps) && !over(weight) {
                    violations.push(Violation::OverCapacity {
                        at,
                        service: slo.service.clone(),
                        routed_rps,
                        capacity_rps,
                        arrivals: request.arrivals.to_string(),
                    });
                }
                continue;
            }
            Served::Capacity { shape, capacity_rps, weight } => {
                // Requests are routed in proportion to the plan's weights.
                let routed_rps = slo.rate_rps * weight / routing_weight[slo.service.as_str()];
                let key = (slo.service.as_str(), gpu_model, point.config, weight.to_bits());
                if let Some(figures) = figures.as_deref_mut() {
                    figures.note_routed(key, &shape, routed_rps);
                }
                // The capacity is the largest rate the serving model finds
                // within the SLO, and its percentile latency only grows
                // with the rate: a segment routed no more meets it.
                if routed_rps <= capacity_rps {
                    continue;
                }
                let latency_ms = *judged.entry(key).or_insert_with(|| {
                    // Whether the percentile is within the SLO is one
                    // evaluation of the queue; the latency is searched for
                    // only to report a miss.
                    let bound_ms = slo.latency_slo_ms * (1.0 + PREDICTION_TOLERANCE);
                    let slowed = shape.slowed_by(request.margin);
                    match analytic::meets_percentile(&slowed, routed_rps, slo.percentile, bound_ms) {
                        Ok(true) => None,
                        _ => Some(
                            analytic::percentile_latency_ms(&slowed, routed_rps, slo.percentile)
                                .unwrap_or(f64::INFINITY),
                        ),
                    }
                });
                latency_ms.map(|latency_ms| (latency_ms, routed_rps / point.throughput_rps))
            }
        };
        if let Some((worst_ms, utilization)) = missed {
            violations.push(Violation::Latency {
                at,
                service: slo.service.clone(),
                rule: request.rule.name(),
                slo_ms: slo.latency_slo_ms,
                requirement: request.rule.requirement(slo),
                worst_ms,
                utilization,
            });
        }
    }
    if let Some(figures) = figures {
        figures.provisioned_rps = provisioned_rps.clone();
    }
    for slo in request.services {
        let provisioned = provisioned_rps.get(slo.service.as_str()).copied().unwrap_or(0.0);
        if !covers(provisioned, slo.rate_rps) {
            violations.push(Violation::RateNotCovered {
                service: slo.service.clone(),
                provisioned_rps: provisioned,
                rate_rps: slo.rate_rps,
            });
        }
    }
    violations
}

/// Checks the GPUs listed against the fleet the plan records (plans that
/// record none, e.g. read from a ParvaGPU deployment map, have no limits).
fn check_fleet(plan: &Plan, violations: &mut Vec<Violation>) {
    if plan.fleet.is_empty() {
        return;
    }
    for gpu in &plan.gpus {
        if !plan.fleet.iter().any(|offer| offer.gpu_model == gpu.gpu_model) {
            violations.push(Violation::OutsideFleet {
                node: gpu.node,
                index: gpu.index,
                gpu: gpu.gpu_model.to_string(),
            });
        }
    }
    for offer in &plan.fleet {
        let gpus = plan.gpus.iter().filter(|gpu| gpu.gpu_model == offer.gpu_model).count() as u64;
        if let Some(limit) = offer.limit.filter(|&limit| gpus > limit) {
            violations.push(Violation::FleetLimit { gpu: offer.gpu_model.to_string(), gpus, limit });
        }
    }
}

fn check_layout(gpu: &GpuAssignment, violations: &mut Vec<Violation>) {
    let spec = gpu.gpu_model.spec();
    let mut placements = Vec::new();
    for (name, size, start) in gpu.layout() {
        let at = || InstanceRef { node: gpu.node, index: gpu.index, profile: name.to_string(), start };
        match spec.profile_by_name(name) {
            Ok(profile) if profile.compute_slices == size => placements.push(Placement { profile, start }),
            Ok(profile) => violations.push(Violation::Profile {
                at: at(),
                problem: format!("size {size} disagrees with profile {} ({}g)", profile.name, profile.compute_slices),
            }),
            Err(error) => violations.push(Violation::Profile { at: at(), problem: error.to_string() }),
        }
    }
    if let Err(error) = validate_layout(gpu.gpu_model, &placements) {
        violations.push(Violation::Layout { node: gpu.node, index: gpu.index, error });
    }
}

/// Checks one segment against the profiles; returns its service and
/// profiled point when it counts towards its service's rate.
fn check_segment<'a>(
    gpu: &GpuAssignment,
    instance: &InstanceAssignment,
    at: InstanceRef,
    services: &HashMap<&str, &'a ServiceSlo>,
    request: &VerifyRequest<'a>,
    violations: &mut Vec<Violation>,
) -> Option<(&'a ServiceSlo, &'a ModelProfile, ProfilePoint)> {
    let Some(slo) = services.get(instance.service.as_str()) else {
        violations.push(Violation::UnknownService { at, service: instance.service.clone() });
        return None;
    };
    if slo.model != instance.model {
        violations.push(Violation::ModelMismatch {
            at,
            service: slo.service.clone(),
            expected: slo.model.clone(),
            found: instance.model.clone(),
        });
        return None;
    }
    let config = SegmentConfig { size_gpcs: instance.size, batch: instance.batch, procs: instance.procs };
    let profile = request.catalog.get(gpu.gpu_model, &slo.model);
    let Some((profile, point)) = profile.and_then(|profile| Some((profile, profile.point(config)?))) else {
        violations.push(Violation::NotProfiled {
            at,
            model: slo.model.clone(),
            gpu: gpu.gpu_model.to_string(),
            config,
        });
        return None;
    };
    // The profile's memory is the whole segment's; the instance is the one
    // the plan names.
    let instance_gb = gpu.gpu_model.spec().profile_by_name(&instance.profile).map(|p| f64::from(p.memory_gb));
    if let (Some(needed_gb), Ok(instance_gb)) = (point.memory_gb, instance_gb) {
        if needed_gb > instance_gb {
            violations.push(Violation::Memory {
                at: at.clone(),
                model: slo.model.clone(),
                config,
                needed_gb,
                instance_gb,
            });
        }
    }
    if instance.procs > request.max_procs {
        violations.push(Violation::TooManyProcs { at: at.clone(), procs: instance.procs, max: request.max_procs });
    }
    violations.extend(claims_beyond_profile(&at, (instance.throughput_rps, instance.latency_ms), point));
    Some((slo, profile, *point))
}

/// How a segment serves its service in the check.
enum Served {
    /// At its throughput, requests evenly spaced (the `queueing` and `parva`
    /// rules).
    Throughput,
    /// Up to its capacity under the serving model, routed by `weight`.
    Capacity {
        /// The segment as the serving model sees it.
        shape: SegmentShape,
        /// Its capacity under the request's arrival model, req/s.
        capacity_rps: f64,
        /// The plan's routing weight of the segment.
        weight: f64,
    },
}

/// Under a capacity rule: the segment's shape as profiled and the serving
/// model's capacity for `slo` with every batch `margin` slower (memoised
/// in `capacities`, under `arrivals`), and a violation when the plan routes
/// more to it than that (`None` when the model cannot read the profile,
/// said as a violation).
fn checked_capacity(
    profile: &ModelProfile,
    point: &ProfilePoint,
    slo: &ServiceSlo,
    instance: &InstanceAssignment,
    at: &InstanceRef,
    (capacities, arrivals, margin): (&Capacities, &ArrivalModel, f64),
    violations: &mut Vec<Violation>,
) -> Option<(SegmentShape, f64)> {
    let read = SegmentShape::from_profile(profile.points(), point.config, point.latency_ms).and_then(|read| {
        let slowed = read.shape.slowed_by(margin);
        let capacity = capacities.capacity_rps(&slowed, slo.percentile, slo.latency_slo_ms, arrivals)?;
        Ok((read.shape, capacity))
    });
    match read {
        Ok((shape, capacity)) => {
            if instance.capacity() > capacity * (1.0 + PREDICTION_TOLERANCE) {
                violations.push(Violation::CapacityClaimed {
                    at: at.clone(),
                    service: slo.service.clone(),
                    claimed_rps: instance.capacity(),
                    capacity_rps: capacity,
                });
            }
            Some((shape, capacity))
        }
        Err(error) => {
            violations.push(Violation::Profile { at: at.clone(), problem: format!("the serving model: {error}") });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::LatencyRule;
    use crate::parva::plan_parva;
    use crate::problem::Problem;
    use tessera_core::synthetic::{builtin_catalog, demo_services};
    use tessera_core::{GpuModel, ProfileCatalog};

    fn setup() -> (ProfileCatalog, Vec<ServiceSlo>) {
        (builtin_catalog(), demo_services())
    }

    fn plan(catalog: &ProfileCatalog, services: &[ServiceSlo]) -> Plan {
        plan_parva(&Problem::parva(GpuModel::A100_80GB, catalog, services)).unwrap()
    }

    fn request<'a>(catalog: &'a ProfileCatalog, services: &'a [ServiceSlo]) -> VerifyRequest<'a> {
        VerifyRequest {
            catalog,
            services,
            rule: LatencyRule::Parva,
            arrivals: &ArrivalModel::Poisson,
            max_procs: 5,
            margin: 0.0,
        }
    }

    #[test]
    fn a_planner_plan_passes() {
        let (catalog, services) = setup();
        let plan = plan(&catalog, &services);
        assert_eq!(verify(&plan, &request(&catalog, &services)), vec![]);
    }

    #[test]
    fn catches_overlapping_instances() {
        let (catalog, services) = setup();
        let mut plan = plan(&catalog, &services);
        let gpu = plan.gpus.iter_mut().find(|g| g.instances.len() >= 2).expect("a shared GPU");
        gpu.instances[1].start = gpu.instances[0].start;
        let violations = verify(&plan, &request(&catalog, &services));
        assert!(violations.iter().any(|v| matches!(v, Violation::Layout { .. })), "{violations:?}");
    }

    #[test]
    fn catches_a_missing_segment_and_tampered_numbers() {
        let (catalog, services) = setup();
        let mut plan = plan(&catalog, &services);
        let removed = plan.gpus[0].instances.remove(0);
        let last = plan.gpus.len() - 1;
        plan.gpus[last].instances.iter_mut().for_each(|i| i.throughput_rps *= 2.0);
        let violations = verify(&plan, &request(&catalog, &services));
        let message = violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert!(message.contains(&format!("service '{}': provisioned", removed.service)), "{message}");
        assert!(message.contains("plan says throughput_rps"), "{message}");
        // Figures worse than the profile's (planned on a prediction's
        // bounds, since measured better) are no violation.
        let mut modest = super::tests::plan(&catalog, &services);
        modest.gpus[0].instances.iter_mut().for_each(|i| {
            i.throughput_rps *= 0.8;
            i.latency_ms *= 1.25;
        });
        let violations = verify(&modest, &request(&catalog, &services));
        assert!(!violations.iter().any(|v| matches!(v, Violation::WrongValue { .. })), "{violations:?}");
        modest.gpus[0].instances[0].latency_ms *= 0.5;
        let violations = verify(&modest, &request(&catalog, &services));
        assert!(violations.iter().any(|v| matches!(v, Violation::WrongValue { field: "latency_ms", .. })));
    }

    #[test]
    fn catches_latency_rule_breaks_and_unknown_services() {
        let (catalog, mut services) = setup();
        let plan = plan(&catalog, &services);
        services[0].latency_slo_ms = 1.0;
        services.pop();
        let violations = verify(&plan, &request(&catalog, &services));
        assert!(violations.iter().any(|v| matches!(v, Violation::Latency { .. })));
        assert!(violations.iter().any(|v| matches!(v, Violation::UnknownService { .. })));
    }

    #[test]
    fn catches_segments_that_exceed_their_instance_memory() {
        let (catalog, services) = setup();
        let plan = plan(&catalog, &services);
        let used = &plan.gpus[0].instances[0];
        // The same profiles, but the first instance's point needs 500 GB.
        let bloated: ProfileCatalog = catalog
            .iter()
            .map(|profile| {
                let points = profile
                    .points()
                    .iter()
                    .map(|p| {
                        let hit = profile.gpu_model == GpuModel::A100_80GB
                            && profile.model == used.model
                            && p.config == SegmentConfig { size_gpcs: used.size, batch: used.batch, procs: used.procs };
                        ProfilePoint { memory_gb: if hit { Some(500.0) } else { p.memory_gb }, ..*p }
                    })
                    .collect();
                tessera_core::ModelProfile::new(profile.gpu_model, profile.model.clone(), points).unwrap()
            })
            .collect();
        let violations = verify(&plan, &request(&bloated, &services));
        assert!(
            violations.iter().any(|v| matches!(v, Violation::Memory { needed_gb, .. } if *needed_gb == 500.0)),
            "{violations:?}"
        );
        assert_eq!(verify(&plan, &request(&catalog, &services)), vec![]);
    }

    #[test]
    fn catches_a_plan_beyond_its_fleet() {
        let (catalog, services) = setup();
        let mut plan = plan(&catalog, &services);
        assert!(plan.gpu_count >= 2);
        plan.fleet[0].limit = Some(1);
        plan.gpus[0].gpu_model = GpuModel::H100_80GB;
        let violations = verify(&plan, &request(&catalog, &services));
        let expected = Violation::FleetLimit { gpu: "a100-80gb".into(), gpus: plan.gpu_count as u64 - 1, limit: 1 };
        assert!(violations.contains(&expected), "{violations:?}");
        assert!(violations.iter().any(|v| matches!(v, Violation::OutsideFleet { .. })), "{violations:?}");
    }

    #[test]
    fn catches_unprofiled_configurations_and_gpu_count() {
        let (catalog, services) = setup();
        let mut plan = plan(&catalog, &services);
        plan.gpus[0].instances[0].batch = 3;
        plan.gpu_count += 1;
        let violations = verify(&plan, &request(&catalog, &services));
        assert!(violations.iter().any(|v| matches!(v, Violation::NotProfiled { .. })));
        assert!(violations.iter().any(|v| matches!(v, Violation::GpuCount { .. })));
    }
}
