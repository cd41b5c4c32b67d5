//! Replanning over random rate changes: the replan stays within the GPU
//! bound, passes the verifier and changes no more GPUs than the fresh plan.

use proptest::prelude::*;
use tessera_core::rng::SplitMix64;
use tessera_core::synthetic::{builtin_catalog, demo_services};
use tessera_core::{GpuModel, ServiceSlo};
use tessera_plan::{plan, verify, LatencyRule, PlanInputs, PlanRequest, Planned, ReplanFrom, Strategy, VerifyRequest};
use tessera_serving::ArrivalModel;

use crate::common::{measured, request};

/// `count` services over the built-in models, the demo's rates × U[0.2, 3].
fn catalogue(count: usize, seed: u64) -> Vec<ServiceSlo> {
    let base = demo_services();
    let mut rng = SplitMix64::new(seed);
    (0..count)
        .map(|i| {
            let slo = &base[i % base.len()];
            let rate_rps = slo.rate_rps * rng.uniform(0.2, 3.0);
            ServiceSlo::new(format!("svc{i:03}"), slo.model.clone(), rate_rps, slo.latency_slo_ms).unwrap()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn replans_of_changed_rates_stay_within_the_bound_and_change_no_more_than_a_fresh_plan(
        count in 6usize..40,
        seed in any::<u64>(),
        max_extra_gpus in 0u64..3,
        queueing in any::<bool>(),
    ) {
        let catalog = builtin_catalog();
        let rule = if queueing { LatencyRule::Queueing } else { LatencyRule::Parva };
        let old = catalogue(count, seed);
        let gpu = GpuModel::A100_80GB;
        let old_inputs = measured(&old, &catalog, gpu);
        let current = plan(&request(&old_inputs, gpu, Strategy::Optimal, rule)).unwrap().plan;
        let mut rng = SplitMix64::new(seed ^ 0x5eed);
        let new: Vec<ServiceSlo> =
            old.iter().map(|s| ServiceSlo { rate_rps: s.rate_rps * rng.uniform(0.8, 1.2), ..s.clone() }).collect();
        let new_inputs = measured(&new, &catalog, gpu);
        let from = ReplanFrom { current: &current, max_extra_gpus, drained: Vec::new(), lost: Vec::new(), within_layouts: false };
        let Planned { plan, replan } = plan(&PlanRequest {
            from: Some(from),
            ..request(&new_inputs, gpu, Strategy::Optimal, rule)
        })
        .unwrap();
        let replanned = replan.expect("a replan compares itself with the fresh plan");
        let plan = &plan;
        prop_assert!(plan.gpu_count as u64 <= replanned.fresh.gpu_count as u64 + max_extra_gpus);
        let violations = verify(plan, &VerifyRequest { catalog: &catalog, services: &new, rule, arrivals: &ArrivalModel::Poisson, max_procs: 5 , margin: 0.0});
        prop_assert!(violations.is_empty(), "{:?}", violations);
        let (stable, fresh) = (replanned.diff.totals, replanned.fresh_diff.totals);
        prop_assert!(stable.gpus_reconfigured() <= fresh.gpus_reconfigured(), "{:?} vs {:?}", stable, fresh);
        prop_assert!(stable.churn() <= fresh.churn());
    }
}

/// ParvaGPU's scenarios with their rates × U[0.8, 1.2] (seeds 1 to 20, as
/// `tessera bench replan` draws them): every replan passes the verifier.
#[test]
fn replans_of_parvagpu_scenarios_pass_the_verifier() {
    let Some(catalog) = crate::common::parvagpu_catalog() else { return };
    let Some(slo) = tessera_testkit::shared_data("parvagpu/slo") else { return };
    let models: Vec<String> = catalog.models(GpuModel::A100_80GB).map(str::to_string).collect();
    for scenario in 1..=6 {
        let old = tessera_store::read_slo_scenario(
            &slo.join("SLO_req_rate.csv"),
            &slo.join("SLO_latency.csv"),
            scenario,
            &models,
        )
        .unwrap();
        let gpu = GpuModel::A100_80GB;
        fn limited(inputs: &PlanInputs) -> PlanRequest<'_> {
            PlanRequest {
                time_limit: Some(std::time::Duration::from_secs(2)),
                ..request(inputs, GpuModel::A100_80GB, Strategy::Optimal, LatencyRule::Parva)
            }
        }
        let old_inputs = measured(&old, &catalog, gpu);
        let current = plan(&limited(&old_inputs)).unwrap().plan;
        for draw in 1..=20 {
            let mut rng = SplitMix64::new(draw);
            let new: Vec<ServiceSlo> =
                old.iter().map(|s| ServiceSlo { rate_rps: s.rate_rps * rng.uniform(0.8, 1.2), ..s.clone() }).collect();
            for max_extra_gpus in [0, 1] {
                let new_inputs = measured(&new, &catalog, gpu);
                let from = ReplanFrom {
                    current: &current,
                    max_extra_gpus,
                    drained: Vec::new(),
                    lost: Vec::new(),
                    within_layouts: false,
                };
                let replanned = plan(&PlanRequest { from: Some(from), ..limited(&new_inputs) }).unwrap();
                let violations = verify(
                    &replanned.plan,
                    &VerifyRequest {
                        catalog: &catalog,
                        services: &new,
                        rule: LatencyRule::Parva,
                        arrivals: &ArrivalModel::Poisson,
                        max_procs: 5,
                        margin: 0.0,
                    },
                );
                assert!(violations.is_empty(), "scenario {scenario}, draw {draw}, +{max_extra_gpus}: {violations:?}");
                assert!(replanned.plan.services.iter().all(|s| s.met), "scenario {scenario}, draw {draw}");
            }
        }
    }
}

/// A replan may spread its services: the diff it reports is the diff of
/// the plan it returns (trading segments restarts them).
#[test]
fn a_spread_replan_reports_the_diff_of_the_spread_plan() {
    let catalog = builtin_catalog();
    let gpu = GpuModel::A100_80GB;
    let old = catalogue(24, 7);
    let old_inputs = measured(&old, &catalog, gpu);
    let current = plan(&request(&old_inputs, gpu, Strategy::Optimal, LatencyRule::Parva)).unwrap().plan;
    let new: Vec<ServiceSlo> = old.iter().map(|s| ServiceSlo { rate_rps: s.rate_rps * 1.1, ..s.clone() }).collect();
    let new_inputs = measured(&new, &catalog, gpu);
    let from = ReplanFrom {
        current: &current,
        max_extra_gpus: 0,
        drained: Vec::new(),
        lost: Vec::new(),
        within_layouts: false,
    };
    let Planned { plan: spread, replan } = plan(&PlanRequest {
        from: Some(from),
        spread: true,
        ..request(&new_inputs, gpu, Strategy::Optimal, LatencyRule::Parva)
    })
    .unwrap();
    let replan = replan.expect("a replan compares itself with the fresh plan");
    assert_eq!(replan.diff, tessera_core::diff_plans(&current, &spread));
    assert!(spread.notes.iter().any(|note| note.starts_with("spread:")), "{:?}", spread.notes);
}
