//! A plan made to look like the running one without changing what it
//! runs: its GPUs renumbered to the positions of matching GPUs
//! ([`align_to`]) and its segments moved between instances of the same
//! profile to where they ran ([`reseat`]).

use std::collections::{BTreeSet, HashMap};

use tessera_core::{GpuAssignment, GpuModel, InstanceAssignment, Plan};

use super::position::GpuPosition;

/// `new` renumbered to match `current`: each GPU takes the position of a
/// GPU of `current` (never one of `excluded`) that is identical (its
/// segments and shared executors), else one
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
    match_by(&|g| {
        let shared = sorted(g.shared.iter().map(|s| {
            let members: Vec<(&str, &str, u32)> =
                s.members.iter().map(|m| (m.service.as_str(), m.model.as_str(), m.batch)).collect();
            (s.profile.as_str(), s.start, s.sharing.name(), members)
        }));
        format!("{} {:?} {shared:?}", g.gpu_model, sorted(g.instances.iter().map(segment_key)))
    });
    match_by(&|g| format!("{} {:?}", g.gpu_model, sorted(g.layout())));
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

pub(super) fn sorted<T: Ord>(items: impl Iterator<Item = T>) -> Vec<T> {
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
    let mut pool: HashMap<PoolKey, Pool> = HashMap::new();
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
            if let Some(segment) = candidates.take_first(&kind_of(was)) {
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
                let segment = candidates.instances.pop().expect("as many segments as instances per profile");
                *instance = InstanceAssignment { start: instance.start, ..segment };
            }
        }
    }
    plan
}

/// What makes two segments the same wherever they run: service, model,
/// batch and processes.
type SegmentKind = (String, String, u32, u32);

fn kind_of(instance: &InstanceAssignment) -> SegmentKind {
    (instance.service.clone(), instance.model.clone(), instance.batch, instance.procs)
}

/// The segments of one GPU model and MIG profile still to seat, with the
/// positions of each kind among them.
#[derive(Default)]
struct Pool {
    instances: Vec<InstanceAssignment>,
    positions: HashMap<SegmentKind, BTreeSet<usize>>,
}

impl Pool {
    fn push(&mut self, instance: InstanceAssignment) {
        self.positions.entry(kind_of(&instance)).or_default().insert(self.instances.len());
        self.instances.push(instance);
    }

    /// Takes the first segment of `kind` out (the last one takes its
    /// place, as `Vec::swap_remove`), if any.
    fn take_first(&mut self, kind: &SegmentKind) -> Option<InstanceAssignment> {
        let first = self.positions.get_mut(kind)?.pop_first()?;
        let last = self.instances.len() - 1;
        if first != last {
            let moved = self.positions.get_mut(&kind_of(&self.instances[last])).expect("every segment indexed");
            moved.remove(&last);
            moved.insert(first);
        }
        Some(self.instances.swap_remove(first))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimal::plan_optimal;
    use crate::replan::fixtures::{request, services};
    use tessera_core::diff_plans;
    use tessera_core::synthetic::builtin_catalog;

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

    #[test]
    fn a_pool_takes_the_first_of_a_kind_as_a_scan_and_swap_remove_would() {
        use tessera_core::rng::SplitMix64;
        let catalog = builtin_catalog();
        let plan = plan_optimal(&request(&catalog, &services(24, 9))).unwrap();
        let kinds: Vec<InstanceAssignment> = plan.gpus.iter().flat_map(|gpu| gpu.instances.clone()).take(4).collect();
        let mut rng = SplitMix64::new(5);
        let (mut pool, mut scanned) = (Pool::default(), Vec::new());
        for _ in 0..200 {
            let instance = kinds[rng.below(kinds.len())].clone();
            pool.push(instance.clone());
            scanned.push(instance);
        }
        while !scanned.is_empty() {
            let kind = kind_of(&kinds[rng.below(kinds.len())]);
            let expected = scanned.iter().position(|c| kind_of(c) == kind).map(|k| scanned.swap_remove(k));
            assert_eq!(pool.take_first(&kind), expected);
            assert_eq!(pool.instances, scanned);
        }
    }
}
