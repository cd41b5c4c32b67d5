//! Replanning: from the plan that runs to a plan for new SLOs that changes
//! as little of the fleet as it can.
//!
//! **Objective**, lexicographic: every SLO met; at most the fresh optimum's
//! GPUs plus [`ReplanRequest::max_extra_gpus`]; then the fewest GPUs whose
//! MIG layout is created, changed or torn down; then the fewest MIG
//! instances created or destroyed; then the fewest MPS processes started
//! (see [`tessera_core::diff`] for what each counts).
//!
//! **Method.** Every GPU of the current plan (less the ones drained or
//! lost) keeps its MIG layout, and every instance keeps its segment where
//! the service still exists with the same model and the segment's
//! configuration is still usable; the rest of its instances are *free*.
//! Services then hold more or less than their new rates:
//!
//! 1. a service short of its rate takes free instances, then instances of
//!    services with more than they need (as long as those stay covered),
//!    running its best configuration of that size — the layout stays;
//! 2. what is still short (the *residual*) is planned by the `optimal`
//!    strategy on new GPUs; a new GPU whose instances all fit in the unused
//!    slices of one kept GPU moves there;
//! 3. free instances left over go to a service that can run them (a
//!    reassigned instance keeps its layout; a destroyed one would not), and
//!    a GPU left with nothing to run is given back;
//! 4. while the plan has more GPUs than the bound, the kept GPUs that waste
//!    the most compute (unused slices, free instances, segments their
//!    services can spare) are dissolved and their services replanned, with
//!    twice as many GPUs dissolved as are over the bound each round.
//!
//! The fresh optimal plan, numbered to match the current plan where it can
//! ([`align_to`]), is the baseline: the replan is kept only when it meets
//! every SLO, passes [`verify`](crate::verify), stays within the bound and
//! changes no more than the fresh plan would; otherwise the fresh plan is
//! returned. Either way [`Replan`] carries both and both diffs.
//!
//! Inside: `position` (a GPU by node and index), `work` (the GPUs and
//! per-service ledger a replan works on), `candidates` (the configurations
//! a service may run), `inherit` (the running plan as work GPUs), `stable`
//! (the rounds of the layout-keeping plan and the dissolving), `fill`
//! (segments moved within kept layouts), `residual` (the rest planned on
//! new GPUs), `absorb` (new GPUs moved into kept ones), `assemble` (work
//! GPUs made a plan), `align` ([`align_to`], [`reseat`]), `keep_layouts`
//! (the fresh plan on old layouts) and `fresh` (the last fresh optimum,
//! kept for a replan of the same SLOs).

mod absorb;
mod align;
mod assemble;
mod candidates;
mod fill;
#[cfg(test)]
mod fixtures;
mod fresh;
mod inherit;
mod keep_layouts;
mod position;
mod residual;
mod stable;
mod work;

use tessera_core::{diff_plans, Optimality, Plan, PlanDiff};

use crate::error::PlanError;
use crate::optimal::plan_optimal;
use crate::problem::Problem;
use crate::verify::{verify_memoised, VerifyRequest};
pub use align::{align_to, reseat};
pub(crate) use fresh::FreshMemo;
use inherit::inherit;
use keep_layouts::keep_layouts;
pub use position::GpuPosition;
use stable::{stable_plan, within_layouts};

/// What a replan is asked.
#[derive(Debug, Clone)]
pub struct ReplanRequest<'a> {
    /// The new SLOs with the fleet, profiles and rules to plan them under.
    pub plan: Problem<'a>,
    /// The plan that runs now.
    pub current: &'a Plan,
    /// GPUs the replan may use beyond the fresh optimum.
    pub max_extra_gpus: u64,
    /// GPUs of the current plan that must not be used (drained or lost):
    /// their services are replanned onto the rest.
    pub removed_gpus: &'a [GpuPosition],
    /// The memo of the last fresh optimum planned over `plan`'s catalogue
    /// (the inputs'); `None` plans it (a catalogue of stand-ins).
    pub fresh_memo: Option<&'a FreshMemo>,
}

/// A replan, with the fresh optimum beside it.
#[derive(Debug, Clone)]
pub struct Replan {
    /// The plan to move to.
    pub plan: Plan,
    /// The fresh optimal plan of the new SLOs, numbered to match the
    /// current plan where it can.
    pub fresh: Plan,
    /// From the current plan to `plan`.
    pub diff: PlanDiff,
    /// From the current plan to `fresh`.
    pub fresh_diff: PlanDiff,
    /// `true` when `plan` is the fresh plan with its segments reseated
    /// ([`reseat`]) because the layout-keeping plan missed an SLO or the
    /// bound, or changed more.
    pub from_fresh: bool,
}

/// Plans the new SLOs from the current plan (see the module documentation).
pub fn replan(request: &ReplanRequest<'_>) -> Result<Replan, PlanError> {
    let plan_request = &request.plan;
    plan_request.check()?;
    let inherited = inherit(plan_request, request.current, request.removed_gpus)?;
    let fresh = match request.fresh_memo {
        Some(memo) => memo.optimum(plan_request)?,
        None => plan_optimal(plan_request)?,
    };
    let fresh = align_to(request.current, fresh, request.removed_gpus);
    let fresh_diff = diff_plans(request.current, &fresh);
    let bound = fresh.gpu_count as u64 + request.max_extra_gpus;

    let verified = |plan: &Plan| plan.gpu_count as u64 <= bound && meets_every_slo(plan_request, plan);
    // The fresh plan rebuilt on old layouts, or (should that fail the
    // verifier) as it is; either reseated.
    let rebuilt = keep_layouts(plan_request, request.current, fresh.clone(), request.removed_gpus);
    let rebuilt = if verified(&rebuilt) { rebuilt } else { fresh.clone() };
    let reseated = reseat(request.current, rebuilt);
    let reseated_diff = diff_plans(request.current, &reseated);
    let stable = stable_plan(plan_request, &inherited, bound, request.current, request.removed_gpus)
        .ok()
        .filter(|plan| verified(plan))
        .map(|plan| {
            let diff = diff_plans(request.current, &plan);
            (plan, diff)
        });
    let (mut plan, diff, from_fresh) = match stable {
        Some((plan, diff)) if diff.totals.churn() <= reseated_diff.totals.churn() => (plan, diff, false),
        _ => (reseated, reseated_diff, true),
    };
    plan.optimality = fresh.optimality.as_ref().map(|fresh_optimality| {
        let value = if fresh_optimality.objective == "gpus" { plan.gpu_count as f64 } else { plan.total_cost };
        let lower_bound = fresh_optimality.lower_bound;
        Optimality {
            objective: fresh_optimality.objective.clone(),
            value,
            lower_bound,
            proven_optimal: value <= lower_bound,
            gap: if lower_bound > 0.0 { (value - lower_bound) / lower_bound } else { 0.0 },
        }
    });
    plan.notes.push(format!(
        "replanned from a plan of {}; fresh optimum: {} (+{} allowed)",
        tessera_core::text::count(request.current.gpu_count, "GPU"),
        tessera_core::text::count(fresh.gpu_count, "GPU"),
        request.max_extra_gpus
    ));
    if from_fresh {
        plan.notes.push("the fresh plan's layouts, segments reseated, change least".to_string());
    }
    Ok(Replan { plan, fresh, diff, fresh_diff, from_fresh })
}

/// Plans the new SLOs within the current plan's MIG instances (less the
/// removed GPUs'): segments move between the running instances, free ones
/// first, then those whose services can spare them, as the layout-keeping
/// plan's first round does, with no GPU added and no fresh optimum
/// planned (a swap: only processes restart, or nothing changes). A free
/// instance nobody can run is destroyed and a GPU left with nothing to run
/// given back. Fails with [`PlanError::NotWithinLayouts`] when a service
/// stays short, and with [`PlanError::Invalid`] when the plan does not
/// pass the verifier.
pub fn replan_within_layouts(request: &ReplanRequest<'_>) -> Result<Plan, PlanError> {
    let plan_request = &request.plan;
    plan_request.check()?;
    let inherited = inherit(plan_request, request.current, request.removed_gpus)?;
    let mut plan = within_layouts(plan_request, &inherited, request.current, request.removed_gpus)?;
    if !meets_every_slo(plan_request, &plan) {
        return Err(PlanError::Invalid("a segment moved within the running layouts misses its SLO".to_string()));
    }
    plan.notes.push(format!(
        "replanned within the MIG instances of a plan of {}; no fresh optimum planned",
        tessera_core::text::count(request.current.gpu_count, "GPU")
    ));
    Ok(plan)
}

/// Whether every service of `plan` is met and the verifier finds nothing
/// wrong with it under `problem`.
fn meets_every_slo(problem: &Problem<'_>, plan: &Plan) -> bool {
    plan.services.iter().all(|s| s.met)
        && verify_memoised(
            plan,
            &VerifyRequest {
                catalog: problem.catalog,
                services: problem.services,
                rule: problem.rule,
                arrivals: problem.arrivals,
                max_procs: problem.max_procs,
                margin: problem.margin,
            },
            problem.capacities,
        )
        .is_empty()
}

#[cfg(test)]
mod tests {
    use super::fixtures::{request, services};
    use super::*;
    use crate::latency::LatencyRule;
    use crate::verify::verify;
    use tessera_core::rng::SplitMix64;
    use tessera_core::synthetic::builtin_catalog;
    use tessera_core::{GpuModel, ProfileCatalog, ServiceSlo};
    use tessera_serving::ArrivalModel;

    /// Replans `services` on the built-in catalogue from `current`.
    fn replan_of(catalog: &ProfileCatalog, services: &[ServiceSlo], current: &Plan, max_extra_gpus: u64) -> Replan {
        let request = ReplanRequest {
            plan: request(catalog, services),
            current,
            max_extra_gpus,
            removed_gpus: &[],
            fresh_memo: None,
        };
        replan(&request).unwrap()
    }

    fn check(replanned: &Replan, catalog: &ProfileCatalog, services: &[ServiceSlo]) {
        let plan = &replanned.plan;
        let violations = verify(
            plan,
            &VerifyRequest {
                catalog,
                services,
                rule: LatencyRule::Parva,
                arrivals: &ArrivalModel::Poisson,
                max_procs: crate::DEFAULT_MAX_PROCS,
                margin: 0.0,
            },
        );
        assert!(violations.is_empty(), "{violations:#?}");
        assert!(plan.services.iter().all(|s| s.met));
        assert_eq!(diff_plans(&replanned.fresh, &replanned.fresh).totals.gpus_unchanged, replanned.fresh.gpu_count);
    }

    #[test]
    fn unchanged_slos_give_the_same_plan() {
        let catalog = builtin_catalog();
        let services = services(24, 1);
        let current = plan_optimal(&request(&catalog, &services)).unwrap();
        let replanned = replan_of(&catalog, &services, &current, 0);
        assert!(!replanned.from_fresh);
        assert!(replanned.diff.totals.is_empty(), "{:?}", replanned.diff.totals);
        assert_eq!(replanned.plan.gpus, current.gpus);
        check(&replanned, &catalog, &services);
    }

    #[test]
    fn changed_rates_keep_most_layouts_within_the_bound() {
        let catalog = builtin_catalog();
        let old = services(40, 2);
        let current = plan_optimal(&request(&catalog, &old)).unwrap();
        let mut rng = SplitMix64::new(7);
        let new: Vec<ServiceSlo> =
            old.iter().map(|s| ServiceSlo { rate_rps: s.rate_rps * rng.uniform(0.8, 1.2), ..s.clone() }).collect();
        for max_extra_gpus in [0, 1, 3] {
            let replanned = replan_of(&catalog, &new, &current, max_extra_gpus);
            check(&replanned, &catalog, &new);
            assert!(replanned.plan.gpu_count as u64 <= replanned.fresh.gpu_count as u64 + max_extra_gpus);
            let (stable, fresh) = (replanned.diff.totals, replanned.fresh_diff.totals);
            assert!(stable.churn() <= fresh.churn(), "{stable:?} vs {fresh:?}");
            assert_eq!(
                stable.gpus_unchanged + stable.gpus_services_changed + stable.gpus_layout_changed + stable.gpus_removed,
                current.gpu_count
            );
        }
    }

    #[test]
    fn a_replan_within_layouts_moves_segments_or_names_the_services_left_short() {
        let catalog = builtin_catalog();
        let old = services(40, 2);
        let current = plan_optimal(&request(&catalog, &old)).unwrap();
        let within = |services: &[ServiceSlo]| {
            replan_within_layouts(&ReplanRequest {
                plan: request(&catalog, services),
                current: &current,
                max_extra_gpus: 0,
                removed_gpus: &[],
                fresh_memo: None,
            })
        };
        // One service rises while every other falls to half its rate:
        // their spare instances serve it, and no layout changes.
        let mut swapped: Vec<ServiceSlo> =
            old.iter().map(|s| ServiceSlo { rate_rps: s.rate_rps * 0.5, ..s.clone() }).collect();
        swapped[0].rate_rps = old[0].rate_rps * 1.5;
        let plan = within(&swapped).unwrap();
        assert!(plan.services.iter().all(|s| s.met));
        let totals = diff_plans(&current, &plan).totals;
        assert_eq!((totals.gpus_layout_changed, totals.gpus_added, totals.gpus_removed), (0, 0, 0), "{totals:?}");
        assert!(totals.services_changed > 0 && totals.processes_restarted > 0, "{totals:?}");
        // Every service at twice its rate: nothing is spare.
        let risen: Vec<ServiceSlo> =
            old.iter().map(|s| ServiceSlo { rate_rps: s.rate_rps * 2.0, ..s.clone() }).collect();
        let error = within(&risen).unwrap_err();
        assert!(matches!(error, PlanError::NotWithinLayouts { .. }), "{error}");
        assert!(old.iter().any(|s| error.to_string().contains(&s.service)), "{error}");
    }

    #[test]
    fn a_drained_gpu_is_left_and_its_services_move() {
        let catalog = builtin_catalog();
        let services = services(24, 3);
        let current = plan_optimal(&request(&catalog, &services)).unwrap();
        let drained = GpuPosition { node: current.gpus[0].node, index: current.gpus[0].index };
        let replanned = replan(&ReplanRequest {
            plan: request(&catalog, &services),
            current: &current,
            max_extra_gpus: 1,
            removed_gpus: &[drained],
            fresh_memo: None,
        })
        .unwrap();
        check(&replanned, &catalog, &services);
        assert!(replanned.plan.gpus.iter().all(|g| (g.node, g.index) != (drained.node, drained.index)));
        assert!(replanned.fresh.gpus.iter().all(|g| (g.node, g.index) != (drained.node, drained.index)));
        let removed = replanned.diff.gpus.iter().find(|g| (g.node, g.index) == (0, 0)).unwrap();
        assert_eq!(removed.change, tessera_core::GpuChange::Removed);
    }

    #[test]
    fn a_leaving_tenant_frees_its_instances_and_an_arriving_one_is_placed() {
        let catalog = builtin_catalog();
        let old = services(24, 4);
        let current = plan_optimal(&request(&catalog, &old)).unwrap();
        let mut new = old[1..].to_vec();
        new.push(ServiceSlo::new("newcomer", "resnet50", 300.0, 80.0).unwrap());
        let replanned = replan_of(&catalog, &new, &current, 1);
        check(&replanned, &catalog, &new);
        let instances = || replanned.plan.gpus.iter().flat_map(|g| &g.instances);
        assert!(instances().all(|i| i.service != old[0].service));
        assert!(instances().any(|i| i.service == "newcomer"));
        assert!(replanned.diff.totals.layouts_kept() * 2 >= current.gpu_count, "{:?}", replanned.diff.totals);
    }

    #[test]
    fn a_plan_of_another_gpu_or_an_unknown_gpu_is_refused() {
        let catalog = builtin_catalog();
        let services = services(6, 5);
        let current = plan_optimal(&request(&catalog, &services)).unwrap();
        let on_h100 = Problem::parva(GpuModel::H100_80GB, &catalog, &services);
        let on_h100 =
            ReplanRequest { plan: on_h100, current: &current, max_extra_gpus: 0, removed_gpus: &[], fresh_memo: None };
        let error = replan(&on_h100).unwrap_err();
        assert!(matches!(error, PlanError::ForeignGpu { .. }), "{error}");
        assert!(error.to_string().contains("a100-80gb"), "{error}");
        let nowhere = [GpuPosition { node: 9, index: 7 }];
        let error = replan(&ReplanRequest {
            plan: request(&catalog, &services),
            current: &current,
            max_extra_gpus: 0,
            removed_gpus: &nowhere,
            fresh_memo: None,
        })
        .unwrap_err();
        assert!(matches!(error, PlanError::GpuNotInPlan { node: 9, index: 7, .. }), "{error}");
    }
}
