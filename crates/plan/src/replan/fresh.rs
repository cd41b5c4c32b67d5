//! The fresh optimum of the last replan, kept for the next one: a caller
//! that weighs several replans of the same SLOs (the autopilot's
//! scale-down tries several releases and drained GPUs at one rate) plans
//! the optimum once.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tessera_core::{GpuOffer, Plan, ServiceSlo};
use tessera_serving::ArrivalModel;

use crate::error::PlanError;
use crate::latency::LatencyRule;
use crate::optimal::plan_optimal;
use crate::problem::Problem;

/// Everything of a problem that the fresh optimum depends on, but its
/// profiles: a memo serves one catalogue (the inputs', see
/// `PlanInputs`), and the memos of capacities and points change no plan.
#[derive(Debug, PartialEq)]
struct FreshKey {
    fleet: Vec<GpuOffer>,
    services: Vec<ServiceSlo>,
    rule: LatencyRule,
    max_procs: u32,
    gpus_per_node: u32,
    time_limit: Option<Duration>,
    max_gpus: u64,
    arrivals: ArrivalModel,
    margin_bits: u64,
    figures: bool,
}

impl FreshKey {
    fn of(problem: &Problem<'_>) -> FreshKey {
        FreshKey {
            fleet: problem.fleet.clone(),
            services: problem.services.to_vec(),
            rule: problem.rule,
            max_procs: problem.max_procs,
            gpus_per_node: problem.gpus_per_node,
            time_limit: problem.time_limit,
            max_gpus: problem.max_gpus,
            arrivals: problem.arrivals.clone(),
            margin_bits: problem.margin.to_bits(),
            figures: problem.figures,
        }
    }
}

/// The last fresh optimum planned over one catalogue, with the problem it
/// was planned for. Clones share it; safe to use from many threads.
#[derive(Debug, Clone, Default)]
pub(crate) struct FreshMemo {
    last: Arc<Mutex<Option<(FreshKey, Plan)>>>,
}

impl FreshMemo {
    /// [`plan_optimal`] of `problem`, whose catalogue must be the one this
    /// memo serves: the plan kept when the problem is the last one's, else
    /// planned and kept (a refusal is not).
    pub(crate) fn optimum(&self, problem: &Problem<'_>) -> Result<Plan, PlanError> {
        let key = FreshKey::of(problem);
        if let Some((kept, plan)) = &*self.last.lock().unwrap_or_else(PoisonError::into_inner) {
            if *kept == key {
                return Ok(plan.clone());
            }
        }
        // Planned without the lock: the search may take long.
        let plan = plan_optimal(problem)?;
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some((key, plan.clone()));
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replan::fixtures::{request, services};
    use tessera_core::synthetic::builtin_catalog;

    #[test]
    fn the_same_problem_is_planned_once_and_another_anew() {
        let catalog = builtin_catalog();
        let services = services(12, 1);
        let problem = request(&catalog, &services);
        let memo = FreshMemo::default();
        let first = memo.optimum(&problem).unwrap();
        assert_eq!(first, plan_optimal(&problem).unwrap());
        // Kept: a plan marked by hand comes back as it was kept.
        let marked = Plan { strategy: "kept".into(), ..first.clone() };
        memo.last.lock().unwrap().as_mut().unwrap().1 = marked.clone();
        assert_eq!(memo.optimum(&problem).unwrap(), marked);
        // Another rate, another ceiling on processes: planned anew.
        let mut faster = services.clone();
        faster[0].rate_rps *= 2.0;
        let other = request(&catalog, &faster);
        assert_eq!(memo.optimum(&other).unwrap(), plan_optimal(&other).unwrap());
        let fewer_procs = Problem { max_procs: 2, ..problem.clone() };
        assert_eq!(memo.optimum(&fewer_procs).unwrap(), plan_optimal(&fewer_procs).unwrap());
        // Clones share the memo.
        memo.last.lock().unwrap().as_mut().unwrap().1 = marked.clone();
        assert_eq!(memo.clone().optimum(&fewer_procs).unwrap(), marked);
    }
}
