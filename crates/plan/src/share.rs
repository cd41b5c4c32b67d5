//! Shared instances for the long tail: light services packed into MIG
//! instances, several per instance, under the serialized discipline
//! ([`tessera_serving::serialized`]).
//!
//! A service may share when, alone at batch 1 in the smallest instance, it
//! meets its percentile SLO with every batch the plan's margin slower.
//! Such services are dealt, busiest first, each to the least busy
//! smallest instance that still takes it: the members' memory fits the
//! instance, there are at most [`MAX_MEMBERS`], and every member still
//! meets its percentile SLO at the margin (the serving model's M/G/1
//! figures, rounded up). A second deal first fills instances of the sizes
//! with more memory per compute slice (`3g.40gb` on an A100-80GB) with the
//! lightest services, keeping each only where it hosts more than as many
//! smallest instances could, then deals the rest; the deal with fewer
//! compute slices wins. An instance left with one member gives it back to
//! dedicated planning, which serves it at least as well. The optimal
//! planner then places each shared instance as a fixed segment of its size
//! beside the dedicated segments, so the plan's bound and gap hold given
//! which services share ([`crate::share_rich`], which also turns the
//! instances where memory idles into memory-rich ones when that saves
//! GPUs).
//!
//! Memory: a member's memory at batch 1 is the profile's `memory_gb` where
//! measured, else an upper bound from the points that ran
//! ([`ModelProfile::process_memory_gb`]); the plan's notes say which
//! models carry such a bound.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use tessera_core::{
    GpuAssignment, GpuModel, ModelProfile, Plan, ProfileCatalog, ProfilePoint, SegmentConfig, ServiceReport,
    ServiceSlo, SharedInstance, SharedMember, Sharing,
};
use tessera_serving::serialized::{all_meet, member_figures, Member, MemberLoad};

use crate::error::PlanError;
use crate::judge::PREDICTION_TOLERANCE;
use crate::problem::Problem;

/// The most services one shared instance hosts.
pub const MAX_MEMBERS: usize = 64;

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
    /// The GPU model every shared instance is on.
    pub gpu_model: GpuModel,
    /// Each shared instance's size (compute slices) and members.
    pub instances: Vec<(u8, Vec<SharedMember>)>,
    /// The services planned with dedicated segments.
    pub dedicated: Vec<ServiceSlo>,
    /// The models whose memory is a bound from the profile, not measured.
    pub bounded_memory: BTreeMap<String, f64>,
}

/// A service that may share, as a member of an instance of one size: its
/// busy share there, its member record and what the model judges.
pub(crate) type Candidate = (f64, SharedMember, Member);

/// `slo` as a member of an instance of `size` on `gpu_model`: `None` when
/// the profile has no batch-1 point there or cannot bound its memory, or
/// when it misses its SLO alone there at `margin`. The flag says whether
/// its memory is a bound rather than a measurement.
pub(crate) fn candidate(
    problem: &Problem<'_>,
    gpu_model: GpuModel,
    size: u8,
    slo: &ServiceSlo,
) -> Option<(Candidate, bool)> {
    let config = SegmentConfig { size_gpcs: size, batch: 1, procs: 1 };
    let profile = problem.catalog.get(gpu_model, &slo.model)?;
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
    let instance_gb = f64::from(gpu_model.spec().profile_for_size(size).ok()?.memory_gb);
    (memory_gb <= instance_gb && all_meet(&[judged], problem.margin)).then_some(((busy, member, judged), !measured))
}

/// The one GPU model of `problem`'s fleet, which shared instances are
/// planned on; an error for a fleet of several.
pub(crate) fn only_gpu_model(problem: &Problem<'_>) -> Result<GpuModel, PlanError> {
    match problem.fleet.as_slice() {
        [offer] => Ok(offer.model),
        _ => Err(PlanError::InvalidOption {
            field: "share",
            message: "shared instances are planned on a fleet of one GPU model".to_string(),
        }),
    }
}

/// Packs `problem`'s light services into shared instances (see the module
/// docs). The fleet must have one GPU model.
pub(crate) fn pack(problem: &Problem<'_>) -> Result<Packing, PlanError> {
    let gpu_model = only_gpu_model(problem)?;
    let spec = gpu_model.spec();
    let smallest = spec.sizes().min().unwrap_or(1);
    let memory_of = |size: u8| f64::from(spec.profile_for_size(size).map_or(0, |p| p.memory_gb));
    let mut bounded_memory = BTreeMap::new();
    let mut light: Vec<Candidate> = Vec::new();
    let mut dedicated = Vec::new();
    for slo in problem.services {
        match candidate(problem, gpu_model, smallest, slo) {
            Some((light_service, bounded)) => {
                if bounded {
                    bounded_memory.insert(slo.model.clone(), light_service.1.memory_gb);
                }
                light.push(light_service);
            }
            None => dedicated.push(slo.clone()),
        }
    }
    let mut larger: Vec<u8> = spec.sizes().filter(|&size| size > smallest).collect();
    larger.retain(|&size| memory_of(size) / f64::from(size) > memory_of(smallest) / f64::from(smallest));
    larger.sort_by(|a, b| (memory_of(*b) / f64::from(*b)).total_cmp(&(memory_of(*a) / f64::from(*a))));
    // Smallest instances only, and larger ones first where they have more
    // memory per compute slice: the deal with fewer compute slices, a
    // service left alone counted as a slice of its own.
    let by_name: HashMap<&str, &ServiceSlo> = problem.services.iter().map(|slo| (slo.service.as_str(), slo)).collect();
    let on = (gpu_model, smallest);
    let (only_smallest, with_larger) = rayon::join(
        || deal(problem, &by_name, on, &[], light.clone()),
        || deal(problem, &by_name, on, &larger, light.clone()),
    );
    let slices = |(instances, alone): &(Vec<(u8, Vec<SharedMember>)>, Vec<String>)| {
        instances.iter().map(|(size, _)| u32::from(*size)).sum::<u32>() + alone.len() as u32
    };
    let (instances, alone) = if slices(&with_larger) < slices(&only_smallest) { with_larger } else { only_smallest };
    let alone: HashSet<&str> = alone.iter().map(String::as_str).collect();
    dedicated.extend(problem.services.iter().filter(|slo| alone.contains(slo.service.as_str())).cloned());
    let sharing: HashSet<&str> = instances.iter().flat_map(|(_, members)| members).map(|m| m.model.as_str()).collect();
    bounded_memory.retain(|model, _| sharing.contains(model.as_str()));
    Ok(Packing { gpu_model, instances, dedicated, bounded_memory })
}

/// One deal of the `light` services on `gpu_model`: instances of each of
/// the `larger` sizes in turn, each filled with the lightest services left
/// and kept only where it hosts more than as many instances of the
/// `smallest` size would; then the rest dealt to instances of the smallest
/// size. The shared instances, and the services left alone (which go back
/// to dedicated planning).
fn deal(
    problem: &Problem<'_>,
    by_name: &HashMap<&str, &ServiceSlo>,
    (gpu_model, smallest): (GpuModel, u8),
    larger: &[u8],
    mut light: Vec<Candidate>,
) -> (Vec<(u8, Vec<SharedMember>)>, Vec<String>) {
    let memory_of = |size: u8| f64::from(gpu_model.spec().profile_for_size(size).map_or(0, |p| p.memory_gb));
    let mut instances: Vec<(u8, Vec<SharedMember>)> = Vec::new();
    light.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.service.cmp(&b.1.service)));
    for &size in larger {
        loop {
            let filled = fill_lightest(problem, by_name, (gpu_model, size), &light);
            let most_member_gb = filled.iter().map(|(_, member)| member.memory_gb).fold(0.0, f64::max);
            let per_smallest = (memory_of(smallest) / most_member_gb.max(f64::MIN_POSITIVE)).floor();
            if (filled.len() as f64) <= f64::from(size / smallest) * per_smallest {
                break;
            }
            let taken: HashSet<usize> = filled.iter().map(|&(k, _)| k).collect();
            let mut position = 0;
            light.retain(|_| {
                position += 1;
                !taken.contains(&(position - 1))
            });
            instances.push((size, filled.into_iter().map(|(_, member)| member).collect()));
        }
    }
    light.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.service.cmp(&b.1.service)));
    let mut alone = Vec::new();
    for mut filling in fewest_instances(light, memory_of(smallest), problem.margin) {
        if filling.members.len() > 1 {
            instances.push((smallest, filling.members));
        } else if let Some(member) = filling.members.pop() {
            alone.push(member.service);
        }
    }
    (instances, alone)
}

/// The services one instance of `size` takes from `light` (lightest
/// first), each with its position there and as a member at that size:
/// lightest first, while the members' memory fits and every member meets
/// its SLO at the margin there.
fn fill_lightest(
    problem: &Problem<'_>,
    by_name: &HashMap<&str, &ServiceSlo>,
    (gpu_model, size): (GpuModel, u8),
    light: &[Candidate],
) -> Vec<(usize, SharedMember)> {
    let instance_gb = f64::from(gpu_model.spec().profile_for_size(size).map_or(0, |p| p.memory_gb));
    let (mut taken, mut judged, mut memory_gb) = (Vec::new(), Vec::new(), 0.0);
    for (k, (_, member, _)) in light.iter().enumerate() {
        if taken.len() >= MAX_MEMBERS || memory_gb + member.memory_gb > instance_gb {
            break;
        }
        let Some(slo) = by_name.get(member.service.as_str()) else { continue };
        let Some(((_, at_size, member_judged), _)) = candidate(problem, gpu_model, size, slo) else { continue };
        judged.push(member_judged);
        if !all_meet(&judged, problem.margin) {
            judged.pop();
            break;
        }
        memory_gb += at_size.memory_gb;
        taken.push((k, at_size));
    }
    taken
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

/// [`StandIns`] for `packing` over `catalog`: one stand-in model per
/// shared size, with one point of that size.
pub(crate) fn stand_ins(packing: &Packing, catalog: &ProfileCatalog) -> Result<StandIns, PlanError> {
    let taken: HashSet<&str> = catalog.iter().map(|p| p.model.as_str()).collect();
    let invalid = |error: tessera_core::CoreError| PlanError::ServingModel(error.to_string());
    let mut catalog = catalog.clone();
    let mut model_of: BTreeMap<u8, String> = BTreeMap::new();
    for &(size, _) in &packing.instances {
        if model_of.contains_key(&size) {
            continue;
        }
        let mut model = format!("shared {size}g instance");
        while taken.contains(model.as_str()) {
            model.push('\'');
        }
        let config = SegmentConfig { size_gpcs: size, batch: 1, procs: 1 };
        let point = ProfilePoint::new(config, 1000.0, 1.0, None).map_err(invalid)?;
        catalog.insert(ModelProfile::new(packing.gpu_model, model.clone(), vec![point]).map_err(invalid)?);
        model_of.insert(size, model);
    }
    let services_taken: HashSet<&str> = packing.dedicated.iter().map(|s| s.service.as_str()).collect();
    let mut names = Vec::with_capacity(packing.instances.len());
    let mut services = packing.dedicated.clone();
    for (k, (size, _)) in packing.instances.iter().enumerate() {
        let mut name = format!("shared instance {}", k + 1);
        while services_taken.contains(name.as_str()) {
            name.push('\'');
        }
        let mut slo = ServiceSlo::new(name.clone(), model_of[size].clone(), 1.0, 1000.0).map_err(invalid)?;
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
                    members: packing.instances[k].1.clone(),
                });
                false
            }
            None => true,
        });
        shared.sort_by_key(|s| s.start);
    }
    let mut reports: BTreeMap<String, ServiceReport> =
        plan.services.drain(..).map(|report| (report.service.clone(), report)).collect();
    let by_name: HashMap<&str, &ServiceSlo> = problem.services.iter().map(|slo| (slo.service.as_str(), slo)).collect();
    for (_, shared) in plan.shared_instances() {
        for report in member_reports(shared, &by_name, problem.margin) {
            reports.insert(report.service.clone(), report);
        }
    }
    plan.services = problem.services.iter().filter_map(|slo| reports.remove(&slo.service)).collect();
    let mut profiles: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, shared) in plan.shared_instances() {
        *profiles.entry(shared.profile.as_str()).or_default() += 1;
    }
    let sizes: Vec<String> = profiles.iter().map(|(profile, count)| format!("{count} {profile}")).collect();
    plan.notes.push(format!(
        "{} services share {} instances ({}) under the serialized discipline (one batch at a time, oldest request \
         first); the optimal planner's bound holds given which services share",
        packing.instances.iter().map(|(_, members)| members.len()).sum::<usize>(),
        packing.instances.len(),
        sizes.join(", ")
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

/// The service reports of one shared instance's members.
fn member_reports(shared: &SharedInstance, by_name: &HashMap<&str, &ServiceSlo>, margin: f64) -> Vec<ServiceReport> {
    let members = &shared.members;
    let judged: Vec<Member> = members
        .iter()
        .map(|member| {
            let slo = by_name.get(member.service.as_str());
            Member {
                load: MemberLoad { rate_rps: member.capacity_rps, busy_ms: member.busy_ms() },
                slo_ms: slo.map_or(f64::INFINITY, |slo| slo.latency_slo_ms),
                percentile: slo.map_or(99.0, |slo| slo.percentile),
            }
        })
        .collect();
    let busy = shared.busy_share(0.0);
    members
        .iter()
        .zip(&judged)
        .enumerate()
        .map(|(index, (member, judge))| {
            let figures = member_figures(&judged, index, margin).ok();
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
pub(crate) mod tests {
    use tessera_core::synthetic::builtin_catalog;
    use tessera_core::GpuModel;

    use super::*;
    use crate::verification::{verify_plan, CheckOptions};
    use crate::{plan, PlanInputs, PlanRequest, ProfileOrigin};

    /// Forty light services (2 to 9 req/s) on the synthetic ResNet-50 and
    /// MobileNetV2, and one heavy one.
    fn long_tail() -> PlanInputs {
        long_tail_with(|_| {})
    }

    /// [`long_tail`]'s services as `change` edits them.
    pub(crate) fn long_tail_with(change: impl FnOnce(&mut Vec<ServiceSlo>)) -> PlanInputs {
        let mut services: Vec<ServiceSlo> = (0..40)
            .map(|k| {
                let model = if k % 2 == 0 { "resnet50" } else { "mobilenetv2" };
                ServiceSlo::new(format!("light-{k}"), model, f64::from(2 + k % 8), 150.0).unwrap()
            })
            .collect();
        services.push(ServiceSlo::new("heavy", "resnet50", 2000.0, 80.0).unwrap());
        change(&mut services);
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
    fn many_very_light_services_fill_larger_instances_where_that_takes_fewer_slices() {
        let services: Vec<ServiceSlo> = (0..160)
            .map(|k| {
                let model = if k % 2 == 0 { "resnet50" } else { "mobilenetv2" };
                ServiceSlo::new(format!("tiny-{k}"), model, 1.0, 400.0).unwrap()
            })
            .collect();
        let inputs =
            PlanInputs::new(services, builtin_catalog(), ProfileOrigin::Synthetic, &[GpuModel::A100_80GB]).unwrap();
        let shared = planned(&inputs, Some(Sharing::Serialized));
        let sizes: Vec<u8> = shared.shared_instances().map(|(_, i)| i.size).collect();
        let slices: u32 = sizes.iter().map(|&size| u32::from(size)).sum();
        // 1g.10gb instances would hold at most 10 GB of members each.
        let most_gb = shared.shared_instances().flat_map(|(_, i)| &i.members).map(|m| m.memory_gb).fold(0.0, f64::max);
        let smallest_only = (160.0 / (10.0 / most_gb).floor()).ceil() as u32;
        assert!(sizes.contains(&3) && slices < smallest_only, "{sizes:?}: {slices} slices, {smallest_only} in 1g");
        let members: usize = shared.shared_instances().map(|(_, i)| i.members.len()).sum();
        assert_eq!(members, 160);
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
