//! What a planner is asked: the fleet, the profiles, the services, the rules.

use std::time::Duration;

use tessera_core::slo::find_duplicate_service;
use tessera_core::{GpuModel, GpuOffer, ModelProfile, ProfileCatalog, ServiceSlo};

use crate::error::PlanError;
use crate::latency::LatencyRule;

/// ParvaGPU's default for the most MPS processes per segment.
pub const DEFAULT_MAX_PROCS: u32 = 5;

/// ParvaGPU's default number of GPUs per node.
pub const DEFAULT_GPUS_PER_NODE: u32 = 8;

/// Everything a planner needs.
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    /// The GPU models the plan may use, with costs and limits.
    pub fleet: Vec<GpuOffer>,
    /// Profiles, per GPU model and model.
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
    pub time_limit: Option<Duration>,
}

impl<'a> PlanRequest<'a> {
    /// A request for one GPU model (unlimited, cost 1) with ParvaGPU's
    /// defaults: the `parva` latency rule, at most [`DEFAULT_MAX_PROCS`]
    /// processes, [`DEFAULT_GPUS_PER_NODE`] GPUs per node, no time limit.
    pub fn new(gpu: GpuModel, catalog: &'a ProfileCatalog, services: &'a [ServiceSlo]) -> Self {
        PlanRequest {
            fleet: vec![GpuOffer::plain(gpu)],
            catalog,
            services,
            rule: LatencyRule::Parva,
            max_procs: DEFAULT_MAX_PROCS,
            gpus_per_node: DEFAULT_GPUS_PER_NODE,
            time_limit: None,
        }
    }

    /// Checks what every strategy needs: services with unique names, a
    /// fleet without repeated models, at least one process.
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
        if self.fleet.is_empty() {
            return Err(PlanError::EmptyFleet);
        }
        let repeated = self.fleet.iter().enumerate().find(|(i, o)| self.fleet[..*i].iter().any(|p| p.model == o.model));
        if let Some((_, offer)) = repeated {
            return Err(PlanError::DuplicateGpu(offer.model.to_string()));
        }
        Ok(())
    }

    /// The profile of a service's model on `gpu`.
    pub(crate) fn profile(&self, slo: &ServiceSlo, gpu: GpuModel) -> Result<&'a ModelProfile, PlanError> {
        self.catalog.get(gpu, &slo.model).ok_or_else(|| PlanError::NoProfile {
            service: slo.service.clone(),
            model: slo.model.clone(),
            gpu: gpu.to_string(),
            known: known_models(self.catalog, gpu),
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
