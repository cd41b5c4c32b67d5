//! New segments placed in the unused slices of running GPUs, where the MIG
//! lattice allows, without moving any running instance.

use tessera_core::layout::validate_layout;
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
    let mut placed = 0;
    for gpu in gpus {
        let mut left = GpuAssignment { instances: Vec::new(), shared: Vec::new(), ..gpu.clone() };
        for mut instance in gpu.instances {
            match plan
                .gpus
                .iter_mut()
                .find_map(|running| free_start(running, &instance.profile).map(|at| (running, at)))
            {
                Some((running, start)) => {
                    instance.start = start;
                    running.instances.push(instance);
                    placed += 1;
                }
                None => left.instances.push(instance),
            }
        }
        for mut shared in gpu.shared {
            match plan.gpus.iter_mut().find_map(|running| free_start(running, &shared.profile).map(|at| (running, at)))
            {
                Some((running, start)) => {
                    shared.start = start;
                    running.shared.push(shared);
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

/// `plan` (a replan of `running`) with every shared executor that would
/// restart in place (its members changed) started instead in a free slice
/// of another GPU (or of a new one), the old one left to stop once the new
/// one serves: make before break for executors too, so its members are
/// served throughout (a GPU's own change stops before it starts). `None`
/// when no executor restarts in place.
pub(crate) fn move_restarted_executors(running: &Plan, plan: &Plan) -> Option<Plan> {
    let mut moved = plan.clone();
    let mut restarted = Vec::new();
    for gpu in &mut moved.gpus {
        let Some(before) = running.gpus.iter().find(|old| (old.node, old.index) == (gpu.node, gpu.index)) else {
            continue;
        };
        let (node, index) = (gpu.node, gpu.index);
        gpu.shared.retain(|shared| {
            let old = before.shared.iter().find(|old| (&old.profile, old.start) == (&shared.profile, shared.start));
            let restarts = old.is_some_and(|old| !old.same_executor(shared));
            if restarts {
                restarted.push(((node, index), shared.clone()));
            }
            !restarts
        });
    }
    if restarted.is_empty() {
        return None;
    }
    let per_node = moved.gpus_per_node.max(1);
    let gpu_model = moved.gpus.first()?.gpu_model;
    let mut next = moved.gpus.iter().chain(&running.gpus).map(|gpu| gpu.node * per_node + gpu.index + 1).max()?;
    for (origin, mut shared) in restarted {
        // The vacated slice still runs the old executor while this starts:
        // another GPU's free slice, else a new GPU.
        let elsewhere = moved.gpus.iter_mut().filter(|gpu| (gpu.node, gpu.index) != origin).find_map(|gpu| {
            let holds = running.gpus.iter().find(|old| (old.node, old.index) == (gpu.node, gpu.index));
            let start = free_start_beside(gpu, holds, &shared.profile)?;
            Some((gpu, start))
        });
        match elsewhere {
            Some((gpu, start)) => {
                shared.start = start;
                gpu.shared.push(shared);
            }
            None => {
                let mut gpu = GpuAssignment::dedicated(next / per_node, next % per_node, gpu_model, Vec::new());
                next += 1;
                shared.start = free_start(&gpu, &shared.profile)?;
                gpu.shared.push(shared);
                moved.gpus.push(gpu);
            }
        }
    }
    moved.gpus.retain(|gpu| !gpu.is_empty());
    moved.gpus.sort_by_key(|gpu| (gpu.node, gpu.index));
    moved.gpu_count = moved.gpus.len();
    Some(moved)
}

/// A start at which an instance of `profile` fits on `gpu` beside its
/// instances and beside those `running` (the same GPU in the running
/// plan) still holds while a transition runs.
fn free_start_beside(gpu: &GpuAssignment, running: Option<&GpuAssignment>, profile: &str) -> Option<u8> {
    let mut both = gpu.clone();
    if let Some(running) = running {
        both.instances.extend(running.instances.iter().filter(|old| !holds(gpu, &old.profile, old.start)).cloned());
        both.shared.extend(running.shared.iter().filter(|old| !holds(gpu, &old.profile, old.start)).cloned());
    }
    free_start(&both, profile)
}

/// Whether `gpu` has an instance of `profile` at `start`.
fn holds(gpu: &GpuAssignment, profile: &str, start: u8) -> bool {
    gpu.layout().any(|(held, _, at)| held == profile && at == start)
}

/// A start at which an instance of `profile` fits on `gpu` beside its
/// instances (dedicated and shared).
fn free_start(gpu: &GpuAssignment, profile: &str) -> Option<u8> {
    let spec = gpu.gpu_model.spec();
    let profile = spec.profile_by_name(profile).ok()?;
    let mut placements: Vec<Placement> = gpu
        .layout()
        .map(|(running, _, start)| Some(Placement { profile: spec.profile_by_name(running).ok()?, start }))
        .collect::<Option<_>>()?;
    profile.starts.iter().copied().find(|&start| {
        placements.push(Placement { profile, start });
        let fits = validate_layout(gpu.gpu_model, &placements).is_ok();
        placements.pop();
        fits
    })
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

    #[test]
    fn an_executor_whose_members_change_starts_on_another_gpu_before_the_old_one_stops() {
        let with_executor = |index: u32, members: &[&str]| {
            let mut gpu = gpu(index, vec![instance("4g.40gb", 0)]);
            gpu.shared.push(shared(4, members));
            gpu
        };
        let running = Plan::from_gpus(
            vec![with_executor(0, &["a", "b"]), gpu(1, vec![instance("4g.40gb", 0)])],
            "optimal",
            "percentile",
            8,
        );
        // The same executor: nothing restarts.
        assert!(move_restarted_executors(&running, &running).is_none());
        // c joins the executor on GPU 0: it starts on GPU 1's free slice.
        let mut joined = running.clone();
        joined.gpus[0] = with_executor(0, &["a", "b", "c"]);
        let moved = move_restarted_executors(&running, &joined).expect("an executor restarts");
        assert!(moved.gpus[0].shared.is_empty());
        let (_, executor) = moved.shared_instances().next().unwrap();
        assert_eq!((moved.gpus[1].index, executor.start, executor.members.len()), (1, 4, 3));
        // With no room on another GPU, it starts on a new one.
        let mut full = joined.clone();
        full.gpus[1].instances.push(instance("3g.40gb", 4));
        let mut running_full = running.clone();
        running_full.gpus[1].instances.push(instance("3g.40gb", 4));
        let moved = move_restarted_executors(&running_full, &full).unwrap();
        assert_eq!(moved.gpu_count, 3);
        assert_eq!((moved.gpus[2].node, moved.gpus[2].index), (0, 2));
        assert_eq!(moved.gpus[2].shared[0].members.len(), 3);
    }
}
