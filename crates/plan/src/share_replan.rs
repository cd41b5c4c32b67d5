//! A replan of a plan with shared instances: the running shared instances
//! keep their places and as many of their members as still fit, newcomers
//! join them where they fit, and the rest is packed and placed as a fresh
//! shared plan would be — all through the replanner, which sees each shared
//! instance as one fixed segment ([`crate::share::stand_ins`]).
//!
//! 1. **Kept.** A running shared instance (on a GPU neither drained nor
//!    lost) keeps each member whose service still exists with the same
//!    model and is still light at the instance's size, at its new rate;
//!    while the members do not fit together (memory, count, every
//!    member's SLO at the margin) the busiest leaves. An instance left with
//!    fewer than two members is given up, its slice free for the replanner.
//! 2. **Joined.** The other light services, busiest first, each join the
//!    least busy kept instance that still takes them.
//! 3. **Packed.** What is left is packed as [`crate::share::pack`] packs a
//!    fresh plan: new shared instances and dedicated services.
//!
//! The replanner then keeps every kept instance's stand-in segment where it
//! runs (its layout stays) and places the new ones; the stand-ins are
//! unfolded back into shared instances, and the diffs are taken against
//! the running plan as it is. A member joining or leaving restarts that
//! instance's executor only ([`tessera_core::diff`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use tessera_core::{diff_plans, GpuAssignment, InstanceAssignment, Plan, ServiceSlo};
use tessera_serving::serialized::{all_meet, Member};

use crate::error::PlanError;
use crate::problem::Problem;
use crate::replan::{align_to, replan, GpuPosition, Replan, ReplanRequest};
use crate::share::{candidate, only_gpu_model, pack, stand_ins, unfold, Candidate, Packing, MAX_MEMBERS};
use crate::share_rich::plan_shared;

/// A running shared instance kept: where it runs and its members.
struct Kept {
    /// Its GPU, profile and start in the running plan.
    place: (GpuPosition, String, u8),
    size: u8,
    /// Each member with its busy share and its model figures.
    members: Vec<Candidate>,
}

impl Kept {
    fn busy(&self) -> f64 {
        self.members.iter().map(|(busy, ..)| busy).sum()
    }

    fn memory_gb(&self) -> f64 {
        self.members.iter().map(|(_, member, _)| member.memory_gb).sum()
    }

    /// Whether the members fit together in an instance of `instance_gb`.
    fn fits(&self, instance_gb: f64, margin: f64) -> bool {
        let judged: Vec<Member> = self.members.iter().map(|(.., judged)| *judged).collect();
        self.members.len() <= MAX_MEMBERS && self.memory_gb() <= instance_gb && all_meet(&judged, margin)
    }
}

/// Replans `problem` (sharing) from `current`, which may have shared
/// instances (see the module documentation).
pub(crate) fn replan_shared(
    problem: &Problem<'_>,
    current: &Plan,
    max_extra_gpus: u64,
    removed: &[GpuPosition],
) -> Result<Replan, PlanError> {
    let gpu_model = only_gpu_model(problem)?;
    let spec = gpu_model.spec();
    let instance_gb = |profile: &str| f64::from(spec.profile_by_name(profile).map_or(0, |p| p.memory_gb));
    let by_name: HashMap<&str, &ServiceSlo> = problem.services.iter().map(|slo| (slo.service.as_str(), slo)).collect();
    let mut bounded_memory: BTreeMap<String, f64> = BTreeMap::new();
    let mut as_member = |slo: &ServiceSlo, size: u8| {
        let (member, bounded) = candidate(problem, gpu_model, size, slo)?;
        if bounded {
            bounded_memory.insert(slo.model.clone(), member.1.memory_gb);
        }
        Some(member)
    };

    // 1. The running shared instances that keep at least two members.
    let mut kept: Vec<Kept> = Vec::new();
    for gpu in current.gpus.iter().filter(|gpu| gpu.gpu_model == gpu_model) {
        let position = GpuPosition { node: gpu.node, index: gpu.index };
        if removed.contains(&position) {
            continue;
        }
        for shared in &gpu.shared {
            let members = shared
                .members
                .iter()
                .filter_map(|m| by_name.get(m.service.as_str()).filter(|slo| slo.model == m.model))
                .filter_map(|slo| as_member(slo, shared.size))
                .collect();
            let mut instance =
                Kept { place: (position, shared.profile.clone(), shared.start), size: shared.size, members };
            while !instance.members.is_empty() && !instance.fits(instance_gb(&shared.profile), problem.margin) {
                let busiest = (0..instance.members.len())
                    .max_by(|&a, &b| instance.members[a].0.total_cmp(&instance.members[b].0))
                    .unwrap_or(0);
                instance.members.remove(busiest);
            }
            if instance.members.len() >= 2 {
                kept.push(instance);
            }
        }
    }

    // 2. Light services not in a kept instance join the least busy one
    // that takes them, busiest first.
    let placed: HashSet<String> =
        kept.iter().flat_map(|instance| &instance.members).map(|(_, m, _)| m.service.clone()).collect();
    let smallest = gpu_model.spec().sizes().min().unwrap_or(1);
    let mut joining: Vec<(f64, &ServiceSlo)> = problem
        .services
        .iter()
        .filter(|slo| !placed.contains(&slo.service))
        .filter_map(|slo| as_member(slo, smallest).map(|(busy, ..)| (busy, slo)))
        .collect();
    joining.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.service.cmp(&b.1.service)));
    let mut joined: HashSet<&str> = HashSet::new();
    for (_, slo) in joining {
        let mut order: Vec<usize> = (0..kept.len()).collect();
        order.sort_by(|&a, &b| kept[a].busy().total_cmp(&kept[b].busy()));
        for k in order {
            let Some(member) = as_member(slo, kept[k].size) else { continue };
            kept[k].members.push(member);
            if kept[k].fits(instance_gb(&kept[k].place.1), problem.margin) {
                joined.insert(slo.service.as_str());
                break;
            }
            kept[k].members.pop();
        }
    }

    // 3. The rest packed as a fresh plan would be.
    let rest: Vec<ServiceSlo> = problem
        .services
        .iter()
        .filter(|slo| !placed.contains(&slo.service) && !joined.contains(slo.service.as_str()))
        .cloned()
        .collect();
    let fresh_packing = pack(&Problem { services: &rest, ..problem.clone() })?;
    bounded_memory.extend(fresh_packing.bounded_memory);
    let sharing: HashSet<&str> = kept
        .iter()
        .flat_map(|instance| &instance.members)
        .map(|(_, m, _)| m.model.as_str())
        .chain(fresh_packing.instances.iter().flat_map(|(_, members)| members).map(|m| m.model.as_str()))
        .collect();
    bounded_memory.retain(|model, _| sharing.contains(model.as_str()));
    let packing = Packing {
        gpu_model,
        instances: kept
            .iter()
            .map(|instance| (instance.size, instance.members.iter().map(|(_, m, _)| m.clone()).collect()))
            .chain(fresh_packing.instances)
            .collect(),
        dedicated: fresh_packing.dedicated,
        bounded_memory,
    };

    // The replanner sees each shared instance as a segment of its stand-in.
    let stand_ins = stand_ins(&packing, problem.catalog)?;
    let dedicated_count = packing.dedicated.len();
    let running = with_stand_ins(current, &kept, |k| {
        let stand_in = &stand_ins.services[dedicated_count + k];
        (stand_in.service.clone(), stand_in.model.clone())
    });
    let placing =
        Problem { catalog: &stand_ins.catalog, services: &stand_ins.services, points: None, ..problem.clone() };
    // Its catalogue is of stand-ins: no memo of the inputs' serves it.
    let request =
        ReplanRequest { plan: placing, current: &running, max_extra_gpus, removed_gpus: removed, fresh_memo: None };
    let replanned = replan(&request)?;
    let mut plan = unfold(replanned.plan, &packing, &stand_ins, problem);
    plan.notes.push(format!(
        "replanned with shared instances: {} of the running plan's {} kept where they run, {} joined by a service",
        kept.len(),
        current.shared_instances().count(),
        joined.len()
    ));
    // The baseline is a shared plan made from scratch; a replan over its
    // GPUs plus the extra allowed gives way to it.
    let fresh = align_to(current, plan_shared(problem)?, removed);
    if plan.gpu_count as u64 > fresh.gpu_count as u64 + max_extra_gpus {
        let mut plan = fresh.clone();
        plan.notes.push(format!(
            "the shared instances kept where they run needed {} GPUs, over the fresh plan's {} (+{max_extra_gpus}              allowed): the fresh plan is taken",
            plan.gpu_count, fresh.gpu_count
        ));
        let diff = diff_plans(current, &plan);
        return Ok(Replan { fresh_diff: diff.clone(), diff, plan, fresh, from_fresh: true });
    }
    Ok(Replan {
        diff: diff_plans(current, &plan),
        fresh_diff: diff_plans(current, &fresh),
        plan,
        fresh,
        from_fresh: replanned.from_fresh,
    })
}

/// `current` with each shared instance turned into a dedicated segment: a
/// kept one (the `k`th of `kept`) runs its stand-in (`stand_in(k)`: service
/// and model), any other one a service no problem has, so that its slice
/// is free to the replanner.
fn with_stand_ins(current: &Plan, kept: &[Kept], stand_in: impl Fn(usize) -> (String, String)) -> Plan {
    let mut running = current.clone();
    for gpu in &mut running.gpus {
        let position = GpuPosition { node: gpu.node, index: gpu.index };
        let GpuAssignment { instances, shared, .. } = gpu;
        for instance in shared.drain(..) {
            let found = kept.iter().position(|k| k.place == (position, instance.profile.clone(), instance.start));
            let (service, model) = match found {
                Some(k) => stand_in(k),
                None => (String::new(), String::new()),
            };
            instances.push(InstanceAssignment {
                profile: instance.profile,
                size: instance.size,
                start: instance.start,
                service,
                model,
                batch: 1,
                procs: 1,
                throughput_rps: 1000.0,
                latency_ms: 1.0,
                capacity_rps: None,
            });
        }
    }
    running
}

#[cfg(test)]
mod tests {
    use tessera_core::Sharing;

    use crate::share::tests::long_tail_with as long_tail;
    use crate::verification::{verify_plan, CheckOptions};
    use crate::{plan, PlanRequest, ReplanFrom};

    use super::*;

    /// The shared instances of `plan`, by place, with their members.
    fn executors(plan: &Plan) -> BTreeMap<(u32, u32, u8), Vec<String>> {
        plan.shared_instances()
            .map(|(gpu, shared)| {
                ((gpu.node, gpu.index, shared.start), shared.members.iter().map(|m| m.service.clone()).collect())
            })
            .collect()
    }

    #[test]
    fn a_replan_keeps_the_shared_instances_and_moves_only_what_changed() {
        let before = long_tail(|_| {});
        let running =
            plan(&PlanRequest { share: Some(Sharing::Serialized), ..PlanRequest::new(&before) }).unwrap().plan;
        // light-0 becomes heavy, light-39 leaves, light-new arrives.
        let after = long_tail(|services| {
            services[0].rate_rps = 400.0;
            services.retain(|s| s.service != "light-39");
            services.push(ServiceSlo::new("light-new", "resnet50", 3.0, 150.0).unwrap());
        });
        let from = ReplanFrom {
            current: &running,
            max_extra_gpus: 1,
            drained: Vec::new(),
            lost: Vec::new(),
            within_layouts: false,
        };
        // The running plan shares, so the replan does without being asked.
        let planned = plan(&PlanRequest { from: Some(from), ..PlanRequest::new(&after) }).unwrap();
        let replanned = &planned.plan;
        let verified = verify_plan(replanned, &after, CheckOptions::default()).unwrap();
        assert!(verified.violations.is_empty(), "{:?}", verified.violations);
        assert!(replanned.services.iter().all(|s| s.met), "{:?}", replanned.services);
        assert_eq!(replanned.services.len(), after.services().len());

        let (old, new) = (executors(&running), executors(replanned));
        let unchanged = old.iter().filter(|(place, members)| new.get(place) == Some(members)).count();
        let member_of = |name: &str| new.values().any(|members| members.iter().any(|m| m == name));
        assert!(member_of("light-new"), "{new:?}");
        assert!(!member_of("light-39") && !member_of("light-0"), "{new:?}");
        // Three services changed, each touching at most one executor.
        assert!(unchanged + 3 >= old.len(), "{unchanged} of {} executors unchanged: {old:?} → {new:?}", old.len());
        let comparison = planned.replan.as_ref().unwrap();
        let (totals, fresh) = (comparison.diff.totals, comparison.fresh_diff.totals);
        assert_eq!(totals.services_changed, 3, "{totals:?}");
        assert!(totals.churn() <= fresh.churn() && fresh.services_changed > 3, "{totals:?} against fresh {fresh:?}");
        assert!(
            replanned.notes.iter().any(|n| n.starts_with("replanned with shared instances")),
            "{:?}",
            replanned.notes
        );
    }

    #[test]
    fn a_drained_gpus_shared_instances_move_and_every_member_keeps_its_slo() {
        let inputs = long_tail(|_| {});
        let running =
            plan(&PlanRequest { share: Some(Sharing::Serialized), ..PlanRequest::new(&inputs) }).unwrap().plan;
        let (gpu, _) = running.shared_instances().next().unwrap();
        let drained = GpuPosition { node: gpu.node, index: gpu.index };
        let from = ReplanFrom {
            current: &running,
            max_extra_gpus: 1,
            drained: vec![drained],
            lost: Vec::new(),
            within_layouts: false,
        };
        let replanned = plan(&PlanRequest { from: Some(from), ..PlanRequest::new(&inputs) }).unwrap().plan;
        assert!(replanned.gpus.iter().all(|g| (g.node, g.index) != (drained.node, drained.index)));
        let verified = verify_plan(&replanned, &inputs, CheckOptions::default()).unwrap();
        assert!(verified.violations.is_empty(), "{:?}", verified.violations);
        assert!(replanned.services.iter().all(|s| s.met));
        let members: usize = replanned.shared_instances().map(|(_, s)| s.members.len()).sum();
        assert!(members >= 30, "{members} services still share");
    }
}
