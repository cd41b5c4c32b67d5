//! Segments moved within the kept layouts: over-provisioned services give
//! up segments, services short of their rate take free instances and
//! instances others can spare, and free instances left over go to a
//! service that can run them.

use std::cmp::Ordering;
use std::collections::{BTreeSet, VecDeque};

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

/// A slot's position: its GPU's index, then its own among the GPU's.
type SlotAt = (usize, usize);

/// The kept instances of one GPU model and size. Every instance of a
/// class is alike to a service short of its rate: the same best
/// configuration, so the same [`PickKey`] but for whether another service
/// gives it up.
struct SlotClass {
    model: GpuModel,
    size: u8,
    /// Its free instances, in scan order (by GPU, then slot): a free
    /// instance is only ever taken first in its class, and never freed
    /// again while deficits are filled.
    free: VecDeque<SlotAt>,
    /// Its instances whose services can spare them, in scan order.
    spare: BTreeSet<SlotAt>,
}

/// The kept instances by class, kept up to date as segments move: which
/// are free and which their services can spare.
struct Instances {
    /// In the order the classes first appear.
    classes: Vec<SlotClass>,
    /// Each slot's class, by GPU and slot.
    class_of: Vec<Vec<usize>>,
    /// Each service's instances.
    held: Vec<Vec<SlotAt>>,
}

impl Instances {
    fn of(gpus: &[WorkGpu], ledger: &Ledger) -> Instances {
        let mut instances =
            Instances { classes: Vec::new(), class_of: Vec::new(), held: vec![Vec::new(); ledger.rate_rps.len()] };
        for (g, gpu) in gpus.iter().enumerate() {
            let mut classes = Vec::with_capacity(gpu.slots.len());
            for (s, slot) in gpu.slots.iter().enumerate() {
                let size = slot.placement.profile.compute_slices;
                let known = instances.classes.iter().position(|class| class.model == gpu.model && class.size == size);
                let c = known.unwrap_or_else(|| {
                    let class = SlotClass { model: gpu.model, size, free: VecDeque::new(), spare: BTreeSet::new() };
                    instances.classes.push(class);
                    instances.classes.len() - 1
                });
                classes.push(c);
                match slot.segment {
                    None => instances.classes[c].free.push_back((g, s)),
                    Some(segment) => instances.held[segment.service].push((g, s)),
                }
            }
            instances.class_of.push(classes);
        }
        for service in 0..instances.held.len() {
            instances.refresh(service, gpus, ledger);
        }
        instances
    }

    /// Marks which of `service`'s instances it can spare now.
    fn refresh(&mut self, service: usize, gpus: &[WorkGpu], ledger: &Ledger) {
        for &(g, s) in &self.held[service] {
            let spare = &mut self.classes[self.class_of[g][s]].spare;
            match gpus[g].slots[s].segment.is_some_and(|x| ledger.can_spare(service, x.point.throughput_rps)) {
                true => spare.insert((g, s)),
                false => spare.remove(&(g, s)),
            };
        }
    }

    /// The first instance of class `c` that `service` may take: free, or
    /// (`taken`) one another service can spare.
    fn first(&self, c: usize, taken: bool, service: usize, gpus: &[WorkGpu]) -> Option<SlotAt> {
        let class = &self.classes[c];
        match taken {
            false => class.free.front().copied(),
            true => {
                let others = |&&(g, s): &&SlotAt| gpus[g].slots[s].segment.is_some_and(|x| x.service != service);
                class.spare.iter().find(others).copied()
            }
        }
    }

    /// Notes that the instance at `at` now runs `service`, and that the
    /// service it was taken from, if any, holds it no more.
    fn give(&mut self, (g, s): SlotAt, from: Option<usize>, service: usize, gpus: &[WorkGpu], ledger: &Ledger) {
        let class = &mut self.classes[self.class_of[g][s]];
        match from {
            None => {
                class.free.pop_front();
            }
            Some(from) => {
                class.spare.remove(&(g, s));
                self.held[from].retain(|&at| at != (g, s));
                self.refresh(from, gpus, ledger);
            }
        }
        self.held[service].push((g, s));
        self.refresh(service, gpus, ledger);
    }
}

/// Covers deficits in the kept layouts: free instances first, then
/// instances other services can spare (see the module documentation).
///
/// Each step takes the instance with the smallest [`PickKey`], the first
/// by position among equals. Instances of one class share their key but
/// for `taken`, so a step weighs each class's best configuration once and
/// looks for an instance only in the classes whose key is smallest: the
/// first that is free, or that another service can spare.
pub(super) fn fill_deficits(request: &Problem<'_>, gpus: &mut [WorkGpu], candidates: &mut Candidates<'_>) {
    let mut ledger = Ledger::of(request.services, gpus);
    let mut instances = Instances::of(gpus, &ledger);
    let mut short: Vec<usize> = (0..request.services.len()).filter(|&s| ledger.deficit(s) > 0.0).collect();
    short.sort_by(|&a, &b| ledger.deficit(b).total_cmp(&ledger.deficit(a)).then(a.cmp(&b)));
    for service in short {
        while ledger.deficit(service) > 0.0 {
            let deficit = ledger.deficit(service);
            // (key, class, taken from a service, configuration), best first.
            let mut options: Vec<(PickKey, usize, bool, ProfilePoint)> = Vec::new();
            for (c, class) in instances.classes.iter().enumerate() {
                let best = candidates.best(class.model, service, class.size, |tp| ledger.ratio_with(service, tp));
                let Some(point) = best else { continue };
                let covering = point.throughput_rps >= deficit;
                for taken in [false, true] {
                    // Covering candidates: the smallest; others: the most throughput.
                    let key = match covering {
                        true => (false, class.size, taken, point.throughput_rps),
                        false => (true, u8::MAX - class.size, taken, -point.throughput_rps),
                    };
                    options.push((key, c, taken, point));
                }
            }
            options.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(Ordering::Equal));
            // The first instance by position among the options of the
            // smallest key that has one.
            let picked = options.chunk_by(|a, b| a.0.partial_cmp(&b.0) == Some(Ordering::Equal)).find_map(|group| {
                group
                    .iter()
                    .filter_map(|&(_, c, taken, point)| Some((instances.first(c, taken, service, gpus)?, point)))
                    .min_by_key(|&(at, _)| at)
            });
            let Some(((g, s), point)) = picked else { break };
            let from = gpus[g].slots[s].segment.map(|other| other.service);
            if let Some(other) = gpus[g].slots[s].segment {
                ledger.provisioned_rps[other.service] -= other.point.throughput_rps;
            }
            gpus[g].slots[s].segment = Some(Segment { service, point });
            ledger.provisioned_rps[service] += point.throughput_rps;
            instances.give((g, s), from, service, gpus, &ledger);
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
