//! New segments placed in the unused slices of running GPUs, where the MIG
//! lattice allows, without moving any running instance.

use std::collections::HashMap;

use tessera_core::layout;
use tessera_core::{GpuAssignment, Placement, Plan};

/// Adds `gpus` (new GPUs' segments and shared executors) to `plan`: each
/// instance goes to the first GPU of `plan` of its GPU model with room for
/// it at one of its profile's starts beside the instances there, dedicated
/// or shared (running instances keep their starts); the instances that fit
/// nowhere stay on their GPU, which joins `plan` at a position after the
/// last. Returns how many instances went into free slices.
pub(crate) fn add_in_free_slices(plan: &mut Plan, gpus: Vec<GpuAssignment>) -> usize {
    let per_node = plan.gpus_per_node.max(1);
    let mut next = plan.gpus.iter().map(|gpu| gpu.node * per_node + gpu.index + 1).max().unwrap_or(0);
    let mut room = Room::default();
    let mut placed = 0;
    for gpu in gpus {
        let mut left = GpuAssignment { instances: Vec::new(), shared: Vec::new(), ..gpu.clone() };
        for mut instance in gpu.instances {
            match room.first_fit(plan, &instance.profile) {
                Some((at, placement)) => {
                    instance.start = placement.start;
                    room.taken(at, placement);
                    plan.gpus[at].instances.push(instance);
                    placed += 1;
                }
                None => left.instances.push(instance),
            }
        }
        for mut shared in gpu.shared {
            match room.first_fit(plan, &shared.profile) {
                Some((at, placement)) => {
                    shared.start = placement.start;
                    room.taken(at, placement);
                    plan.gpus[at].shared.push(shared);
                    placed += 1;
                }
                None => left.shared.push(shared),
            }
        }
        if !left.is_empty() {
            plan.gpus.push(GpuAssignment { node: next / per_node, index: next % per_node, ..left });
            next += 1;
        }
    }
    plan.gpu_count = plan.gpus.len();
    placed
}

/// What is known of the running GPUs' room while instances are added: an
/// instance only ever takes room, so a GPU found without room for a
/// profile never has it again, and the first fit of a profile is searched
/// from the first GPU not yet found full for it.
#[derive(Default)]
struct Room {
    /// Each GPU's placements, by its index in the plan, once looked at
    /// (`None` inside: an instance of a profile its model does not have,
    /// so nothing fits beside it).
    layouts: Vec<Option<Option<Vec<Placement>>>>,
    /// Per profile name: the first GPU that may still have room for it.
    first_with_room: HashMap<String, usize>,
}

impl Room {
    /// The first GPU of `plan` with room for an instance of `profile`, and
    /// where the instance would go there.
    fn first_fit(&mut self, plan: &Plan, profile: &str) -> Option<(usize, Placement)> {
        let from = self.first_with_room.get(profile).copied().unwrap_or(0);
        for at in from..plan.gpus.len() {
            if let Some(placement) = self.free_placement(plan, at, profile) {
                self.first_with_room.insert(profile.to_string(), at);
                return Some((at, placement));
            }
        }
        self.first_with_room.insert(profile.to_string(), plan.gpus.len());
        None
    }

    /// Where an instance of `profile` fits on GPU `at` of `plan` beside
    /// its instances (dedicated and shared), if anywhere.
    fn free_placement(&mut self, plan: &Plan, at: usize, profile: &str) -> Option<Placement> {
        let gpu = &plan.gpus[at];
        let profile = gpu.gpu_model.spec().profile_by_name(profile).ok()?;
        let placements = self.placements(plan, at).as_ref()?;
        let start = layout::free_start(gpu.gpu_model, placements, profile)?;
        Some(Placement { profile, start })
    }

    /// GPU `at`'s placements, read from the plan the first time.
    fn placements(&mut self, plan: &Plan, at: usize) -> &Option<Vec<Placement>> {
        if self.layouts.len() <= at {
            self.layouts.resize(plan.gpus.len().max(at + 1), None);
        }
        self.layouts[at].get_or_insert_with(|| {
            let spec = plan.gpus[at].gpu_model.spec();
            (plan.gpus[at].layout())
                .map(|(running, _, start)| Some(Placement { profile: spec.profile_by_name(running).ok()?, start }))
                .collect()
        })
    }

    /// Notes an instance at `placement` on GPU `at`.
    fn taken(&mut self, at: usize, placement: Placement) {
        if let Some(Some(Some(placements))) = self.layouts.get_mut(at) {
            placements.push(placement);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::{GpuModel, InstanceAssignment, SharedInstance, SharedMember, Sharing};

    fn instance(profile: &str, start: u8) -> InstanceAssignment {
        InstanceAssignment {
            profile: profile.to_string(),
            size: profile.as_bytes()[0] - b'0',
            start,
            service: "s".to_string(),
            model: "m".to_string(),
            batch: 1,
            procs: 1,
            throughput_rps: 1.0,
            latency_ms: 1.0,
            capacity_rps: None,
        }
    }

    fn gpu(index: u32, instances: Vec<InstanceAssignment>) -> GpuAssignment {
        GpuAssignment::dedicated(0, index, GpuModel::A100_80GB, instances)
    }

    #[test]
    fn segments_fill_free_slices_and_the_rest_keep_a_gpu_of_their_own() {
        // 0:0 has a 4g at 0: a 2g fits at 4, a 1g at 6; a 3g does not.
        let mut plan = Plan::from_gpus(vec![gpu(0, vec![instance("4g.40gb", 0)])], "optimal", "percentile", 8);
        let new =
            vec![gpu(0, vec![instance("2g.20gb", 0), instance("1g.10gb", 2)]), gpu(1, vec![instance("3g.40gb", 4)])];
        assert_eq!(add_in_free_slices(&mut plan, new), 2);
        let starts: Vec<(String, u8)> = plan.gpus[0].instances.iter().map(|i| (i.profile.clone(), i.start)).collect();
        assert_eq!(starts, [("4g.40gb".to_string(), 0), ("2g.20gb".to_string(), 4), ("1g.10gb".to_string(), 6)]);
        assert_eq!(plan.gpu_count, 2);
        assert_eq!((plan.gpus[1].node, plan.gpus[1].index), (0, 1));
        assert_eq!(plan.gpus[1].instances[0].start, 4);
    }

    fn member(service: &str) -> SharedMember {
        SharedMember {
            service: service.to_string(),
            model: "m".to_string(),
            batch: 1,
            latency_ms: 1.0,
            throughput_rps: 1000.0,
            capacity_rps: 10.0,
            memory_gb: 1.0,
        }
    }

    fn shared(start: u8, services: &[&str]) -> SharedInstance {
        SharedInstance {
            profile: "1g.10gb".to_string(),
            size: 1,
            start,
            sharing: Sharing::Serialized,
            members: services.iter().map(|s| member(s)).collect(),
        }
    }

    #[test]
    fn a_shared_executor_takes_a_free_slice_and_running_executors_hold_theirs() {
        // 0:0 runs a 4g at 0, an executor on the 1g at 4 and a 1g at 6:
        // the one 1g left is at 5 (the running executor's slice is taken).
        let mut running = gpu(0, vec![instance("4g.40gb", 0), instance("1g.10gb", 6)]);
        running.shared.push(shared(4, &["a", "b"]));
        let mut plan = Plan::from_gpus(vec![running], "optimal", "percentile", 8);
        let mut new = gpu(0, Vec::new());
        new.shared = vec![shared(0, &["c", "d"]), shared(1, &["e", "f"])];
        assert_eq!(add_in_free_slices(&mut plan, vec![new]), 1);
        let starts: Vec<u8> = plan.gpus[0].shared.iter().map(|s| s.start).collect();
        assert_eq!(starts, [4, 5]);
        assert_eq!(plan.gpu_count, 2);
        assert!(plan.gpus[1].instances.is_empty());
        assert_eq!(plan.gpus[1].shared[0].members[0].service, "e");
    }
}
