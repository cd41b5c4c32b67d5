//! Plans made under the default rule and margin keep their promise under
//! random traffic on a GPU slower than profiled by the margin: every
//! service of ParvaGPU's six scenarios, of random SLO mixes over its eleven
//! models and of the 1,100-service reference catalogue is predicted to
//! keep at least its percentile of requests within its SLO with every
//! batch the plan's margin slower, its tolerance is at least that margin,
//! and the request-level simulator (tessera-serving, Poisson arrivals, the
//! deployment's routing, every batch that much slower) agrees: no
//! service's attainment is statistically below its percentile.

use tessera_core::rng::SplitMix64;
use tessera_core::slo::DEFAULT_PERCENTILE;
use tessera_core::{GpuModel, Plan, ProfileCatalog, ServiceSlo};
use tessera_plan::{plan, LatencyRule, PlanInputs, PlanRequest, ProfileOrigin, VerifyRequest};
use tessera_serving::ArrivalModel;
use tessera_serving::{simulate, ServingReport, ServingSystem, SimulationOptions};

/// Plans `services` over `catalog` with every default (the percentile rule).
fn plan_with_defaults(services: Vec<ServiceSlo>, catalog: &ProfileCatalog) -> Plan {
    let inputs = PlanInputs::new(services, catalog.clone(), ProfileOrigin::Measured, &[GpuModel::A100_80GB]).unwrap();
    let planned = plan(&PlanRequest::new(&inputs)).unwrap().plan;
    assert_eq!(planned.latency_rule, LatencyRule::Percentile.name());
    let check = VerifyRequest {
        catalog,
        services: inputs.services(),
        rule: LatencyRule::Percentile,
        arrivals: &ArrivalModel::Poisson,
        max_procs: tessera_plan::DEFAULT_MAX_PROCS,
        margin: planned.margin.expect("a plan under the percentile rule records its margin"),
    };
    assert_eq!(check.margin, tessera_plan::DEFAULT_MARGIN);
    assert_eq!(tessera_plan::verify(&planned, &check), vec![]);
    // Each service tolerates at least the margin, and the check under a
    // margin beyond the smallest tolerance fails.
    let checked = tessera_plan::verify_plan(&planned, &inputs, tessera_plan::CheckOptions::default()).unwrap();
    let tolerances: Vec<f64> = checked.by_service.iter().map(|check| check.tolerance.unwrap()).collect();
    let least = tolerances.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(least >= check.margin - 1e-3, "tolerances {tolerances:?} below the margin {}", check.margin);
    if least < tessera_core::plan::TOLERANCE_RANGE.1 {
        let beyond = tessera_plan::CheckOptions { margin: Some(least + 0.01), ..tessera_plan::CheckOptions::default() };
        assert!(!tessera_plan::verify_plan(&planned, &inputs, beyond).unwrap().ok, "a margin past {least} fails");
    }
    planned
}

/// Every service is predicted at or above its percentile.
fn predicted_to_keep_its_promise(plan: &Plan, what: &str) {
    for report in &plan.services {
        let predicted = report.predicted_attainment.expect("the percentile rule predicts attainment");
        assert!(predicted >= 0.99 - 1e-3, "{what}: {} predicted at {predicted}", report.service);
    }
}

/// Simulates `plan` (Poisson arrivals, the deployment's routing, every
/// batch the plan's margin slower than profiled) for one replication of
/// `seconds`, a tenth of it warm-up.
fn simulated(plan: &Plan, catalog: &ProfileCatalog, seconds: f64) -> ServingReport {
    let (system, _) = ServingSystem::from_plan(plan, Some(catalog), DEFAULT_PERCENTILE).unwrap();
    let options = SimulationOptions {
        seconds,
        warmup_s: seconds / 10.0,
        slowdown: plan.margin.unwrap_or(0.0),
        ..SimulationOptions::default()
    };
    simulate(&system, &options).unwrap()
}

/// Every service is predicted at or above its percentile, and in a
/// simulation of `seconds` its attainment is not statistically below it:
/// the point estimate, or the top of its 95% interval (Student's t over
/// batches of the run: batches long enough to be nearly independent),
/// reaches it.
fn keeps_its_promise(plan: &Plan, catalog: &ProfileCatalog, seconds: f64, what: &str) {
    predicted_to_keep_its_promise(plan, what);
    for service in &simulated(plan, catalog, seconds).services {
        let Some(measures) = &service.measures else { continue };
        let reaches = measures.attainment >= 0.99 || measures.attainment_ci.is_some_and(|ci| ci.high >= 0.99);
        assert!(reaches, "{what}: {} keeps {:.4} ({:?})", service.name, measures.attainment, measures.attainment_ci);
    }
}

#[test]
fn plans_of_parvagpu_scenarios_keep_every_service_within_its_slo_under_poisson_arrivals() {
    let Some(catalog) = crate::common::parvagpu_catalog() else { return };
    let Some(slo) = tessera_testkit::shared_data("parvagpu/slo") else { return };
    let models: Vec<String> = catalog.models(GpuModel::A100_80GB).map(str::to_string).collect();
    let mut gpus = Vec::new();
    for scenario in 1..=6 {
        let services = tessera_store::read_slo_scenario(
            &slo.join("SLO_req_rate.csv"),
            &slo.join("SLO_latency.csv"),
            scenario,
            &models,
        )
        .unwrap();
        let planned = plan_with_defaults(services, &catalog);
        assert!(planned.optimality.as_ref().is_some_and(|o| o.proven_optimal), "scenario {scenario}");
        keeps_its_promise(&planned, &catalog, 300.0, &format!("scenario {scenario}"));
        gpus.push(planned.gpu_count);
    }
    // The uniform-headroom baseline needs 2, 3, 5, 7, 17 and 18 GPUs.
    assert!(gpus.iter().sum::<usize>() < 52, "{gpus:?}");
}

#[test]
fn plans_of_random_slo_mixes_over_the_eleven_models_keep_their_promise() {
    let Some(catalog) = crate::common::parvagpu_catalog() else { return };
    let models: Vec<String> = catalog.models(GpuModel::A100_80GB).map(str::to_string).collect();
    let mut rng = SplitMix64::new(22);
    for mix in 0..8 {
        let count = 1 + rng.below(11);
        let services = crate::common::random_mix(&mut rng, &models, count, (20.0, 4000.0));
        let inputs = crate::common::measured(&services, &catalog, GpuModel::A100_80GB);
        // A mix may ask for what no configuration can do: that is said.
        match plan(&PlanRequest::new(&inputs)) {
            Ok(planned) => keeps_its_promise(&planned.plan, &catalog, 120.0, &format!("mix {mix} ({services:?})")),
            Err(error) => {
                assert!(error.to_string().contains("cannot be served") || error.to_string().contains("SLO"), "{error}")
            }
        }
    }
}

#[test]
fn the_1100_service_reference_catalogue_keeps_its_promise() {
    let dir = tempfile::tempdir().unwrap();
    let Some(catalogue) = tessera_testkit::scale_catalogue(1_100, dir.path()) else { return };
    let gpu = GpuModel::A100_80GB;
    let catalog: ProfileCatalog = tessera_store::read_profile_dir(&catalogue.join("prof_data"), gpu).unwrap().catalog();
    let models: Vec<String> = catalog.models(gpu).map(str::to_string).collect();
    let services = tessera_store::read_slo_scenario(
        &catalogue.join("SLO_req_rate.csv"),
        &catalogue.join("SLO_latency.csv"),
        1,
        &models,
    )
    .unwrap();
    let planned = plan_with_defaults(services, &catalog);
    predicted_to_keep_its_promise(&planned, "1,100 services");
    // A short run of 1,100 services checks the model's calibration as a
    // whole: one service's attainment over seconds swings by a point or
    // two either way (and 1,100 per-service tests would each fail by
    // chance now and then), but the mean gap between simulated and
    // predicted attainment over all of them is tight. Short runs start
    // from empty queues, so they favour the plan a little (the mean gap
    // measured at 20 s: +0.08 points; at 1,000 s × 4 replications it was
    // +0.002): a model that overstated attainment by 0.13 points or more
    // across the board would fail here.
    let report = simulated(&planned, &catalog, 20.0);
    let predicted: std::collections::HashMap<&str, f64> = planned
        .services
        .iter()
        .map(|service| (service.service.as_str(), service.predicted_attainment.unwrap_or(f64::NAN)))
        .collect();
    let gaps: Vec<f64> = report
        .services
        .iter()
        .filter_map(|service| Some(service.measures.as_ref()?.attainment - predicted[service.name.as_str()]))
        .collect();
    assert_eq!(gaps.len(), 1_100);
    let mean_gap = gaps.iter().sum::<f64>() / gaps.len() as f64;
    assert!(mean_gap > -5e-4, "simulated attainment is {mean_gap:.5} below the predictions on average");
    assert!(report.attainment.is_some_and(|all| all >= 0.99), "{:?}", report.attainment);
}
