//! Helpers shared by the planner's integration tests.

use tessera_core::rng::SplitMix64;
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

/// A random SLO mix over `models`: `count` services named `s0`, `s1`, …,
/// each a model drawn from `models`, a rate drawn in `rates_rps` and a
/// latency SLO in 60–1,500 ms.
pub fn random_mix(rng: &mut SplitMix64, models: &[String], count: usize, rates_rps: (f64, f64)) -> Vec<ServiceSlo> {
    (0..count)
        .map(|i| {
            let model = &models[rng.below(models.len())];
            let rate_rps = rng.uniform(rates_rps.0, rates_rps.1);
            let latency_ms = rng.uniform(60.0, 1500.0);
            ServiceSlo::new(format!("s{i}"), model.clone(), rate_rps, latency_ms).unwrap()
        })
        .collect()
}
