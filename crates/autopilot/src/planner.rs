//! Plans at given rates: the services of the inputs with their rates
//! replaced, planned fresh or replanned from a running plan, and what the
//! serving model predicts of a plan at other rates.

use std::collections::{BTreeMap, BTreeSet};

use tessera_core::slo::DEFAULT_PERCENTILE;
use tessera_core::text::percent;
use tessera_core::{GpuAssignment, Plan, ServiceReport, ServiceSlo, SharedInstance};
use tessera_plan::{
    plan, Arrivals, GpuPosition, Inventory, LatencyRule, PlanError, PlanInputs, PlanOptions, PlanRequest, Planned,
    ReplanFrom,
};
use tessera_serving::{ArrivalModel, ServingError, ServingSystem};

use crate::burstiness::renewal_cv;
use crate::error::AutopilotError;

/// The lowest rate a service is planned for, req/s: a service at no
/// traffic keeps one (small) segment, ready for its next request.
pub const MIN_PLAN_RATE_RPS: f64 = 0.01;

/// How plans are made: `tessera plan`'s options (one type for every
/// surface, [`PlanOptions`]) and where plans are placed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanSettings {
    /// The planning options (fleet, strategy, rule, arrivals, limits);
    /// arrivals from a trace must have been read into a model.
    pub options: PlanOptions,
    /// The cluster's nodes every plan is placed on (`tessera plan
    /// --cluster`'s target); `None`: plans number their own nodes.
    pub target: Option<Inventory>,
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

    /// Refuses at once the options every plan would be refused for (e.g.
    /// shared instances under other arrivals than Poisson).
    pub fn check(&self) -> Result<(), AutopilotError> {
        let request = PlanRequest::from_options(&self.settings.options, &self.inputs, None).map_err(refused)?;
        request.check().map_err(refused)
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
        Ok(plan(&self.request(&inputs, None)?)?.plan)
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
        Ok(plan(&self.request(&inputs, None)?)?.plan)
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
        let from =
            ReplanFrom { current, max_extra_gpus, drained: drained.to_vec(), lost: Vec::new(), within_layouts: false };
        plan(&self.request(&inputs, Some(from))?)
    }

    /// A replan of the services at `rates_rps` within `current`'s MIG
    /// instances: segments move between them, no GPU is added and no
    /// fresh optimum is planned (see [`ReplanFrom::within_layouts`]); an
    /// error when they cannot cover every service.
    pub fn replan_within_layouts(&self, rates_rps: &[f64], current: &Plan) -> Result<Plan, PlanError> {
        let inputs = self.inputs.for_services(self.services_at(rates_rps));
        let from =
            ReplanFrom { current, max_extra_gpus: 0, drained: Vec::new(), lost: Vec::new(), within_layouts: true };
        Ok(plan(&self.request(&inputs, Some(from))?)?.plan)
    }

    /// The planner's request for `inputs` under the settings.
    fn request<'a>(
        &'a self,
        inputs: &'a PlanInputs,
        from: Option<ReplanFrom<'a>>,
    ) -> Result<PlanRequest<'a>, PlanError> {
        let request = PlanRequest::from_options(&self.settings.options, inputs, from)?;
        // Of the many plans weighed, none is given its figures here: the
        // caller who deploys or shows one asks for them (`with_figures`).
        Ok(PlanRequest { target: self.settings.target.as_ref(), figures: false, ..request })
    }

    /// `plan`, one of this planner's, with every service's figures
    /// predicted at the rates it was made for (as `tessera plan` predicts
    /// them: percentile latency, attainment, tolerance, busiest load); as
    /// it is when they cannot be computed.
    pub fn with_figures(&self, plan: Plan) -> Plan {
        let rates_rps: Vec<f64> = self
            .services()
            .iter()
            .map(|slo| plan.services.iter().find(|report| report.service == slo.service).map_or(0.0, |r| r.rate_rps))
            .collect();
        let inputs = self.inputs.for_services(self.services_at(&rates_rps));
        tessera_plan::with_figures(&inputs, plan.clone()).unwrap_or(plan)
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
        let served: BTreeSet<&str> = plan.provided_rps().into_keys().collect();
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
                // A member at no traffic adds no load to its executor.
                shared: gpu
                    .shared
                    .iter()
                    .map(|shared| SharedInstance {
                        members: shared
                            .members
                            .iter()
                            .filter(|m| listed.contains(m.service.as_str()))
                            .cloned()
                            .collect(),
                        ..shared.clone()
                    })
                    .filter(|shared| !shared.members.is_empty())
                    .collect(),
                ..gpu.clone()
            })
            .collect();
        let services = indices.iter().map(|&index| served_report(&self.services()[index], rates_rps[index])).collect();
        let at_rates = Plan { gpus, services, ..Plan::from_gpus(Vec::new(), "", "", plan.gpus_per_node) };
        let (system, _) = ServingSystem::from_plan(&at_rates, Some(self.inputs.catalog()), DEFAULT_PERCENTILE)?;
        Ok(Some((system, indices)))
    }

    /// The arrival model plans are made under and traffic is simulated
    /// with: the options', else Poisson.
    pub fn arrivals(&self) -> ArrivalModel {
        match &self.settings.options.arrivals {
            Some(Arrivals::Model(model)) => model.clone(),
            _ => ArrivalModel::Poisson,
        }
    }

    /// Plans from now on are made under `model`.
    pub fn set_arrivals(&mut self, model: ArrivalModel) {
        self.settings.options.arrivals = Some(Arrivals::Model(model));
    }

    /// The services `plan` is predicted to leave short of their SLOs at
    /// `rates_rps` (each at least [`MIN_PLAN_RATE_RPS`]) with every batch
    /// `slowdown` slower than profiled, each with the words why, in the
    /// services' order (`None`: met). Under Poisson arrivals the serving
    /// model predicts each service's share within its SLO exactly; under
    /// another arrival model, which has no closed form, a service falls
    /// short above its capacity in the plan (each segment's capacity was
    /// searched for under that model with the request simulator, with the
    /// plan's margin, whatever `slowdown`). A service the plan does not
    /// serve falls short.
    pub fn shortfalls(
        &self,
        plan: &Plan,
        rates_rps: &[f64],
        slowdown: f64,
    ) -> Result<Vec<Option<String>>, ServingError> {
        let floored: Vec<f64> = rates_rps.iter().map(|rate| rate.max(MIN_PLAN_RATE_RPS)).collect();
        let arrivals = self.arrivals();
        if let Some(planned) = calmer_than(plan, &arrivals) {
            // Its capacities hold under calmer arrivals than those now
            // planned for: none is known to hold now.
            let shortfalls = self.services().iter().map(|slo| {
                Some(format!("{}: its capacity was planned under {planned} arrivals, not {arrivals}", slo.service))
            });
            return Ok(shortfalls.collect());
        }
        if arrivals != ArrivalModel::Poisson {
            let shortfalls = self.services().iter().zip(&floored).map(|(slo, &rate_rps)| {
                let report = plan.services.iter().find(|report| report.service == slo.service);
                let capacity_rps = report.map_or(0.0, |report| report.provisioned_rps);
                (rate_rps > capacity_rps).then(|| {
                    format!(
                        "{} at {rate_rps:.1} req/s: above its capacity of {capacity_rps:.1} req/s under {arrivals} \
                         arrivals",
                        slo.service
                    )
                })
            });
            return Ok(shortfalls.collect());
        }
        let mut attainment = vec![0.0; self.services().len()];
        let within = within_capacities(plan, self.services(), &floored, slowdown);
        if let Some((system, indices)) = self.system_at(plan, &floored)? {
            let system = system.slowed_by(slowdown);
            for (served, &index) in indices.iter().enumerate() {
                attainment[index] = match within[index] {
                    true => 1.0,
                    false => system.predicted_attainment(served)?,
                };
            }
        }
        let slower = if slowdown > 0.0 { format!(", every batch {} slower", percent(slowdown)) } else { String::new() };
        let shortfalls = self.services().iter().zip(&attainment).zip(&floored).map(|((slo, &predicted), rate_rps)| {
            (predicted < slo.percentile / 100.0).then(|| {
                let (service, attained) = (&slo.service, predicted * 100.0);
                format!("{service} at {rate_rps:.1} req/s{slower}: {attained:.2}% < {}%", slo.percentile)
            })
        });
        Ok(shortfalls.collect())
    }
}

/// The arrivals `plan` was proven under, when they are calmer than
/// `arrivals` (both renewal processes, the plan's of a lower coefficient of
/// variation; or the plan recording none, or another model); `None` when
/// the plan's capacities hold under `arrivals`.
fn calmer_than(plan: &Plan, arrivals: &ArrivalModel) -> Option<String> {
    let planned = plan.traffic.as_ref().map_or("none recorded", |traffic| traffic.arrivals.as_str());
    if planned == arrivals.to_string() {
        return None;
    }
    let planned_cv = planned.parse::<ArrivalModel>().ok().as_ref().and_then(renewal_cv);
    match (planned_cv, renewal_cv(arrivals)) {
        (Some(planned_cv), Some(now_cv)) if planned_cv >= now_cv => None,
        // A plan of no recorded model (a rule without capacities) is judged
        // by the serving model under Poisson, as before.
        _ if plan.traffic.is_none() || *arrivals == ArrivalModel::Poisson => None,
        _ => Some(planned.to_string()),
    }
}

/// Per service (in `services`' order), whether `plan` is known to meet its
/// percentile at `rates_rps` with every batch `slowdown` slower without
/// asking the serving model: under the percentile rule a segment's
/// capacity is a rate at which it meets the percentile with every batch
/// the plan's margin `m` slower, and a segment `1 + m` times slower at
/// rate λ serves as one `1 + s` times slower at λ(1 + m)/(1 + s) with every
/// latency (1 + m)/(1 + s) times longer. So for `s ≤ m` every segment,
/// routed in proportion to capacity, meets at a rate up to its service's
/// capacity times (1 + m)/(1 + s). `true` marks such a service (its share
/// within the SLO is then at least its percentile, whatever it is) of a
/// plan made under the percentile rule and Poisson arrivals. A member of
/// a shared instance waits behind the others' requests too: it is marked
/// only when every member of its instance is within its capacity so.
fn within_capacities(plan: &Plan, services: &[ServiceSlo], rates_rps: &[f64], slowdown: f64) -> Vec<bool> {
    let margin = plan.margin.unwrap_or(0.0);
    let poisson = plan.traffic.as_ref().is_some_and(|traffic| traffic.arrivals == ArrivalModel::Poisson.to_string());
    let percentile_rule = poisson && plan.latency_rule == LatencyRule::Percentile.name();
    let within: BTreeMap<&str, bool> = services
        .iter()
        .zip(rates_rps)
        .map(|(slo, &rate_rps)| {
            let report = plan.services.iter().find(|report| report.service == slo.service);
            let capacity_rps = report.map_or(0.0, |report| report.provisioned_rps);
            let within =
                percentile_rule && slowdown <= margin && rate_rps <= capacity_rps * (1.0 + margin) / (1.0 + slowdown);
            (slo.service.as_str(), within)
        })
        .collect();
    let mut marked = within.clone();
    for (_, shared) in plan.shared_instances() {
        let all = shared.members.iter().all(|member| within.get(member.service.as_str()).copied().unwrap_or(false));
        for member in &shared.members {
            if let Some(mark) = marked.get_mut(member.service.as_str()) {
                *mark &= all;
            }
        }
    }
    services.iter().map(|slo| marked[slo.service.as_str()]).collect()
}

/// A planning option refused for every plan.
fn refused(cause: PlanError) -> AutopilotError {
    AutopilotError::Plan { what: "under these options".to_string(), cause: Box::new(cause) }
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
        tolerance: None,
        busiest_load: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_within_its_scaled_capacity_is_met_as_the_serving_model_says() {
        let inputs = PlanInputs::demo(&[tessera_plan::DEFAULT_GPU_MODEL]).unwrap();
        let planner = Planner::new(inputs, PlanSettings::default());
        let rates: Vec<f64> = planner.services().iter().map(|slo| slo.rate_rps).collect();
        let plan = planner.fresh(&rates).unwrap();
        let margin = plan.margin.expect("plans record their margin");
        let capacities: Vec<f64> = planner
            .services()
            .iter()
            .map(|slo| plan.services.iter().find(|report| report.service == slo.service).unwrap().provisioned_rps)
            .collect();
        for slowdown in [0.0, margin / 2.0, margin] {
            let edge: Vec<f64> =
                capacities.iter().map(|capacity| capacity * (1.0 + margin) / (1.0 + slowdown) * (1.0 - 1e-6)).collect();
            assert!(within_capacities(&plan, planner.services(), &edge, slowdown).iter().all(|&within| within));
            // The serving model agrees at the edge the shortcut allows.
            let (system, indices) = planner.system_at(&plan, &edge).unwrap().unwrap();
            let system = system.slowed_by(slowdown);
            for (served, &index) in indices.iter().enumerate() {
                let attainment = system.predicted_attainment(served).unwrap();
                let percentile = planner.services()[index].percentile;
                assert!(attainment >= percentile / 100.0 - 1e-4, "slowdown {slowdown}: {attainment} < {percentile}%");
            }
            // A little above it, or slower than the margin, the model is asked.
            let above: Vec<f64> = edge.iter().map(|rate| rate * 1.01).collect();
            assert!(within_capacities(&plan, planner.services(), &above, slowdown).iter().all(|&within| !within));
        }
        assert!(within_capacities(&plan, planner.services(), &rates, margin + 0.01).iter().all(|&within| !within));
    }

    #[test]
    fn under_bursty_arrivals_a_service_falls_short_above_its_capacity() {
        let inputs = PlanInputs::demo(&[tessera_plan::DEFAULT_GPU_MODEL]).unwrap();
        let poisson = Planner::new(inputs.clone(), PlanSettings::default());
        let rates: Vec<f64> = poisson.services().iter().map(|slo| slo.rate_rps).collect();
        let plan = poisson.fresh(&rates).unwrap();
        let cv2 = ArrivalModel::Renewal { cv: 2.0 };
        let options = PlanOptions { arrivals: Some(Arrivals::Model(cv2.clone())), ..PlanOptions::default() };
        let bursty = Planner::new(inputs, PlanSettings { options, target: None });
        assert_eq!(bursty.arrivals(), cv2);
        // A plan proven under Poisson holds nothing under cv=2.
        let calmer = bursty.shortfalls(&plan, &rates, 0.0).unwrap();
        assert!(calmer.iter().all(|words| words.as_deref().is_some_and(|w| w.contains("planned under poisson"))));
        let bursty_plan = bursty.fresh(&rates).unwrap();
        assert!(bursty.shortfalls(&bursty_plan, &rates, 0.0).unwrap().iter().all(Option::is_none));
        let first = &poisson.services()[0].service;
        let bursty_capacity_rps =
            bursty_plan.services.iter().find(|report| &report.service == first).unwrap().provisioned_rps;
        let mut over = rates.clone();
        over[0] = bursty_capacity_rps * 1.01;
        let shortfalls = bursty.shortfalls(&bursty_plan, &over, 0.0).unwrap();
        let words = shortfalls[0].as_deref().expect("above its capacity");
        assert!(words.contains("above its capacity") && words.contains("under cv=2 arrivals"), "{words}");
        assert!(shortfalls[1..].iter().all(Option::is_none), "{shortfalls:?}");
        // Under Poisson the serving model judges at the speed asked: well
        // past the (margined) capacity the percentile is missed; at the
        // capacity it is met at the plan's margin, and missed well beyond.
        let capacity_rps = plan.services.iter().find(|report| &report.service == first).unwrap().provisioned_rps;
        over[0] = capacity_rps * 1.3;
        let judged = poisson.shortfalls(&plan, &over, 0.0).unwrap();
        assert!(judged[0].as_deref().is_some_and(|words| words.contains('<')), "{judged:?}");
        let margin = plan.margin.expect("plans record their margin");
        over[0] = capacity_rps;
        assert!(poisson.shortfalls(&plan, &over, margin).unwrap()[0].is_none());
        let slower = poisson.shortfalls(&plan, &over, margin + 0.1).unwrap();
        let words = slower[0].as_deref().expect("short with every batch much slower");
        assert!(words.contains("every batch 16% slower"), "{words}");
    }

    #[test]
    fn members_at_no_traffic_leave_their_executor_and_a_lone_member_is_served_alone() {
        let light: Vec<ServiceSlo> =
            (0..4).map(|k| ServiceSlo::new(format!("light-{k}"), "resnet50", 3.0, 150.0).unwrap()).collect();
        let inputs = PlanInputs::demo(&[tessera_plan::DEFAULT_GPU_MODEL]).unwrap().for_services(light);
        let options = PlanOptions { share: Some(tessera_core::Sharing::Serialized), ..PlanOptions::default() };
        let planner = Planner::new(inputs, PlanSettings { options, target: None });
        let plan = planner.fresh(&[3.0; 4]).unwrap();
        assert_eq!(plan.shared_instances().count(), 1);
        let (system, indices) = planner.system_at(&plan, &[3.0, 0.0, 3.0, 3.0]).unwrap().unwrap();
        assert_eq!(indices, [0, 2, 3]);
        assert_eq!(system.shared().len(), 1);
        assert_eq!(system.shared()[0].len(), 3);
        let (alone, indices) = planner.system_at(&plan, &[0.0, 0.0, 5.0, 0.0]).unwrap().unwrap();
        assert_eq!(indices, [2]);
        assert!(alone.shared().is_empty());
        // Alone it waits behind no one: it does at least as well as with
        // the others at their rates.
        let (together, _) = planner.system_at(&plan, &[3.0, 3.0, 5.0, 3.0]).unwrap().unwrap();
        assert!(alone.predicted_attainment(0).unwrap() >= together.predicted_attainment(2).unwrap());
        // Every member within its capacity: known to meet; one above it
        // takes its co-members with it.
        let capacity_rps: Vec<f64> = planner
            .services()
            .iter()
            .map(|slo| plan.services.iter().find(|report| report.service == slo.service).unwrap().provisioned_rps)
            .collect();
        assert!(within_capacities(&plan, planner.services(), &capacity_rps, 0.0).iter().all(|&within| within));
        let mut over = capacity_rps.clone();
        over[1] *= 1.5;
        assert!(within_capacities(&plan, planner.services(), &over, 0.0).iter().all(|&within| !within));
    }
}
