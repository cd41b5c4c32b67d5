//! The `parva` strategy: ParvaGPU's configurator and allocator, made
//! physically valid (explicit MIG starts on the real lattice), unbounded in
//! GPUs, and never dropping a segment.

use tessera_core::slo::find_duplicate_service;
use tessera_core::{
    GpuAssignment, GpuModel, InstanceAssignment, Lattice, ModelProfile, Plan, ProfileCatalog, ServiceSlo, SizeCounts,
};

use crate::allocate::{dissolve_small_gpus, place_largest_first, Fleet, Segment, SmallPieces};
use crate::configure::{configure, SegmentChoice};
use crate::error::PlanError;
use crate::latency::LatencyRule;
use crate::report::service_reports;

/// GPUs using at most this many compute slices are dissolved (ParvaGPU: 4).
pub const DISSOLVE_MAX_USED_GPCS: u32 = 4;

/// ParvaGPU places at most one 3g instance per GPU.
pub const MAX_3G_PER_GPU: u32 = 1;

/// Everything a planner needs.
#[derive(Debug, Clone, Copy)]
pub struct PlanRequest<'a> {
    /// GPU model of the fleet.
    pub gpu: GpuModel,
    /// Profiles; those of `gpu` are used.
    pub catalog: &'a ProfileCatalog,
    /// The services to serve.
    pub services: &'a [ServiceSlo],
    /// The latency rule.
    pub rule: LatencyRule,
    /// Most MPS processes per segment.
    pub max_procs: u32,
    /// GPUs per node, for numbering nodes.
    pub gpus_per_node: u32,
    /// How long a search may run before returning its best plan (the
    /// `optimal` strategy); `None` for no limit.
    pub time_limit: Option<std::time::Duration>,
}

/// ParvaGPU's default for the most MPS processes per segment.
pub const DEFAULT_MAX_PROCS: u32 = 5;

/// ParvaGPU's default number of GPUs per node.
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;

impl<'a> PlanRequest<'a> {
    /// A request with ParvaGPU's defaults: the `parva` latency rule, at
    /// most [`DEFAULT_MAX_PROCS`] processes, [`DEFAULT_GPUS_PER_NODE`] GPUs
    /// per node, and no time limit.
    pub fn new(gpu: GpuModel, catalog: &'a ProfileCatalog, services: &'a [ServiceSlo]) -> Self {
        PlanRequest {
            gpu,
            catalog,
            services,
            rule: LatencyRule::Parva,
            max_procs: DEFAULT_MAX_PROCS,
            gpus_per_node: DEFAULT_GPUS_PER_NODE,
            time_limit: None,
        }
    }
}

/// Plans `request` with the `parva` strategy.
pub fn plan_parva(request: &PlanRequest<'_>) -> Result<Plan, PlanError> {
    let choices = configure_all(request)?;
    let lattice = Lattice::new(request.gpu);
    let mut fleet = Fleet::new(&lattice).with_size_cap(3, MAX_3G_PER_GPU);
    let segments: Vec<Segment> = choices
        .iter()
        .enumerate()
        .flat_map(|(service, choice)| choice.segments().map(move |point| Segment { service, point }))
        .collect();
    place_largest_first(&mut fleet, &segments);
    let pieces: Vec<SmallPieces> = choices
        .iter()
        .map(|choice| SmallPieces {
            one: choice.best_by_size.get(&1).copied(),
            two: choice.best_by_size.get(&2).copied(),
        })
        .collect();
    dissolve_small_gpus(&mut fleet, &pieces, DISSOLVE_MAX_USED_GPCS);
    Ok(build_plan(request, &lattice, fleet.into_gpus(), "parva"))
}

/// Validates the request and runs the configurator for every service.
fn configure_all(request: &PlanRequest<'_>) -> Result<Vec<SegmentChoice>, PlanError> {
    if request.rule != LatencyRule::Parva {
        return Err(PlanError::UnsupportedRule {
            strategy: "parva",
            supported: LatencyRule::Parva.name(),
            asked: request.rule.name(),
        });
    }
    request.check()?;
    request.services.iter().map(|slo| configure(request.profile(slo)?, slo, request.rule, request.max_procs)).collect()
}

impl PlanRequest<'_> {
    /// Checks what every strategy needs: services, unique names, processes.
    pub(crate) fn check(&self) -> Result<(), PlanError> {
        if self.services.is_empty() {
            return Err(PlanError::NoServices);
        }
        if self.max_procs == 0 {
            return Err(PlanError::NoProcesses);
        }
        if let Some(name) = find_duplicate_service(self.services) {
            return Err(PlanError::DuplicateService(name.to_string()));
        }
        Ok(())
    }

    /// The profile of a service's model on the request's GPU model.
    pub(crate) fn profile(&self, slo: &ServiceSlo) -> Result<&ModelProfile, PlanError> {
        self.catalog.get(self.gpu, &slo.model).ok_or_else(|| PlanError::NoProfile {
            service: slo.service.clone(),
            model: slo.model.clone(),
            gpu: self.gpu.to_string(),
            known: known_models(self.catalog, self.gpu),
        })
    }
}

fn known_models(catalog: &ProfileCatalog, gpu: GpuModel) -> String {
    let models: Vec<&str> = catalog.models(gpu).collect();
    if models.is_empty() {
        "none".to_string()
    } else {
        models.join(", ")
    }
}

/// Turns per-GPU segment lists into a plan with explicit MIG placements.
pub(crate) fn build_plan(
    request: &PlanRequest<'_>,
    lattice: &Lattice,
    gpus: Vec<Vec<Segment>>,
    strategy: &str,
) -> Plan {
    let spec = request.gpu.spec();
    let gpus_per_node = request.gpus_per_node.max(1);
    let assignments: Vec<GpuAssignment> = gpus
        .into_iter()
        .enumerate()
        .map(|(global, mut segments)| {
            let counts = SizeCounts::from_sizes(segments.iter().map(|s| s.point.config.size_gpcs));
            let placements = lattice.realize(&counts).expect("the allocator only builds realizable GPUs");
            segments.sort_by_key(|s| std::cmp::Reverse(s.point.config.size_gpcs));
            let instances = placements
                .iter()
                .zip(&segments)
                .map(|(placement, segment)| {
                    let slo = &request.services[segment.service];
                    debug_assert_eq!(placement.profile.compute_slices, segment.point.config.size_gpcs);
                    InstanceAssignment {
                        profile: placement.profile.name.to_string(),
                        size: placement.profile.compute_slices,
                        start: placement.start,
                        service: slo.service.clone(),
                        model: slo.model.clone(),
                        batch: segment.point.config.batch,
                        procs: segment.point.config.procs,
                        throughput_rps: segment.point.throughput_rps,
                        latency_ms: segment.point.latency_ms,
                    }
                })
                .collect();
            let global = global as u32;
            GpuAssignment {
                node: global / gpus_per_node,
                index: global % gpus_per_node,
                gpu_model: request.gpu,
                instances,
            }
        })
        .collect();
    debug_assert!(assignments.iter().all(|gpu| gpu.instances.len() <= usize::from(spec.compute_slices)));
    let services = service_reports(assignments.iter().flat_map(|gpu| &gpu.instances), request.services, request.rule);
    Plan {
        gpu_count: assignments.len(),
        strategy: strategy.to_string(),
        latency_rule: request.rule.name().to_string(),
        gpus_per_node,
        gpus: assignments,
        services,
        optimality: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::synthetic::{builtin_catalog, demo_services};

    fn request<'a>(catalog: &'a ProfileCatalog, services: &'a [ServiceSlo]) -> PlanRequest<'a> {
        PlanRequest::new(GpuModel::A100_80GB, catalog, services)
    }

    #[test]
    fn demo_plan_meets_every_service() {
        let catalog = builtin_catalog();
        let services = demo_services();
        let plan = plan_parva(&request(&catalog, &services)).unwrap();
        assert!(plan.gpu_count >= 1);
        assert!(plan.services.iter().all(|s| s.met), "{:#?}", plan.services);
        assert!(plan.services.iter().all(|s| s.segments > 0));
    }

    #[test]
    fn unknown_model_and_duplicates_are_errors() {
        let catalog = builtin_catalog();
        let mut services = vec![ServiceSlo::new("x", "alexnet", 10.0, 100.0).unwrap()];
        let error = plan_parva(&request(&catalog, &services)).unwrap_err().to_string();
        assert!(error.contains("alexnet") && error.contains("bert-base"), "{error}");
        services = vec![ServiceSlo::new("x", "gpt2", 10.0, 500.0).unwrap(); 2];
        assert_eq!(plan_parva(&request(&catalog, &services)).unwrap_err(), PlanError::DuplicateService("x".into()));
        assert_eq!(plan_parva(&request(&catalog, &[])).unwrap_err(), PlanError::NoServices);
    }
}
