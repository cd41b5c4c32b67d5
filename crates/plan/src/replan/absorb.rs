//! New GPUs moved into the unused slices of kept GPUs: a layout changed
//! instead of a GPU added.

use std::collections::HashMap;

use tessera_core::{layout, Placement};

use super::work::{Slot, WorkGpu};

/// A valid start for `profile` beside the instances of `gpu`, if any.
fn free_start(gpu: &WorkGpu, profile: &'static tessera_core::MigProfile) -> Option<u8> {
    layout::free_start(gpu.model, &gpu.placements(), profile)
}

/// Moves each new GPU whose instances all fit in the unused slices of one
/// kept GPU there: one layout changed instead of one GPU added. With
/// `spread`, a new GPU whose instances fit in unused slices of several kept
/// GPUs moves too (GPUs already changed first): more layouts change, one
/// GPU fewer.
///
/// Each kept GPU's unused compute slices are kept as GPUs take instances,
/// and a kept GPU too full for what is moved is not searched: at fleet
/// scale thousands of new GPUs each look over tens of thousands of kept
/// ones.
pub(super) fn absorb_new_gpus(gpus: &mut Vec<WorkGpu>, kept_count: usize, spread: bool) {
    let mut touched = vec![false; kept_count];
    let mut unused: Vec<u32> = gpus[..kept_count].iter().map(WorkGpu::unused_gpcs).collect();
    let mut g = kept_count;
    while g < gpus.len() {
        // The fewest slices a kept GPU must have unused to take part.
        let least = match spread {
            true => gpus[g].slots.iter().map(|slot| u32::from(slot.placement.profile.compute_slices)).min(),
            false => Some(gpus[g].used_gpcs()),
        };
        let mut order: Vec<usize> = (0..kept_count)
            .filter(|&k| least.is_some_and(|least| unused[k] >= least) && gpus[k].model == gpus[g].model)
            .collect();
        order.sort_by_key(|&k| !touched[k]);
        let targets = match spread {
            true => placements_across(gpus, g, &order),
            false => placements_within_one(gpus, g, &order),
        };
        match targets {
            Some(targets) => {
                let new = gpus.remove(g);
                for (slot, (target, start)) in new.slots.into_iter().zip(targets) {
                    touched[target] = true;
                    unused[target] -= u32::from(slot.placement.profile.compute_slices);
                    gpus[target].slots.push(Slot { placement: Placement { start, ..slot.placement }, ..slot });
                }
            }
            None => g += 1,
        }
    }
}

/// Where each instance of `gpus[new]` fits on one GPU of `order`, if any.
fn placements_within_one(gpus: &[WorkGpu], new: usize, order: &[usize]) -> Option<Vec<(usize, u8)>> {
    let needed_gpcs = gpus[new].used_gpcs();
    order.iter().filter(|&&k| gpus[k].has_room_for(needed_gpcs)).find_map(|&k| {
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
        let size = u32::from(slot.placement.profile.compute_slices);
        let (k, start) = order.iter().find_map(|&k| {
            let trial = trials.get(&k).unwrap_or(&gpus[k]);
            let start = trial.has_room_for(size).then(|| free_start(trial, slot.placement.profile)).flatten();
            start.map(|start| (k, start))
        })?;
        let trial = trials.entry(k).or_insert_with(|| gpus[k].clone());
        trial.slots.push(Slot { placement: Placement { start, ..slot.placement }, ..*slot });
        targets.push((k, start));
    }
    Some(targets)
}
