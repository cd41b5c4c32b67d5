//! Plans at given rates: the services of the inputs with their rates
//! replaced, planned fresh or replanned from a running plan, and what the
//! serving model predicts of a plan at other rates.

use std::collections::BTreeSet;
use std::time::Duration;

use tessera_core::slo::DEFAULT_PERCENTILE;
use tessera_core::{GpuAssignment, GpuModel, GpuOffer, Plan, ServiceReport, ServiceSlo};
use tessera_plan::{
    plan, GpuPosition, Inventory, LatencyRule, PlanError, PlanInputs, PlanRequest, Planned, ReplanFrom,
    DEFAULT_GPUS_PER_NODE, DEFAULT_MAX_GPUS, DEFAULT_MAX_PROCS, DEFAULT_TIME_LIMIT,
};
use tessera_serving::{ServingError, ServingSystem};

/// The lowest rate a service is planned for, req/s: a service at no
/// traffic keeps one (small) segment, ready for its next request.
pub const MIN_PLAN_RATE_RPS: f64 = 0.01;

/// How plans are made: what `tessera plan` takes besides the services.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSettings {
    /// The GPU models the plans may use, with costs and limits.
    pub fleet: Vec<GpuOffer>,
    /// The latency rule; `None` for the planner's default (`percentile`).
    pub rule: Option<LatencyRule>,
    /// Most MPS processes per segment.
    pub max_procs: u32,
    /// GPUs per node, for numbering nodes.
    pub gpus_per_node: u32,
    /// How long one planning may search; `None` for no limit.
    pub time_limit: Option<Duration>,
    /// Most GPUs a plan may have.
    pub max_gpus: u64,
    /// The cluster's nodes every plan is placed on (`tessera plan
    /// --cluster`'s target); `None`: plans number their own nodes.
    pub target: Option<Inventory>,
}

impl Default for PlanSettings {
    /// The planner's defaults: one A100-80GB model at cost 1, its default
    /// rule, processes, node size, time limit and GPU ceiling.
    fn default() -> Self {
        PlanSettings {
            fleet: vec![GpuOffer::plain(GpuModel::A100_80GB)],
            rule: None,
            max_procs: DEFAULT_MAX_PROCS,
            gpus_per_node: DEFAULT_GPUS_PER_NODE,
            time_limit: Some(DEFAULT_TIME_LIMIT),
            max_gpus: DEFAULT_MAX_GPUS,
            target: None,
        }
    }
}

/// The inputs (services and profiles) with the settings plans are made
/// under.
#[derive(Debug, Clone)]
pub(crate) struct Planner {
    inputs: PlanInputs,
    settings: PlanSettings,
}

impl Planner {
    /// A planner of `inputs`' services under `settings`.
    pub fn new(inputs: PlanInputs, settings: PlanSettings) -> Planner {
        Planner { inputs, settings }
    }

    /// The services, in the inputs' order (rates as the inputs give them).
    pub fn services(&self) -> &[ServiceSlo] {
        self.inputs.services()
    }

    /// The services at `rates_rps` (in the services' order), each at least
    /// [`MIN_PLAN_RATE_RPS`].
    fn services_at(&self, rates_rps: &[f64]) -> Vec<ServiceSlo> {
        self.services()
            .iter()
            .zip(rates_rps)
            .map(|(slo, &rate_rps)| ServiceSlo { rate_rps: rate_rps.max(MIN_PLAN_RATE_RPS), ..slo.clone() })
            .collect()
    }

    /// A fresh plan of the services at `rates_rps`.
    pub fn fresh(&self, rates_rps: &[f64]) -> Result<Plan, PlanError> {
        let inputs = self.inputs.for_services(self.services_at(rates_rps));
        Ok(plan(&self.request(&inputs, None))?.plan)
    }

    /// A fresh plan of some services only: each `(index, rate_rps)` is a
    /// service (its index among the services) at a rate.
    pub fn fresh_for(&self, services: &[(usize, f64)]) -> Result<Plan, PlanError> {
        let subset = services
            .iter()
            .map(|&(index, rate_rps)| ServiceSlo {
                rate_rps: rate_rps.max(MIN_PLAN_RATE_RPS),
                ..self.services()[index].clone()
            })
            .collect();
        let inputs = self.inputs.for_services(subset);
        Ok(plan(&self.request(&inputs, None))?.plan)
    }

    /// A replan of the services at `rates_rps` from `current`, with the
    /// fewest reconfigurations, within `max_extra_gpus` of the fresh
    /// optimum, the `drained` GPUs emptied (their services moved first).
    pub fn replan(
        &self,
        rates_rps: &[f64],
        current: &Plan,
        max_extra_gpus: u64,
        drained: &[GpuPosition],
    ) -> Result<Planned, PlanError> {
        let inputs = self.inputs.for_services(self.services_at(rates_rps));
        let from = ReplanFrom { current, max_extra_gpus, drained: drained.to_vec(), lost: Vec::new() };
        plan(&self.request(&inputs, Some(from)))
    }

    fn request<'a>(&'a self, inputs: &'a PlanInputs, from: Option<ReplanFrom<'a>>) -> PlanRequest<'a> {
        PlanRequest {
            rule: self.settings.rule,
            fleet: self.settings.fleet.clone(),
            max_procs: self.settings.max_procs,
            gpus_per_node: self.settings.gpus_per_node,
            time_limit: self.settings.time_limit,
            max_gpus: self.settings.max_gpus,
            target: self.settings.target.as_ref(),
            from,
            ..PlanRequest::new(inputs)
        }
    }

    /// The serving system `plan`'s segments set up when the services
    /// receive `rates_rps` (partial batches from the inputs' profiles): the
    /// services with a segment in `plan` and a rate above zero, each with
    /// its index among the planner's services; `None` when there is none.
    pub fn system_at(
        &self,
        plan: &Plan,
        rates_rps: &[f64],
    ) -> Result<Option<(ServingSystem, Vec<usize>)>, ServingError> {
        let served: BTreeSet<&str> =
            plan.gpus.iter().flat_map(|gpu| &gpu.instances).map(|instance| instance.service.as_str()).collect();
        let indices: Vec<usize> = (0..self.services().len())
            .filter(|&index| rates_rps[index] > 0.0 && served.contains(self.services()[index].service.as_str()))
            .collect();
        if indices.is_empty() {
            return Ok(None);
        }
        let listed: BTreeSet<&str> = indices.iter().map(|&index| self.services()[index].service.as_str()).collect();
        let gpus = plan
            .gpus
            .iter()
            .map(|gpu| GpuAssignment {
                instances: gpu.instances.iter().filter(|i| listed.contains(i.service.as_str())).cloned().collect(),
                ..gpu.clone()
            })
            .collect();
        let services = indices.iter().map(|&index| served_report(&self.services()[index], rates_rps[index])).collect();
        let at_rates = Plan { gpus, services, ..Plan::from_gpus(Vec::new(), "", "", plan.gpus_per_node) };
        let (system, _) = ServingSystem::from_plan(&at_rates, Some(self.inputs.catalog()), DEFAULT_PERCENTILE)?;
        Ok(Some((system, indices)))
    }

    /// What the serving model predicts of `plan` at `rates_rps` (each at
    /// least [`MIN_PLAN_RATE_RPS`]): each service's share of requests
    /// within its SLO, in the services' order (0 for a service the plan
    /// does not serve).
    pub fn predicted_attainment(&self, plan: &Plan, rates_rps: &[f64]) -> Result<Vec<f64>, ServingError> {
        let floored: Vec<f64> = rates_rps.iter().map(|rate| rate.max(MIN_PLAN_RATE_RPS)).collect();
        let mut attainment = vec![0.0; self.services().len()];
        if let Some((system, indices)) = self.system_at(plan, &floored)? {
            for (served, &index) in indices.iter().enumerate() {
                attainment[index] = system.predicted_attainment(served)?;
            }
        }
        Ok(attainment)
    }
}

/// `slo` at `rate_rps` as a plan's service report, with only what the
/// serving model reads of one (name, rate, SLO, percentile).
fn served_report(slo: &ServiceSlo, rate_rps: f64) -> ServiceReport {
    ServiceReport {
        service: slo.service.clone(),
        model: slo.model.clone(),
        rate_rps,
        latency_slo_ms: slo.latency_slo_ms,
        provisioned_rps: 0.0,
        worst_latency_ms: 0.0,
        segments: 0,
        met: true,
        percentile: Some(slo.percentile),
        predicted_attainment: None,
    }
}
