//! Shared instances for the long tail: light services packed into MIG
//! instances of the smallest size, several per instance, under the
//! serialized discipline ([`tessera_serving::serialized`]).
//!
//! A service may share when, alone at batch 1 in the smallest instance, it
//! meets its percentile SLO with every batch the plan's margin slower.
//! Such services are dealt, busiest first, each to the least busy instance
//! that still takes it: the members' memory fits the instance, there are at
//! most [`MAX_MEMBERS`], and every member still meets its percentile SLO at
//! the margin (the serving model's M/G/1 figures, rounded up). An instance
//! left with one member gives it back to dedicated planning, which serves
//! it at least as well. The optimal planner then places each shared
//! instance as a fixed segment of its size beside the dedicated segments,
//! so the plan's bound and gap hold given which services share.
//!
//! Memory: a member's memory at batch 1 is the profile's `memory_gb` where
//! measured, else an upper bound from the points that ran
//! ([`ModelProfile::process_memory_gb`]); the plan's notes say which
//! models carry such a bound.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use tessera_core::{
    GpuAssignment, GpuModel, ModelProfile, Plan, ProfileCatalog, ProfilePoint, SegmentConfig, ServiceReport,
    ServiceSlo, SharedInstance, SharedMember, Sharing,
};
use tessera_serving::serialized::{all_meet, member_figures, Member, MemberLoad};

use crate::error::PlanError;
use crate::judge::PREDICTION_TOLERANCE;
use crate::problem::Problem;

/// The most services one shared instance hosts.
pub const MAX_MEMBERS: usize = 16;

/// A shared instance being filled: its members and their model figures.
#[derive(Debug, Clone)]
struct Filling {
    members: Vec<SharedMember>,
    judged: Vec<Member>,
    /// The executor's busy share at the members' rates, as profiled.
    busy: f64,
    /// The members' memory, GB.
    memory_gb: f64,
}

/// Which services share and how: the shared instances (members only; the
/// optimal planner places them) and the services left to dedicated
/// segments.
#[derive(Debug, Clone)]
pub(crate) struct Packing {
    /// The GPU model and instance size every shared instance has.
    pub gpu_model: GpuModel,
    /// The instance size, compute slices.
    pub size: u8,
    /// Each shared instance's members.
    pub instances: Vec<Vec<SharedMember>>,
    /// The services planned with dedicated segments.
    pub dedicated: Vec<ServiceSlo>,
    /// The models whose memory is a bound from the profile, not measured.
    pub bounded_memory: BTreeMap<String, f64>,
}

/// Packs `problem`'s light services into shared instances (see the module
/// docs). The fleet must have one GPU model.
pub(crate) fn pack(problem: &Problem<'_>) -> Result<Packing, PlanError> {
    let [offer] = problem.fleet.as_slice() else {
        return Err(PlanError::InvalidOption {
            field: "share",
            message: "shared instances are planned on a fleet of one GPU model".to_string(),
        });
    };
    let gpu_model = offer.model;
    let spec = gpu_model.spec();
    let size = spec.sizes().min().unwrap_or(1);
    let instance_gb = f64::from(spec.profile_for_size(size).map(|p| p.memory_gb).unwrap_or(0));
    let config = SegmentConfig { size_gpcs: size, batch: 1, procs: 1 };
    let mut bounded_memory = BTreeMap::new();
    let mut light: Vec<(f64, SharedMember, Member)> = Vec::new();
    let mut dedicated = Vec::new();
    for slo in problem.services {
        let candidate = problem.catalog.get(gpu_model, &slo.model).and_then(|profile| {
            let point = profile.point(config)?;
            let (memory_gb, measured) = profile.process_memory_gb(config)?;
            let member = SharedMember {
                service: slo.service.clone(),
                model: slo.model.clone(),
                batch: 1,
                latency_ms: point.latency_ms,
                throughput_rps: point.throughput_rps,
                capacity_rps: slo.rate_rps,
                memory_gb,
            };
            let busy = slo.rate_rps * member.busy_ms() / 1000.0;
            let judged = Member {
                load: MemberLoad { rate_rps: slo.rate_rps, busy_ms: member.busy_ms() },
                slo_ms: slo.latency_slo_ms,
                percentile: slo.percentile,
            };
            let fits = memory_gb <= instance_gb && all_meet(&[judged], problem.margin);
            fits.then(|| {
                if !measured {
                    bounded_memory.insert(slo.model.clone(), memory_gb);
                }
                (busy, member, judged)
            })
        });
        match candidate {
            Some(light_service) => light.push(light_service),
            None => dedicated.push(slo.clone()),
        }
    }
    light.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.service.cmp(&b.1.service)));
    let fillings = fewest_instances(light, instance_gb, problem.margin);
    let mut instances = Vec::new();
    for filling in fillings {
        if filling.members.len() > 1 {
            instances.push(filling.members);
        } else {
            let service = &filling.members[0].service;
            dedicated.extend(problem.services.iter().filter(|slo| &slo.service == service).cloned());
        }
    }
    let sharing: HashSet<&str> = instances.iter().flatten().map(|m| m.model.as_str()).collect();
    bounded_memory.retain(|model, _| sharing.contains(model.as_str()));
    Ok(Packing { gpu_model, size, instances, dedicated, bounded_memory })
}

/// The fewer instances of two deals of `light` (busiest first): all
/// together, and each memory class apart (services that need the same
/// memory fill an instance's memory exactly: four 2.5 GB members leave a
/// 10 GB instance nothing, where one among 2 GB members wastes 1.5 GB).
fn fewest_instances(light: Vec<(f64, SharedMember, Member)>, instance_gb: f64, margin: f64) -> Vec<Filling> {
    let mut classes: BTreeMap<u64, Vec<(f64, SharedMember, Member)>> = BTreeMap::new();
    for service in &light {
        let class = (service.1.memory_gb * 100.0).round() as u64;
        classes.entry(class).or_default().push(service.clone());
    }
    let together = balance(light, instance_gb, margin);
    if classes.len() < 2 {
        return together;
    }
    let apart: Vec<Filling> = classes.into_values().flat_map(|class| balance(class, instance_gb, margin)).collect();
    if apart.len() < together.len() {
        apart
    } else {
        together
    }
}

/// Deals `light` services (busiest first) to shared instances as a
/// scheduler deals jobs to machines: each to the least busy instance it
/// fits (memory, members, every member's SLO at `margin`), starting from as
/// many empty instances as the members' memory and busy time need at
/// least, and opening another only when it fits none.
fn balance(light: Vec<(f64, SharedMember, Member)>, instance_gb: f64, margin: f64) -> Vec<Filling> {
    let memory: f64 = light.iter().map(|(_, member, _)| member.memory_gb).sum();
    let busy: f64 = light.iter().map(|(busy, _, _)| busy).sum();
    let at_least = (memory / instance_gb).max(busy).max(light.len() as f64 / MAX_MEMBERS as f64).ceil() as usize;
    let mut fillings = vec![Filling { members: Vec::new(), judged: Vec::new(), busy: 0.0, memory_gb: 0.0 }; at_least];
    // The instances that may take another member, least busy first (a
    // non-negative f64's bits order as the number does).
    let mut open: BTreeSet<(u64, usize)> = (0..at_least).map(|k| (0.0_f64.to_bits(), k)).collect();
    let least_gb = light.iter().map(|(_, member, _)| member.memory_gb).fold(f64::INFINITY, f64::min);
    for (member_busy, member, judged) in light {
        let fits = |filling: &Filling| {
            if filling.members.len() >= MAX_MEMBERS || filling.memory_gb + member.memory_gb > instance_gb {
                return false;
            }
            let mut together = filling.judged.clone();
            together.push(judged);
            all_meet(&together, margin)
        };
        let chosen = match open.iter().map(|&(_, k)| k).find(|&k| fits(&fillings[k])) {
            Some(k) => k,
            None => {
                fillings.push(Filling { members: Vec::new(), judged: Vec::new(), busy: 0.0, memory_gb: 0.0 });
                open.insert((0.0_f64.to_bits(), fillings.len() - 1));
                fillings.len() - 1
            }
        };
        let filling = &mut fillings[chosen];
        open.remove(&(filling.busy.to_bits(), chosen));
        filling.busy += member_busy;
        filling.memory_gb += member.memory_gb;
        filling.members.push(member);
        filling.judged.push(judged);
        if filling.members.len() < MAX_MEMBERS && filling.memory_gb + least_gb <= instance_gb {
            open.insert((filling.busy.to_bits(), chosen));
        }
    }
    fillings.retain(|filling| !filling.members.is_empty());
    fillings
}

/// The services and catalogue the optimal planner sees: `packing`'s
/// dedicated services, and one stand-in service per shared instance whose
/// stand-in model has one point, a single segment of the shared size.
pub(crate) struct StandIns {
    /// The catalogue with the stand-in model added.
    pub catalog: ProfileCatalog,
    /// The dedicated services, then the stand-ins.
    pub services: Vec<ServiceSlo>,
    /// The stand-in service of each shared instance, in order.
    pub names: Vec<String>,
}

/// [`StandIns`] for `packing` over `catalog`.
pub(crate) fn stand_ins(packing: &Packing, catalog: &ProfileCatalog) -> Result<StandIns, PlanError> {
    let taken: HashSet<&str> = catalog.iter().map(|p| p.model.as_str()).collect();
    let mut model = "shared instance".to_string();
    while taken.contains(model.as_str()) {
        model.push('\'');
    }
    let config = SegmentConfig { size_gpcs: packing.size, batch: 1, procs: 1 };
    let invalid = |error: tessera_core::CoreError| PlanError::ServingModel(error.to_string());
    let point = ProfilePoint::new(config, 1000.0, 1.0, None).map_err(invalid)?;
    let mut catalog = catalog.clone();
    catalog.insert(ModelProfile::new(packing.gpu_model, model.clone(), vec![point]).map_err(invalid)?);
    let services_taken: HashSet<&str> = packing.dedicated.iter().map(|s| s.service.as_str()).collect();
    let mut names = Vec::with_capacity(packing.instances.len());
    let mut services = packing.dedicated.clone();
    for k in 0..packing.instances.len() {
        let mut name = format!("shared instance {}", k + 1);
        while services_taken.contains(name.as_str()) {
            name.push('\'');
        }
        let mut slo = ServiceSlo::new(name.clone(), model.clone(), 1.0, 1000.0).map_err(invalid)?;
        slo.percentile = 50.0;
        services.push(slo);
        names.push(name);
    }
    Ok(StandIns { catalog, services, names })
}

/// Turns the stand-ins' segments of `plan` into shared instances with
/// their members, and reports every service of `problem` in its order:
/// the dedicated ones as the planner reported them, the members with the
/// serving model's figures at the plan's margin.
pub(crate) fn unfold(mut plan: Plan, packing: &Packing, stand_ins: &StandIns, problem: &Problem<'_>) -> Plan {
    let of_stand_in: BTreeMap<&str, usize> = stand_ins.names.iter().enumerate().map(|(k, n)| (n.as_str(), k)).collect();
    for gpu in &mut plan.gpus {
        let GpuAssignment { instances, shared, .. } = gpu;
        instances.retain(|instance| match of_stand_in.get(instance.service.as_str()) {
            Some(&k) => {
                shared.push(SharedInstance {
                    profile: instance.profile.clone(),
                    size: instance.size,
                    start: instance.start,
                    sharing: Sharing::Serialized,
                    members: packing.instances[k].clone(),
                });
                false
            }
            None => true,
        });
        shared.sort_by_key(|s| s.start);
    }
    let mut reports: BTreeMap<String, ServiceReport> =
        plan.services.drain(..).map(|report| (report.service.clone(), report)).collect();
    for members in &packing.instances {
        for report in member_reports(members, problem) {
            reports.insert(report.service.clone(), report);
        }
    }
    plan.services = problem.services.iter().filter_map(|slo| reports.remove(&slo.service)).collect();
    plan.notes.push(format!(
        "{} services share {} {}g instances under the serialized discipline (one batch at a time, oldest request \
         first); the optimal planner's bound holds given which services share",
        packing.instances.iter().map(Vec::len).sum::<usize>(),
        packing.instances.len(),
        packing.size
    ));
    if !packing.bounded_memory.is_empty() {
        let bounds: Vec<String> =
            packing.bounded_memory.iter().map(|(model, gb)| format!("{model} ≤ {gb:.2} GB")).collect();
        plan.notes.push(format!(
            "memory of shared members is not profiled; bounded from the profiles (processes that ran together in \
             one instance): {}",
            bounds.join(", ")
        ));
    }
    plan
}

/// The service reports of one shared instance's `members`.
fn member_reports(members: &[SharedMember], problem: &Problem<'_>) -> Vec<ServiceReport> {
    let judged: Vec<Member> = members
        .iter()
        .map(|member| {
            let slo = problem.services.iter().find(|slo| slo.service == member.service);
            Member {
                load: MemberLoad { rate_rps: member.capacity_rps, busy_ms: member.busy_ms() },
                slo_ms: slo.map_or(f64::INFINITY, |slo| slo.latency_slo_ms),
                percentile: slo.map_or(99.0, |slo| slo.percentile),
            }
        })
        .collect();
    let busy: f64 = judged.iter().map(|m| m.load.rate_rps * m.load.busy_ms / 1000.0).sum();
    members
        .iter()
        .zip(&judged)
        .enumerate()
        .map(|(index, (member, judge))| {
            let figures = member_figures(&judged, index, problem.margin).ok();
            let latency_ms = figures.map_or(f64::INFINITY, |f| f.latency_ms);
            ServiceReport {
                service: member.service.clone(),
                model: member.model.clone(),
                rate_rps: member.capacity_rps,
                latency_slo_ms: judge.slo_ms,
                provisioned_rps: member.capacity_rps,
                worst_latency_ms: latency_ms,
                segments: 1,
                met: latency_ms <= judge.slo_ms * (1.0 + PREDICTION_TOLERANCE),
                percentile: Some(judge.percentile),
                predicted_attainment: figures.map(|f| f.attainment),
                tolerance: figures.map(|f| f.tolerance),
                busiest_load: Some(busy),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use tessera_core::synthetic::builtin_catalog;
    use tessera_core::GpuModel;

    use super::*;
    use crate::verification::{verify_plan, CheckOptions};
    use crate::{plan, PlanInputs, PlanRequest, ProfileOrigin};

    /// Forty light services (2 to 9 req/s) on the synthetic ResNet-50 and
    /// MobileNetV2, and one heavy one.
    fn long_tail() -> PlanInputs {
        let mut services: Vec<ServiceSlo> = (0..40)
            .map(|k| {
                let model = if k % 2 == 0 { "resnet50" } else { "mobilenetv2" };
                ServiceSlo::new(format!("light-{k}"), model, f64::from(2 + k % 8), 150.0).unwrap()
            })
            .collect();
        services.push(ServiceSlo::new("heavy", "resnet50", 2000.0, 80.0).unwrap());
        PlanInputs::new(services, builtin_catalog(), ProfileOrigin::Synthetic, &[GpuModel::A100_80GB]).unwrap()
    }

    fn planned(inputs: &PlanInputs, share: Option<Sharing>) -> Plan {
        plan(&PlanRequest { share, ..PlanRequest::new(inputs) }).unwrap().plan
    }

    #[test]
    fn light_services_share_instances_and_the_plan_verifies() {
        let inputs = long_tail();
        let (dedicated, shared) = (planned(&inputs, None), planned(&inputs, Some(Sharing::Serialized)));
        assert!(shared.gpu_count < dedicated.gpu_count, "{} vs {}", shared.gpu_count, dedicated.gpu_count);
        let members: usize = shared.shared_instances().map(|(_, i)| i.members.len()).sum();
        assert!(members >= 30, "{members} services share");
        assert!(shared.shared_instances().all(|(_, i)| i.members.len() >= 2 && i.memory_gb() <= 10.0));
        assert_eq!(shared.services.len(), inputs.services().len());
        assert!(shared.services.iter().all(|s| s.met && s.tolerance.is_some_and(|t| t >= 0.06 - 1e-3)));
        let verified = verify_plan(&shared, &inputs, CheckOptions::default()).unwrap();
        assert!(verified.violations.is_empty(), "{:?}", verified.violations);
    }

    #[test]
    fn the_verifier_catches_an_overloaded_or_overfull_shared_instance() {
        let inputs = long_tail();
        let shared = planned(&inputs, Some(Sharing::Serialized));
        let (g, s) =
            shared.gpus.iter().enumerate().find_map(|(g, gpu)| (!gpu.shared.is_empty()).then_some((g, 0))).unwrap();
        let mut overloaded = shared.clone();
        overloaded.gpus[g].shared[s].members[0].capacity_rps *= 60.0;
        let findings = verify_plan(&overloaded, &inputs, CheckOptions::default()).unwrap().violations;
        assert!(findings.iter().any(|f| f.message.contains("misses its")), "{findings:?}");
        let mut overfull = shared.clone();
        let extra = overfull.gpus[g].shared[s].members[0].clone();
        overfull.gpus[g].shared[s].members.extend(std::iter::repeat_n(extra, 8));
        let findings = verify_plan(&overfull, &inputs, CheckOptions::default()).unwrap().violations;
        assert!(findings.iter().any(|f| f.message.contains("GB together")), "{findings:?}");
    }
}
