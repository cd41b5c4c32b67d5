//! Segments moved within the kept layouts: over-provisioned services give
//! up segments, services short of their rate take free instances and
//! instances others can spare, and free instances left over go to a
//! service that can run them.

use tessera_core::{GpuModel, ProfilePoint};

use super::candidates::Candidates;
use super::work::{Ledger, WorkGpu};
use crate::allocate::Segment;
use crate::problem::Problem;

/// Under a rule that limits over-provisioning, frees segments of services
/// provisioned beyond what their configurations allow, smallest first,
/// while the service stays covered.
pub(super) fn release_over_provisioned(request: &Problem<'_>, gpus: &mut [WorkGpu], candidates: &mut Candidates<'_>) {
    let mut ledger = Ledger::of(request.services, gpus);
    let mut slots: Vec<(usize, usize)> =
        gpus.iter().enumerate().flat_map(|(g, gpu)| (0..gpu.slots.len()).map(move |s| (g, s))).collect();
    slots.sort_by(|&(ga, sa), &(gb, sb)| {
        let tp = |g: usize, s: usize| gpus[g].slots[s].segment.map_or(0.0, |seg| seg.point.throughput_rps);
        tp(ga, sa).total_cmp(&tp(gb, sb))
    });
    let mut tightest: Vec<f64> = vec![f64::INFINITY; request.services.len()];
    for gpu in gpus.iter() {
        for segment in gpu.slots.iter().filter_map(|s| s.segment) {
            let cap = candidates.cap(gpu.model, segment.service, &segment.point);
            tightest[segment.service] = tightest[segment.service].min(cap);
        }
    }
    for (g, s) in slots {
        let Some(segment) = gpus[g].slots[s].segment else { continue };
        let service = segment.service;
        if ledger.ratio_with(service, 0.0) > tightest[service]
            && ledger.can_spare(service, segment.point.throughput_rps)
        {
            gpus[g].slots[s].segment = None;
            ledger.provisioned_rps[service] -= segment.point.throughput_rps;
        }
    }
}

/// How good an instance is for a service short of its rate, smaller first:
/// whether it leaves the service short, its size (smallest when it covers,
/// largest when not), whether another service gives it up, its throughput.
type PickKey = (bool, u8, bool, f64);

/// Covers deficits in the kept layouts: free instances first, then
/// instances other services can spare (see the module documentation).
pub(super) fn fill_deficits(request: &Problem<'_>, gpus: &mut [WorkGpu], candidates: &mut Candidates<'_>) {
    let mut ledger = Ledger::of(request.services, gpus);
    let mut short: Vec<usize> = (0..request.services.len()).filter(|&s| ledger.deficit(s) > 0.0).collect();
    short.sort_by(|&a, &b| ledger.deficit(b).total_cmp(&ledger.deficit(a)).then(a.cmp(&b)));
    for service in short {
        while ledger.deficit(service) > 0.0 {
            let deficit = ledger.deficit(service);
            // (short, size, taken from a service, throughput): smaller is better.
            let mut best: Option<(PickKey, usize, usize, ProfilePoint)> = None;
            // The ledger holds still while the GPUs are scanned: the best
            // configuration of each instance size is looked up once.
            let mut best_of_size: Vec<((GpuModel, u8), Option<ProfilePoint>)> = Vec::new();
            for (g, gpu) in gpus.iter().enumerate() {
                for (s, slot) in gpu.slots.iter().enumerate() {
                    let taken = match slot.segment {
                        None => false,
                        Some(other)
                            if other.service != service
                                && ledger.can_spare(other.service, other.point.throughput_rps) =>
                        {
                            true
                        }
                        Some(_) => continue,
                    };
                    let size = slot.placement.profile.compute_slices;
                    let known = best_of_size.iter().find(|(of, _)| *of == (gpu.model, size)).map(|(_, point)| *point);
                    let point = known.unwrap_or_else(|| {
                        let point = candidates.best(gpu.model, service, size, |tp| ledger.ratio_with(service, tp));
                        best_of_size.push(((gpu.model, size), point));
                        point
                    });
                    let Some(point) = point else {
                        continue;
                    };
                    let covering = point.throughput_rps >= deficit;
                    // Covering candidates: the smallest; others: the most throughput.
                    let key = if covering {
                        (false, size, taken, point.throughput_rps)
                    } else {
                        (true, u8::MAX - size, taken, -point.throughput_rps)
                    };
                    if best.as_ref().is_none_or(|(k, ..)| key.partial_cmp(k) == Some(std::cmp::Ordering::Less)) {
                        best = Some((key, g, s, point));
                    }
                }
            }
            let Some((_, g, s, point)) = best else { break };
            if let Some(other) = gpus[g].slots[s].segment {
                ledger.provisioned_rps[other.service] -= other.point.throughput_rps;
            }
            gpus[g].slots[s].segment = Some(Segment { service, point });
            ledger.provisioned_rps[service] += point.throughput_rps;
        }
    }
}

/// Gives each free instance of a GPU that still runs something to the
/// service that can run it with the least over-provisioning (its layout
/// then stays); an instance nobody can run is destroyed.
pub(super) fn assign_leftovers(request: &Problem<'_>, gpus: &mut [WorkGpu], candidates: &mut Candidates<'_>) {
    let mut ledger = Ledger::of(request.services, gpus);
    for gpu in gpus.iter_mut() {
        if gpu.slots.iter().all(|s| s.segment.is_none()) {
            continue;
        }
        let model = gpu.model;
        let mut s = 0;
        while s < gpu.slots.len() {
            if gpu.slots[s].segment.is_some() {
                s += 1;
                continue;
            }
            let size = gpu.slots[s].placement.profile.compute_slices;
            let mut services: Vec<usize> =
                gpu.slots.iter().filter_map(|slot| slot.segment.map(|x| x.service)).collect();
            services.sort_by(|&a, &b| ledger.ratio_with(a, 0.0).total_cmp(&ledger.ratio_with(b, 0.0)).then(a.cmp(&b)));
            services.dedup();
            let chosen = services.iter().find_map(|&service| {
                candidates.best(model, service, size, |tp| ledger.ratio_with(service, tp)).map(|p| (service, p))
            });
            match chosen {
                Some((service, point)) => {
                    gpu.slots[s].segment = Some(Segment { service, point });
                    ledger.provisioned_rps[service] += point.throughput_rps;
                    s += 1;
                }
                None => {
                    gpu.slots.remove(s);
                }
            }
        }
    }
}
