//! Test fixtures of the replan: services over the built-in models and
//! their planning problem.

use tessera_core::rng::SplitMix64;
use tessera_core::{GpuModel, ProfileCatalog, ServiceSlo};

use crate::latency::LatencyRule;
use crate::problem::Problem;

/// `count` services over the built-in models, rates spread by `seed`.
pub(super) fn services(count: usize, seed: u64) -> Vec<ServiceSlo> {
    let base = tessera_core::synthetic::demo_services();
    let mut rng = SplitMix64::new(seed);
    (0..count)
        .map(|i| {
            let slo = &base[i % base.len()];
            ServiceSlo::new(
                format!("s{i:03}"),
                slo.model.clone(),
                slo.rate_rps * rng.uniform(0.2, 3.0),
                slo.latency_slo_ms,
            )
            .unwrap()
        })
        .collect()
}

pub(super) fn request<'a>(catalog: &'a ProfileCatalog, services: &'a [ServiceSlo]) -> Problem<'a> {
    Problem { rule: LatencyRule::Parva, ..Problem::parva(GpuModel::A100_80GB, catalog, services) }
}
