//! Helpers shared by the planner's integration tests.

use tessera_core::{GpuModel, GpuOffer, ProfileCatalog, ServiceSlo};
use tessera_plan::{LatencyRule, PlanInputs, PlanRequest, ProfileOrigin, Strategy};

/// ParvaGPU's measured A100 profiles beside the repository, or `None` (with
/// a line saying the test skips) when they are absent.
pub fn parvagpu_catalog() -> Option<ProfileCatalog> {
    let dir = tessera_testkit::shared_data("parvagpu/prof_data")?;
    Some(tessera_store::read_profile_dir(&dir, GpuModel::A100_80GB).unwrap().catalog())
}

/// `services` over measured profiles `catalog`, for plans on `gpu`.
pub fn measured(services: &[ServiceSlo], catalog: &ProfileCatalog, gpu: GpuModel) -> PlanInputs {
    PlanInputs::new(services.to_vec(), catalog.clone(), ProfileOrigin::Measured, &[gpu]).unwrap()
}

/// A request for `inputs` on one unlimited `gpu` with `strategy` under
/// `rule`, and no time limit.
pub fn request(inputs: &PlanInputs, gpu: GpuModel, strategy: Strategy, rule: LatencyRule) -> PlanRequest<'_> {
    PlanRequest {
        strategy,
        rule: Some(rule),
        fleet: vec![GpuOffer::plain(gpu)],
        time_limit: None,
        ..PlanRequest::new(inputs)
    }
}
