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

/// The GPUs each service's segments run on.
fn gpus_by_service(plan: &Plan) -> BTreeMap<&str, BTreeSet<usize>> {
    let mut gpus: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for (g, gpu) in plan.gpus.iter().enumerate() {
        for instance in &gpu.instances {
            gpus.entry(instance.service.as_str()).or_default().insert(g);
        }
    }
    gpus
}

/// How many segments `service` has.
fn segments_of(plan: &Plan, service: &str) -> usize {
    plan.gpus.iter().flat_map(|gpu| &gpu.instances).filter(|instance| instance.service == service).count()
}

/// The services with several segments that all run on one GPU.
fn concentrated(plan: &Plan) -> Vec<String> {
    gpus_by_service(plan)
        .into_iter()
        .filter(|(service, gpus)| gpus.len() == 1 && segments_of(plan, service) > 1)
        .map(|(service, _)| service.to_string())
        .collect()
}

/// `place`'s MIG instance (profile, size, start) running `from`'s segment
/// (service, model, batch, processes and their figures).
fn with_segment_of(place: &InstanceAssignment, from: &InstanceAssignment) -> InstanceAssignment {
    InstanceAssignment { profile: place.profile.clone(), size: place.size, start: place.start, ..from.clone() }
}

/// Swaps the segments of two instances of the same profile.
fn trade(plan: &mut Plan, (ga, ia): Slot, (gb, ib): Slot) {
    let a = plan.gpus[ga].instances[ia].clone();
    let b = plan.gpus[gb].instances[ib].clone();
    plan.gpus[ga].instances[ia] = with_segment_of(&a, &b);
    plan.gpus[gb].instances[ib] = with_segment_of(&b, &a);
}

/// A trade that puts one of `service`'s segments (all on GPU `home`) on
/// another GPU without leaving the other service on one GPU.
fn find_trade(plan: &Plan, service: &str, home: usize) -> Option<(Slot, Slot)> {
    let home_gpu = &plan.gpus[home];
    let spread = gpus_by_service(plan);
    for (i, mine) in home_gpu.instances.iter().enumerate().filter(|(_, inst)| inst.service == service) {
        for (g, gpu) in plan.gpus.iter().enumerate() {
            if g == home || gpu.gpu_model != home_gpu.gpu_model {
                continue;
            }
            for (j, theirs) in gpu.instances.iter().enumerate() {
                if theirs.profile != mine.profile || theirs.service == service {
                    continue;
                }
                // The other service leaves GPU `g` if this was its only
                // segment there, and gains GPU `home`.
                let mut after = spread[theirs.service.as_str()].clone();
                if gpu.instances.iter().filter(|x| x.service == theirs.service).count() == 1 {
                    after.remove(&g);
                }
                after.insert(home);
                if after.len() > 1 || segments_of(plan, &theirs.service) < 2 {
                    return Some(((home, i), (g, j)));
                }
            }
        }
    }
    None
}

/// Trades segments until every service with several segments runs on at
/// least two GPUs; returns the services for which no trade exists (no other
/// GPU of the model has an instance of a profile they run).
pub fn spread_segments(plan: &mut Plan) -> Vec<String> {
    let mut unspread = Vec::new();
    for service in concentrated(plan) {
        // An earlier trade may have spread it already.
        if !concentrated(plan).contains(&service) {
            continue;
        }
        let home = plan.gpus.iter().position(|gpu| gpu.instances.iter().any(|i| i.service == service));
        match home.and_then(|home| find_trade(plan, &service, home)) {
            Some((mine, theirs)) => trade(plan, mine, theirs),
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
            })
            .collect();
        Plan {
            gpu_count: gpus.len(),
            total_cost: gpus.len() as f64,
            strategy: "optimal".to_string(),
            latency_rule: "queueing".to_string(),
            gpus_per_node: 8,
            fleet: Vec::new(),
            gpus,
            services: Vec::new(),
            optimality: None,
            notes: Vec::new(),
            node_names: Vec::new(),
            images: BTreeMap::new(),
        }
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
