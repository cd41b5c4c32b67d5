//! Turning per-GPU segment lists into a [`Plan`] with explicit placements.

use tessera_core::{
    FleetUse, GpuAssignment, GpuModel, InstanceAssignment, Lattice, Placement, Plan, SizeCounts, Traffic,
};
use tessera_serving::Discipline;

use crate::allocate::Segment;
use crate::problem::Problem;
use crate::report::service_reports;

/// Builds the plan of `gpus` (each a GPU model and its segments, whose
/// sizes must be realizable on that model). GPUs of one model are numbered
/// together; a new model starts a new node.
pub(crate) fn build_plan(request: &Problem<'_>, gpus: Vec<(GpuModel, Vec<Segment>)>, strategy: &str) -> Plan {
    let gpus_per_node = request.gpus_per_node.max(1);
    let mut lattices: Vec<Lattice> = Vec::new();
    let mut assignments: Vec<GpuAssignment> = Vec::with_capacity(gpus.len());
    let mut slot = 0u32;
    for (model, mut segments) in gpus {
        if assignments.last().is_some_and(|last| last.gpu_model != model) {
            slot = slot.div_ceil(gpus_per_node) * gpus_per_node;
        }
        if !lattices.iter().any(|l| l.model() == model) {
            lattices.push(Lattice::new(model));
        }
        let lattice = lattices.iter().find(|l| l.model() == model).expect("just added");
        let counts = SizeCounts::from_sizes(segments.iter().map(|s| s.point.config.size_gpcs));
        let placements = lattice.realize(&counts).expect("planners only build realizable GPUs");
        segments.sort_by_key(|s| std::cmp::Reverse(s.point.config.size_gpcs));
        let instances = placements
            .iter()
            .zip(&segments)
            .map(|(placement, segment)| instance_at(request, model, placement, segment))
            .collect();
        assignments.push(GpuAssignment {
            node: slot / gpus_per_node,
            index: slot % gpus_per_node,
            gpu_model: model,
            instances,
            shared: Vec::new(),
        });
        slot += 1;
    }
    plan_of(request, assignments, strategy, gpus_per_node)
}

/// The plan of `gpus` (placed and numbered) for `request`: its fleet's use
/// and cost and every service's report.
pub(crate) fn plan_of(request: &Problem<'_>, gpus: Vec<GpuAssignment>, strategy: &str, gpus_per_node: u32) -> Plan {
    let fleet = fleet_use(request, &gpus);
    let services = service_reports(&gpus, request);
    let margin = request.rule.uses_capacity().then_some(request.margin);
    let traffic = request.rule.uses_capacity().then(|| Traffic {
        arrivals: request.arrivals.to_string(),
        discipline: Discipline::RandomPerProcess.name().to_string(),
    });
    Plan {
        total_cost: fleet.iter().map(|f| f.cost_per_gpu * f.gpus as f64).sum(),
        fleet,
        services,
        traffic,
        margin,
        ..Plan::from_gpus(gpus, strategy, request.rule.name(), gpus_per_node)
    }
}

/// The instance that runs `segment` at `placement` on a GPU of
/// `gpu_model`: its profiled numbers, and under a capacity rule the
/// capacity the planners planned it with (the segment's point carries it in
/// place of its throughput, see `judge`).
pub(crate) fn instance_at(
    request: &Problem<'_>,
    gpu_model: GpuModel,
    placement: &Placement,
    segment: &Segment,
) -> InstanceAssignment {
    let slo = &request.services[segment.service];
    debug_assert_eq!(placement.profile.compute_slices, segment.point.config.size_gpcs);
    let (throughput_rps, capacity_rps) = if request.rule.uses_capacity() {
        let profiled = request.catalog.get(gpu_model, &slo.model).and_then(|p| p.point(segment.point.config));
        (profiled.map_or(segment.point.throughput_rps, |p| p.throughput_rps), Some(segment.point.throughput_rps))
    } else {
        (segment.point.throughput_rps, None)
    };
    InstanceAssignment {
        profile: placement.profile.name.to_string(),
        size: placement.profile.compute_slices,
        start: placement.start,
        service: slo.service.clone(),
        model: slo.model.clone(),
        batch: segment.point.config.batch,
        procs: segment.point.config.procs,
        throughput_rps,
        latency_ms: segment.point.latency_ms,
        capacity_rps,
    }
}

/// How many GPUs of each model of the request's fleet `gpus` use.
pub(crate) fn fleet_use(request: &Problem<'_>, gpus: &[GpuAssignment]) -> Vec<FleetUse> {
    request
        .fleet
        .iter()
        .map(|offer| FleetUse {
            gpu_model: offer.model,
            cost_per_gpu: offer.cost,
            limit: offer.limit,
            gpus: gpus.iter().filter(|g| g.gpu_model == offer.model).count() as u64,
        })
        .collect()
}
