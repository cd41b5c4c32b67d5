//! An oracle for the `optimal` strategy's claims: on small random instances
//! the fewest GPUs is computed by an integer program (`good_lp` with the
//! pure-Rust `microlp` solver) that shares nothing with the planner but the
//! latency rule and the MIG lattice's maximal layouts, and compared with
//! the planner's plan, its lower bound and its "proven optimal" flag.
//!
//! The program, under ParvaGPU's latency rule on one GPU model:
//! - `y_k ≥ 0` integer: GPUs cut by the k-th maximal layout (as a multiset
//!   of instance sizes);
//! - `x_{s,g} ≥ 0` integer: segments of size `g` serving service `s`, each
//!   running the size's highest-throughput configuration the rule allows
//!   (any other configuration of that size can be swapped for it without
//!   breaking the rule or the coverage, so nothing is lost);
//! - every rate covered: `Σ_g throughput_{s,g} · x_{s,g} ≥ rate_s`;
//! - the instances fit: `Σ_s x_{s,g} ≤ Σ_k L_k[g] · y_k` per size `g` (any
//!   sub-multiset of a maximal layout is realizable, and instances of each
//!   size can be handed out to the GPUs independently);
//! - minimize `Σ_k y_k`, at most the GPUs of the planner's plan (which the
//!   verifier has passed, so the optimum is no higher).

use good_lp::{microlp, variable, variables, Expression, Solution, SolverModel, Variable};
use std::time::Duration;
use tessera_serving::ArrivalModel;

use tessera_core::rng::SplitMix64;
use tessera_core::synthetic::builtin_catalog;
use tessera_core::{GpuModel, Lattice, ProfileCatalog, ServiceSlo};
use tessera_plan::{plan, verify, LatencyRule, PlanError, PlanRequest, Strategy, VerifyRequest, DEFAULT_MAX_PROCS};

use crate::common::{measured, request};

/// The fewest GPUs of `gpu` that serve `services` under the parva rule,
/// given that `most_gpus` suffice (a verified plan has that many), or
/// `None` when some service has no allowed configuration.
fn ilp_optimum(catalog: &ProfileCatalog, gpu: GpuModel, services: &[ServiceSlo], most_gpus: u64) -> Option<u64> {
    let layouts = Lattice::new(gpu).maximal_size_sets();
    let sizes: Vec<u8> = gpu.spec().sizes().collect();
    let mut vars = variables!();
    let most = most_gpus as f64;
    let layout_vars: Vec<Variable> =
        layouts.iter().map(|_| vars.add(variable().integer().min(0.0).max(most))).collect();
    // Per service: (size, throughput, variable) of its best allowed
    // configuration of each size.
    let mut segments: Vec<Vec<(u8, f64, Variable)>> = Vec::new();
    for slo in services {
        let profile = catalog.get(gpu, &slo.model)?;
        let mut best: Vec<(u8, f64, Variable)> = Vec::new();
        for &size in &sizes {
            let throughput = profile
                .points()
                .iter()
                .filter(|p| p.config.size_gpcs == size && p.config.procs <= DEFAULT_MAX_PROCS)
                .filter(|p| LatencyRule::Parva.meets(p, 1.0, slo.latency_slo_ms))
                .map(|p| p.throughput_rps)
                .fold(0.0, f64::max);
            if throughput > 0.0 {
                // A cover never needs more segments of one size than cover
                // the rate alone.
                let most = (slo.rate_rps / throughput).ceil();
                best.push((size, throughput, vars.add(variable().integer().min(0.0).max(most))));
            }
        }
        if best.is_empty() {
            return None;
        }
        segments.push(best);
    }
    let gpus: Expression = layout_vars.iter().sum();
    let mut model = vars.minimise(gpus.clone()).using(microlp).with(gpus.clone().leq(most));
    for (slo, best) in services.iter().zip(&segments) {
        let provided: Expression = best.iter().map(|&(_, throughput, x)| throughput * x).sum();
        model = model.with(provided.geq(slo.rate_rps));
    }
    for &size in &sizes {
        let used: Expression = segments.iter().flatten().filter(|(g, _, _)| *g == size).map(|&(_, _, x)| x).sum();
        let room: Expression =
            layouts.iter().zip(&layout_vars).map(|(layout, &y)| f64::from(layout.count(size)) * y).sum();
        model = model.with(used.leq(room));
    }
    let solution = model.solve().expect("the program is feasible once every service has a configuration");
    Some(solution.eval(&gpus).round() as u64)
}

/// What a comparison found.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// Instances some plan serves.
    served: usize,
    /// Of those, plans the planner proved optimal.
    proven: usize,
    /// Of those, plans with the optimum's GPU count.
    optimal: usize,
}

/// Random services: `count` of them, each on a random model of `models`
/// (or, with `every_model`, one per model in order), with a random rate
/// and latency SLO.
fn random_services(models: &[&str], count: usize, every_model: bool, rng: &mut SplitMix64) -> Vec<ServiceSlo> {
    (0..count)
        .map(|i| {
            let model = if every_model { models[i % models.len()] } else { models[rng.below(models.len())] };
            let (rate_rps, latency_ms) = (rng.uniform(20.0, 1500.0), rng.uniform(30.0, 600.0));
            ServiceSlo::new(format!("s{i}"), model, rate_rps, latency_ms).unwrap()
        })
        .collect()
}

/// Compares planner and program on `cases` random instances, each of
/// `services` services drawn by `draw`: the plan is never below the
/// optimum and verifies, the bound never above it, and a plan claimed
/// optimal has exactly the optimum's GPUs.
fn compare(
    catalog: &ProfileCatalog,
    gpu: GpuModel,
    cases: u64,
    seed: u64,
    draw: impl Fn(&mut SplitMix64) -> Vec<ServiceSlo>,
) -> Tally {
    let mut rng = SplitMix64::new(seed);
    let mut tally = Tally::default();
    for case in 0..cases {
        let services = draw(&mut rng);
        let inputs = measured(&services, catalog, gpu);
        let plan = match plan(&request(&inputs, gpu, Strategy::Optimal, LatencyRule::Parva)) {
            Ok(planned) => planned.plan,
            Err(PlanError::Unmeetable(_)) => {
                let optimum = ilp_optimum(catalog, gpu, &services, 1_000);
                assert_eq!(optimum, None, "case {case}: the program serves what the planner calls unmeetable");
                continue;
            }
            Err(other) => panic!("case {case}: {other}"),
        };
        // The plan is checked first: its GPU count then caps the program's.
        let check = VerifyRequest {
            catalog,
            services: &services,
            rule: LatencyRule::Parva,
            arrivals: &ArrivalModel::Poisson,
            max_procs: DEFAULT_MAX_PROCS,
            margin: 0.0,
        };
        assert_eq!(verify(&plan, &check), vec![], "case {case}");
        let optimum = ilp_optimum(catalog, gpu, &services, plan.gpu_count as u64)
            .unwrap_or_else(|| panic!("case {case}: the planner serves what the program cannot"));
        let optimality = plan.optimality.expect("the optimal strategy reports its bound");
        let gpus = plan.gpu_count as u64;
        assert!(gpus >= optimum, "case {case}: the plan's {gpus} GPUs beat the optimum {optimum}: {services:?}");
        assert!(
            optimality.lower_bound <= optimum as f64 + 1e-9,
            "case {case}: bound {} above the optimum {optimum}: {services:?}",
            optimality.lower_bound
        );
        if optimality.proven_optimal {
            assert_eq!(gpus, optimum, "case {case}: proven optimal but the program needs fewer: {services:?}");
            tally.proven += 1;
        }
        tally.optimal += usize::from(gpus == optimum);
        tally.served += 1;
    }
    tally
}

#[test]
fn proven_optimal_plans_match_an_integer_program_on_synthetic_profiles() {
    let catalog = builtin_catalog();
    let models: Vec<&str> = catalog.models(GpuModel::A100_80GB).collect();
    for (gpu, seed) in [(GpuModel::A100_80GB, 11), (GpuModel::H100_80GB, 12)] {
        let draw = |rng: &mut SplitMix64| {
            let count = 2 + rng.below(3);
            random_services(&models, count, false, rng)
        };
        let tally = compare(&catalog, gpu, 60, seed, draw);
        assert!(tally.served >= 40 && tally.proven * 10 >= tally.served * 9, "{gpu}: {tally:?}");
    }
}

#[test]
fn proven_optimal_plans_match_an_integer_program_on_parvagpu_profiles() {
    let Some(catalog) = crate::common::parvagpu_catalog() else { return };
    let models: Vec<&str> = catalog.models(GpuModel::A100_80GB).collect();
    let draw = |rng: &mut SplitMix64| {
        let count = 2 + rng.below(3);
        random_services(&models, count, false, rng)
    };
    let tally = compare(&catalog, GpuModel::A100_80GB, 100, 13, draw);
    assert!(tally.served >= 70 && tally.proven * 10 >= tally.served * 9, "{tally:?}");
}

/// ParvaGPU's setting: one service per measured model (eleven), random
/// SLOs and rates. The old bound was 2–5% below the optimum here, so the
/// old search proved none of them; the branch and bound proves most within
/// a second each. (Eleven services are too many for the integer program's
/// solver, so only the planner's own claims are checked: every plan
/// verifies and is at or above its bound.)
#[test]
fn slo_mixes_over_the_eleven_parvagpu_models_are_mostly_proven_optimal() {
    let Some(catalog) = crate::common::parvagpu_catalog() else { return };
    let models: Vec<&str> = catalog.models(GpuModel::A100_80GB).collect();
    let mut rng = SplitMix64::new(14);
    let mut tally = Tally::default();
    for case in 0..20 {
        let services = random_services(&models, models.len(), true, &mut rng);
        let inputs = measured(&services, &catalog, GpuModel::A100_80GB);
        let request = PlanRequest {
            time_limit: Some(Duration::from_secs(1)),
            ..request(&inputs, GpuModel::A100_80GB, Strategy::Optimal, LatencyRule::Parva)
        };
        let plan = match plan(&request) {
            Ok(planned) => planned.plan,
            Err(PlanError::Unmeetable(_) | PlanError::Unservable(_)) => continue,
            Err(other) => panic!("case {case}: {other}"),
        };
        let check = VerifyRequest {
            catalog: &catalog,
            services: &services,
            rule: LatencyRule::Parva,
            arrivals: &ArrivalModel::Poisson,
            max_procs: DEFAULT_MAX_PROCS,
            margin: 0.0,
        };
        assert_eq!(verify(&plan, &check), vec![], "case {case}");
        let optimality = plan.optimality.expect("the optimal strategy reports its bound");
        assert!(optimality.lower_bound <= plan.gpu_count as f64 + 1e-9, "case {case}: {optimality:?}");
        tally.served += 1;
        tally.proven += usize::from(optimality.proven_optimal);
    }
    assert!(tally.served >= 10 && tally.proven * 10 >= tally.served * 9, "{tally:?}");
}
