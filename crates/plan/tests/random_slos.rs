//! Property tests on random SLO sets drawn over the built-in synthetic
//! profiles and (when present) ParvaGPU's measured profiles: every plan
//! either strategy writes passes the independent verifier, and the
//! `optimal` strategy never uses more GPUs than `parva`.

use std::time::Duration;
use tessera_core::rng::SplitMix64;
use tessera_core::synthetic::builtin_catalog;
use tessera_core::{GpuModel, ProfileCatalog, ServiceSlo};
use tessera_serving::ArrivalModel;

use tessera_core::Plan;
use tessera_plan::{plan, verify, LatencyRule, PlanError, PlanRequest, Strategy, VerifyRequest};

use crate::common::{measured, request};

/// Plans `cases` random SLO sets on `gpu`; returns how many were plannable.
fn check_random_plans(catalog: &ProfileCatalog, gpu: GpuModel, cases: usize, seed: u64) -> usize {
    let models: Vec<&str> = catalog.models(gpu).collect();
    let mut rng = SplitMix64::new(seed);
    let mut planned = 0;
    for case in 0..cases {
        let count = 1 + rng.below(14);
        let services: Vec<ServiceSlo> = (0..count)
            .map(|i| {
                let model = models[rng.below(models.len())];
                let rate_rps = rng.uniform(0.5, 4000.0);
                let latency_ms = rng.uniform(10.0, 3000.0);
                ServiceSlo::new(format!("svc{i}"), model, rate_rps, latency_ms).unwrap()
            })
            .collect();
        let max_procs = 1 + rng.below(5) as u32;
        let inputs = measured(&services, catalog, gpu);
        let parva_request = PlanRequest {
            max_procs,
            time_limit: Some(Duration::from_secs(5)),
            ..request(&inputs, gpu, Strategy::Parva, LatencyRule::Parva)
        };
        let optimal_request = PlanRequest { strategy: Strategy::Optimal, ..parva_request.clone() };
        let check = |plan: &Plan, rule| {
            let violations = verify(
                plan,
                &VerifyRequest {
                    catalog,
                    services: &services,
                    rule,
                    arrivals: &ArrivalModel::Poisson,
                    max_procs,
                    margin: 0.0,
                },
            );
            assert!(violations.is_empty(), "case {case} ({services:?}): {violations:#?}");
            assert!(plan.services.iter().all(|s| s.met), "case {case}");
        };
        let parva = match plan(&parva_request) {
            Ok(planned) => planned.plan,
            Err(PlanError::Unmeetable(_)) => continue,
            Err(other) => panic!("case {case}: {other}"),
        };
        check(&parva, LatencyRule::Parva);
        let optimal = plan(&optimal_request).unwrap_or_else(|e| panic!("case {case}: {e}")).plan;
        check(&optimal, LatencyRule::Parva);
        assert!(
            optimal.gpu_count <= parva.gpu_count,
            "case {case}: optimal {} > parva {}",
            optimal.gpu_count,
            parva.gpu_count
        );
        let bound = optimal.optimality.as_ref().expect("optimal reports its bound").lower_bound;
        assert!(bound <= optimal.gpu_count as f64 && bound <= parva.gpu_count as f64, "case {case}");
        match plan(&PlanRequest { rule: Some(LatencyRule::Queueing), ..optimal_request }) {
            Ok(planned) => check(&planned.plan, LatencyRule::Queueing),
            Err(PlanError::Unmeetable(_)) => {}
            Err(other) => panic!("case {case}: {other}"),
        }
        planned += 1;
    }
    planned
}

#[test]
fn plans_on_synthetic_profiles_verify_and_optimal_beats_parva() {
    let catalog = builtin_catalog();
    for (gpu, seed) in [(GpuModel::A100_80GB, 1), (GpuModel::H100_80GB, 2)] {
        let planned = check_random_plans(&catalog, gpu, 300, seed);
        assert!(planned > 150, "{gpu}: only {planned} of 300 random SLO sets were plannable");
    }
}

#[test]
fn plans_on_parvagpu_profiles_verify_and_optimal_beats_parva() {
    let Some(catalog) = crate::common::parvagpu_catalog() else { return };
    let planned = check_random_plans(&catalog, GpuModel::A100_80GB, 300, 3);
    assert!(planned > 150, "only {planned} of 300 random SLO sets were plannable");
}
