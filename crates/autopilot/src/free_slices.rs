//! New segments placed in the unused slices of running GPUs, where the MIG
//! lattice allows, without moving any running instance.

use tessera_core::layout::validate_layout;
use tessera_core::{GpuAssignment, InstanceAssignment, Placement, Plan};

/// Adds `gpus` (new GPUs' segments) to `plan`: each segment goes to the
/// first GPU of `plan` of its GPU model with room for it at one of its
/// profile's starts beside the instances there (running instances keep
/// their starts); the segments that fit nowhere stay on their GPU, which
/// joins `plan` at a position after the last. Returns how many segments
/// went into free slices.
pub(crate) fn add_in_free_slices(plan: &mut Plan, gpus: Vec<GpuAssignment>) -> usize {
    let per_node = plan.gpus_per_node.max(1);
    let mut next = plan.gpus.iter().map(|gpu| gpu.node * per_node + gpu.index + 1).max().unwrap_or(0);
    let mut placed = 0;
    for gpu in gpus {
        let mut left = Vec::new();
        for instance in gpu.instances {
            match plan.gpus.iter_mut().find_map(|running| free_start(running, &instance).map(|start| (running, start)))
            {
                Some((running, start)) => {
                    running.instances.push(InstanceAssignment { start, ..instance });
                    placed += 1;
                }
                None => left.push(instance),
            }
        }
        if !left.is_empty() {
            plan.gpus.push(GpuAssignment { node: next / per_node, index: next % per_node, instances: left, ..gpu });
            next += 1;
        }
    }
    plan.gpu_count = plan.gpus.len();
    placed
}

/// A start at which `instance` fits on `gpu` beside its instances.
fn free_start(gpu: &GpuAssignment, instance: &InstanceAssignment) -> Option<u8> {
    let spec = gpu.gpu_model.spec();
    let profile = spec.profile_by_name(&instance.profile).ok()?;
    let mut placements: Vec<Placement> = gpu
        .instances
        .iter()
        .map(|running| Some(Placement { profile: spec.profile_by_name(&running.profile).ok()?, start: running.start }))
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
    use tessera_core::GpuModel;

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
}
