//! Replanning over random rate changes: the replan stays within the GPU
//! bound, passes the verifier and changes no more GPUs than the fresh plan.

use proptest::prelude::*;
use tessera_core::rng::SplitMix64;
use tessera_core::synthetic::{builtin_catalog, demo_services};
use tessera_core::{GpuModel, ServiceSlo};
use tessera_plan::{plan_optimal, replan, verify, LatencyRule, PlanRequest, ReplanRequest, VerifyRequest};

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
        let request = |services| PlanRequest { rule, ..PlanRequest::new(GpuModel::A100_80GB, &catalog, services) };
        let current = plan_optimal(&request(&old)).unwrap();
        let mut rng = SplitMix64::new(seed ^ 0x5eed);
        let new: Vec<ServiceSlo> =
            old.iter().map(|s| ServiceSlo { rate_rps: s.rate_rps * rng.uniform(0.8, 1.2), ..s.clone() }).collect();
        let replanned =
            replan(&ReplanRequest { plan: request(&new), current: &current, max_extra_gpus, removed_gpus: &[] }).unwrap();
        let plan = &replanned.plan;
        prop_assert!(plan.gpu_count as u64 <= replanned.fresh.gpu_count as u64 + max_extra_gpus);
        let violations = verify(plan, &VerifyRequest { catalog: &catalog, services: &new, rule, max_procs: 5 });
        prop_assert!(violations.is_empty(), "{:?}", violations);
        let (stable, fresh) = (replanned.diff.totals, replanned.fresh_diff.totals);
        prop_assert!(stable.gpus_reconfigured() <= fresh.gpus_reconfigured(), "{:?} vs {:?}", stable, fresh);
        prop_assert!(stable.churn() <= fresh.churn());
    }
}
