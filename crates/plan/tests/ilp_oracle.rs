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
//! - minimize `Σ_k y_k`.

use good_lp::{microlp, variable, variables, Expression, Solution, SolverModel, Variable};
use tessera_core::rng::SplitMix64;
use tessera_core::synthetic::builtin_catalog;
use tessera_core::{GpuModel, Lattice, ProfileCatalog, ServiceSlo};
use tessera_plan::{plan_optimal, LatencyRule, PlanError, PlanRequest, DEFAULT_MAX_PROCS};

/// Most GPUs or segments of one kind the program considers (far above what
/// these instances need).
const MOST: f64 = 200.0;

/// The fewest GPUs of `gpu` that serve `services` under the parva rule,
/// or `None` when some service has no allowed configuration.
fn ilp_optimum(catalog: &ProfileCatalog, gpu: GpuModel, services: &[ServiceSlo]) -> Option<u64> {
    let layouts = Lattice::new(gpu).maximal_size_sets();
    let sizes: Vec<u8> = gpu.spec().sizes().collect();
    let mut vars = variables!();
    let layout_vars: Vec<Variable> =
        layouts.iter().map(|_| vars.add(variable().integer().min(0.0).max(MOST))).collect();
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
                best.push((size, throughput, vars.add(variable().integer().min(0.0).max(MOST))));
            }
        }
        if best.is_empty() {
            return None;
        }
        segments.push(best);
    }
    let gpus: Expression = layout_vars.iter().sum();
    let mut model = vars.minimise(gpus.clone()).using(microlp);
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

/// Compares planner and program on `cases` random instances of 2 to 5
/// services; returns how many were served and how many of those the
/// planner proved optimal.
fn compare(catalog: &ProfileCatalog, gpu: GpuModel, cases: u64, seed: u64) -> (usize, usize) {
    let models: Vec<&str> = catalog.models(gpu).collect();
    let mut rng = SplitMix64::new(seed);
    let (mut served, mut proven) = (0, 0);
    for case in 0..cases {
        let count = 2 + rng.below(4);
        let services: Vec<ServiceSlo> = (0..count)
            .map(|i| {
                let model = models[rng.below(models.len())];
                let (rate_rps, latency_ms) = (rng.uniform(20.0, 1500.0), rng.uniform(30.0, 600.0));
                ServiceSlo::new(format!("s{i}"), model, rate_rps, latency_ms).unwrap()
            })
            .collect();
        let request = PlanRequest { rule: LatencyRule::Parva, ..PlanRequest::new(gpu, catalog, &services) };
        let optimum = ilp_optimum(catalog, gpu, &services);
        let plan = match plan_optimal(&request) {
            Ok(plan) => plan,
            Err(PlanError::Unmeetable(_)) => {
                assert_eq!(optimum, None, "case {case}: the program serves what the planner calls unmeetable");
                continue;
            }
            Err(other) => panic!("case {case}: {other}"),
        };
        let optimum = optimum.unwrap_or_else(|| panic!("case {case}: the planner serves what the program cannot"));
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
            proven += 1;
        }
        served += 1;
    }
    (served, proven)
}

#[test]
fn proven_optimal_plans_match_an_integer_program_on_synthetic_profiles() {
    let catalog = builtin_catalog();
    for (gpu, seed) in [(GpuModel::A100_80GB, 11), (GpuModel::H100_80GB, 12)] {
        let (served, proven) = compare(&catalog, gpu, 30, seed);
        assert!(served >= 20 && proven >= served / 2, "{gpu}: {served} served, {proven} proven");
    }
}

#[test]
fn proven_optimal_plans_match_an_integer_program_on_parvagpu_profiles() {
    let Some(catalog) = crate::common::parvagpu_catalog() else { return };
    let (served, proven) = compare(&catalog, GpuModel::A100_80GB, 30, 13);
    assert!(served >= 20 && proven >= served / 2, "{served} served, {proven} proven");
}
