//! The fresh plan rebuilt on the running plan's layouts: a GPU whose layout
//! changed moves onto a free old GPU whose layout holds its instances'
//! profiles and more, the extra instances running segments that keep the
//! layout.

use std::collections::{HashMap, HashSet};

use tessera_core::{GpuAssignment, GpuModel, InstanceAssignment, Placement, Plan};

use super::align::sorted;
use super::candidates::Candidates;
use super::position::GpuPosition;
use super::work::Ledger;
use crate::allocate::Segment;
use crate::assemble::instance_at;
use crate::problem::Problem;
use crate::report::service_reports;

/// Rebuilds GPUs of `plan` (aligned to `current`) whose layout no GPU of
/// `current` at their position has on the layout of such a GPU of
/// `current` that holds all their instances' profiles and more: each
/// segment moves into an instance of its profile, and the extra instances
/// run the segment they ran before (when the service may still run it) or
/// one more segment of a service of the GPU. The layout then stays, at the
/// price of some over-provisioning and no GPU more.
pub(super) fn keep_layouts(request: &Problem<'_>, current: &Plan, mut plan: Plan, removed: &[GpuPosition]) -> Plan {
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
            provisioned_rps[s] += instance.capacity();
        }
    }
    let mut ledger = Ledger { rate_rps: request.services.iter().map(|s| s.rate_rps).collect(), provisioned_rps };
    let mut positions_freed: Vec<GpuPosition> = Vec::new();
    let mut unplaced: Vec<usize> = Vec::new();
    let mut order = changed_new.clone();
    order.sort_by_key(|&n| std::cmp::Reverse(plan.gpus[n].instances.len()));
    // A GPU is rebuilt only on one with at least as many instances of each
    // of its profiles: counted once, not compared name by name at each try.
    let mut profiles = ProfileCounts::default();
    let mut free_counts: Vec<Vec<u16>> = free_old.iter().map(|o| profiles.of(o)).collect();
    for n in order {
        let needs = profiles.of(&plan.gpus[n]);
        let rebuilt = free_old.iter().zip(&free_counts).enumerate().find_map(|(k, (o, has))| {
            let holds = (0..needs.len()).all(|p| has.get(p).copied().unwrap_or(0) >= needs[p]);
            holds
                .then(|| rebuild_on(&plan.gpus[n], o, request, &index, &mut candidates, &mut ledger))
                .flatten()
                .map(|gpu| (k, gpu))
        });
        match rebuilt {
            Some((k, gpu)) => {
                free_old.remove(k);
                free_counts.remove(k);
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
    plan.services = service_reports(&plan.gpus, request);
    plan
}

/// Each GPU's instances counted by profile, the profiles numbered as first
/// met.
#[derive(Default)]
struct ProfileCounts {
    numbers: HashMap<String, usize>,
}

impl ProfileCounts {
    /// How many instances of each profile `gpu` holds, by profile number
    /// (profiles numbered after it are absent: none).
    fn of(&mut self, gpu: &GpuAssignment) -> Vec<u16> {
        let mut counts = vec![0; self.numbers.len()];
        for instance in &gpu.instances {
            let next = self.numbers.len();
            let number = *self.numbers.entry(instance.profile.clone()).or_insert(next);
            if number >= counts.len() {
                counts.resize(number + 1, 0);
            }
            counts[number] += 1;
        }
        counts
    }
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
        let profile = gpu.gpu_model.spec().profile_by_name(&was.profile).ok()?;
        let placement = Placement { profile, start: was.start };
        extra.push((k, instance_at(request, gpu.gpu_model, &placement, &Segment { service, point })));
    }
    for (k, instance) in extra {
        slots[k] = Some(instance);
    }
    let mut instances: Vec<InstanceAssignment> = slots.into_iter().map(|s| s.expect("every slot filled")).collect();
    instances.sort_by(|a, b| b.size.cmp(&a.size).then(a.start.cmp(&b.start)));
    Some(GpuAssignment { node: old.node, index: old.index, gpu_model: gpu.gpu_model, instances, shared: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimal::plan_optimal;
    use crate::replan::fixtures::{request, services};
    use tessera_core::diff_plans;
    use tessera_core::synthetic::builtin_catalog;

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
}
