//! The reference scale catalogues of 1,100 and 11,000 services (ParvaGPU's
//! measured profiles, one copy per service; `../shared/tools/scale_catalogue.py`,
//! built into a temporary folder): the relaxation's bound is exactly
//! 52,016 / 22 and 523,203 / 22 GPUs, and the optimal strategy plans 2,365
//! and 23,782 GPUs, proven.

use tessera_core::{GpuModel, Lattice, ProfileCatalog};
use tessera_plan::{plan, relaxation_bound, verify, LatencyRule, Strategy, VerifyRequest};
use tessera_serving::ArrivalModel;

use crate::common::{measured, request};
use tessera_store::{read_profile_dir, read_slo_scenario};

#[test]
fn the_1100_service_catalogue_is_planned_at_its_proven_optimum() {
    check_reference(1_100, 52_016.0, 2_365);
}

#[test]
fn the_11000_service_catalogue_is_planned_at_its_proven_optimum() {
    check_reference(11_000, 523_203.0, 23_782);
}

/// Plans the reference catalogue of `size` services: its LP bound must be
/// `in_22nds / 22` GPUs (optimal prices are multiples of 1/22), its
/// plan `gpus` GPUs, proven optimal and verified.
fn check_reference(size: usize, in_22nds: f64, gpus: usize) {
    let dir = tempfile::tempdir().unwrap();
    let Some(catalogue) = tessera_testkit::scale_catalogue(size, dir.path()) else { return };
    let gpu = GpuModel::A100_80GB;
    let catalog: ProfileCatalog = read_profile_dir(&catalogue.join("prof_data"), gpu).unwrap().catalog();
    let models: Vec<String> = catalog.models(gpu).map(str::to_string).collect();
    let rates = catalogue.join("SLO_req_rate.csv");
    let services = read_slo_scenario(&rates, &catalogue.join("SLO_latency.csv"), 1, &models).unwrap();
    assert_eq!(services.len(), size);
    let inputs = measured(&services, &catalog, gpu);
    let request = request(&inputs, gpu, Strategy::Optimal, LatencyRule::Parva);

    let bound = relaxation_bound(&request).unwrap();
    assert!(bound.optimal, "{bound:?}");
    assert!((bound.value * 22.0 - in_22nds).abs() < 1e-6, "{} × 22 = {}", bound.value, bound.value * 22.0);
    // The prices are feasible: no maximal layout costs more than one GPU.
    for layout in Lattice::new(gpu).maximal_size_sets() {
        let cost: f64 = bound.prices.iter().map(|&(_, size, price)| price * f64::from(layout.count(size))).sum();
        assert!(cost <= 1.0 + 1e-9, "{layout} costs {cost}: {bound:?}");
    }

    let plan = plan(&request).unwrap().plan;
    let optimality = plan.optimality.clone().unwrap();
    assert_eq!(plan.gpu_count, gpus);
    assert!(optimality.proven_optimal && optimality.lower_bound == gpus as f64, "{optimality:?}");
    let check = VerifyRequest {
        catalog: &catalog,
        services: &services,
        rule: LatencyRule::Parva,
        arrivals: &ArrivalModel::Poisson,
        max_procs: 5,
        margin: 0.0,
    };
    assert_eq!(verify(&plan, &check), vec![]);
}
