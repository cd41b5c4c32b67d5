//! Spreading a plan's services over GPUs, so that losing one GPU never takes
//! every segment of a service with several.
//!
//! Segments trade places between MIG instances of the same profile on GPUs
//! of the same model: every layout stays as it is and every service keeps
//! exactly its segments, so the plan still meets what it met and uses as
//! many GPUs. A service whose segments all sit on one GPU gives one of them
//! to another GPU's same-profile instance, whose service takes the place in
//! return — only where that service does not end up on one GPU itself.

use std::collections::{BTreeMap, BTreeSet};

use tessera_core::{InstanceAssignment, Plan};

/// (GPU position in `plan.gpus`, instance position on it).
type Slot = (usize, usize);

/// Where each service's segments run: GPU position → segments there. Kept
/// up to date through the trades, so nothing rescans the plan.
struct Placement {
    gpus_of: BTreeMap<String, BTreeMap<usize, usize>>,
}

impl Placement {
    fn of(plan: &Plan) -> Placement {
        let mut gpus_of: BTreeMap<String, BTreeMap<usize, usize>> = BTreeMap::new();
        for (g, gpu) in plan.gpus.iter().enumerate() {
            for instance in &gpu.instances {
                *gpus_of.entry(instance.service.clone()).or_default().entry(g).or_default() += 1;
            }
        }
        Placement { gpus_of }
    }

    /// `service`'s only GPU, when it has several segments all on one GPU.
    fn concentrated_on(&self, service: &str) -> Option<usize> {
        let gpus = &self.gpus_of[service];
        match gpus.iter().next() {
            Some((&g, &segments)) if gpus.len() == 1 && segments > 1 => Some(g),
            _ => None,
        }
    }

    /// Whether `service`, moving one segment from GPU `from` to GPU `to`,
    /// still runs on several GPUs (or has a single segment).
    fn stays_spread(&self, service: &str, from: usize, to: usize) -> bool {
        let gpus = &self.gpus_of[service];
        if gpus.values().sum::<usize>() < 2 {
            return true;
        }
        let mut after: BTreeSet<usize> = gpus.keys().copied().collect();
        if gpus[&from] == 1 {
            after.remove(&from);
        }
        after.insert(to);
        after.len() > 1
    }

    /// Moves one of `service`'s segments from GPU `from` to GPU `to`.
    fn move_segment(&mut self, service: &str, from: usize, to: usize) {
        let gpus = self.gpus_of.entry(service.to_string()).or_default();
        if let Some(left) = gpus.get_mut(&from) {
            *left -= 1;
            if *left == 0 {
                gpus.remove(&from);
            }
        }
        *gpus.entry(to).or_default() += 1;
    }
}

/// `place`'s MIG instance (profile, size, start) running `from`'s segment
/// (service, model, batch, processes and their figures).
fn with_segment_of(place: &InstanceAssignment, from: &InstanceAssignment) -> InstanceAssignment {
    InstanceAssignment { profile: place.profile.clone(), size: place.size, start: place.start, ..from.clone() }
}

/// Swaps the segments of two instances of the same profile.
fn trade(plan: &mut Plan, placement: &mut Placement, (ga, ia): Slot, (gb, ib): Slot) {
    let a = plan.gpus[ga].instances[ia].clone();
    let b = plan.gpus[gb].instances[ib].clone();
    placement.move_segment(&a.service, ga, gb);
    placement.move_segment(&b.service, gb, ga);
    plan.gpus[ga].instances[ia] = with_segment_of(&a, &b);
    plan.gpus[gb].instances[ib] = with_segment_of(&b, &a);
}

/// A trade that puts one of `service`'s segments (all on GPU `home`) on
/// another GPU without leaving the other service on one GPU.
fn find_trade(plan: &Plan, placement: &Placement, service: &str, home: usize) -> Option<(Slot, Slot)> {
    let home_gpu = &plan.gpus[home];
    for (i, mine) in home_gpu.instances.iter().enumerate().filter(|(_, inst)| inst.service == service) {
        for (g, gpu) in plan.gpus.iter().enumerate() {
            if g == home || gpu.gpu_model != home_gpu.gpu_model {
                continue;
            }
            let partner = gpu.instances.iter().position(|theirs| {
                theirs.profile == mine.profile
                    && theirs.service != service
                    && placement.stays_spread(&theirs.service, g, home)
            });
            if let Some(j) = partner {
                return Some(((home, i), (g, j)));
            }
        }
    }
    None
}

/// Trades segments until every service with several segments runs on at
/// least two GPUs; returns the services for which no trade exists (no other
/// GPU of the model has an instance of a profile they run).
pub fn spread_segments(plan: &mut Plan) -> Vec<String> {
    let mut placement = Placement::of(plan);
    let services: Vec<String> = placement.gpus_of.keys().cloned().collect();
    let mut unspread = Vec::new();
    for service in services {
        // Checked as it comes: an earlier trade may have spread it (a trade
        // never concentrates a service).
        let Some(home) = placement.concentrated_on(&service) else { continue };
        match find_trade(plan, &placement, &service, home) {
            Some((mine, theirs)) => trade(plan, &mut placement, mine, theirs),
            None => unspread.push(service),
        }
    }
    unspread
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::{GpuAssignment, GpuModel};

    fn instance(service: &str, start: u8) -> InstanceAssignment {
        InstanceAssignment {
            profile: "1g.10gb".to_string(),
            size: 1,
            start,
            service: service.to_string(),
            model: format!("{service}-model"),
            batch: 4,
            procs: 2,
            throughput_rps: 10.0,
            latency_ms: 5.0,
            capacity_rps: None,
        }
    }

    fn plan_of(gpus: &[&[&str]]) -> Plan {
        let gpus: Vec<GpuAssignment> = gpus
            .iter()
            .enumerate()
            .map(|(index, services)| GpuAssignment {
                node: 0,
                index: index as u32,
                gpu_model: GpuModel::A100_80GB,
                instances: services.iter().enumerate().map(|(k, s)| instance(s, k as u8)).collect(),
                shared: Vec::new(),
            })
            .collect();
        Plan::from_gpus(gpus, "optimal", "queueing", 8)
    }

    /// The services with several segments on one GPU.
    fn concentrated(plan: &Plan) -> Vec<String> {
        let placement = Placement::of(plan);
        placement.gpus_of.keys().filter(|s| placement.concentrated_on(s).is_some()).cloned().collect()
    }

    fn layouts(plan: &Plan) -> Vec<Vec<(String, u8)>> {
        plan.gpus.iter().map(|g| g.instances.iter().map(|i| (i.profile.clone(), i.start)).collect()).collect()
    }

    fn segments(plan: &Plan) -> BTreeMap<String, usize> {
        let mut count = BTreeMap::new();
        for i in plan.gpus.iter().flat_map(|g| &g.instances) {
            *count.entry(i.service.clone()).or_default() += 1;
        }
        count
    }

    #[test]
    fn concentrated_services_trade_segments_and_layouts_stay() {
        let mut plan = plan_of(&[&["a", "a", "a"], &["b", "b", "c"]]);
        let before = (layouts(&plan), segments(&plan));
        assert_eq!(concentrated(&plan), ["a", "b"]);
        assert!(spread_segments(&mut plan).is_empty());
        assert!(concentrated(&plan).is_empty(), "{:?}", plan.gpus);
        assert_eq!((layouts(&plan), segments(&plan)), before);
        // A segment moves whole: its model travels with its service.
        assert!(plan.gpus.iter().flat_map(|g| &g.instances).all(|i| i.model == format!("{}-model", i.service)));
    }

    #[test]
    fn a_trade_never_concentrates_the_other_service() {
        // b's segments are on GPU 1 and on GPU 0: taking b's GPU-1 segment
        // to GPU 0 would leave b on GPU 0 alone, so a trades with c.
        let mut plan = plan_of(&[&["a", "a", "b"], &["b", "c"]]);
        assert!(spread_segments(&mut plan).is_empty());
        assert!(concentrated(&plan).is_empty(), "{:?}", plan.gpus);
    }

    #[test]
    fn a_service_alone_on_the_only_gpu_of_its_profile_is_named() {
        let mut plan = plan_of(&[&["a", "a"]]);
        assert_eq!(spread_segments(&mut plan), ["a"]);
        let mut other_model = plan_of(&[&["a", "a"], &["b"]]);
        other_model.gpus[1].gpu_model = GpuModel::H100_80GB;
        assert_eq!(spread_segments(&mut other_model), ["a"], "no trade across GPU models");
    }
}
