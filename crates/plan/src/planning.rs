//! The one way to plan: a [`PlanRequest`] in, a [`Planned`] out.
//!
//! Every default is resolved here and nowhere else: the latency rule (the
//! one asked for; else, for a replan, the one the running plan records;
//! else the strategy's [`Strategy::default_rule`]), the arrival model (the
//! one asked for; else, for a replan, the one the running plan records;
//! else Poisson), the robustness margin (the one asked for; else, for a
//! replan, the one the running plan records; else the rule's
//! [`LatencyRule::default_margin`]), which strategy runs,
//! replanning from a running plan, spreading, placing on a deploy target,
//! and the notes a plan carries. The CLI, the service and the benchmarks
//! build a request and call [`plan`]; none decides anything of this.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tessera_core::text::number;
use tessera_core::{diff_plans, GpuModel, GpuOffer, Plan, PlanDiff, ServiceImage, Sharing};
use tessera_serving::ArrivalModel;

use crate::cancel::Cancel;
use crate::error::PlanError;
use crate::inputs::PlanInputs;
use crate::latency::{LatencyRule, MAX_MARGIN};
use crate::optimal::{plan_optimal, relaxation_bound as solve_relaxation, RelaxationBound};
use crate::parva::plan_parva;
use crate::placement::Inventory;
use crate::plan_options::{Arrivals, PlanOptions, ReplanOptions};
use crate::problem::Problem;
use crate::replan::{replan, replan_within_layouts, GpuPosition, Replan, ReplanRequest};
use crate::report::{record_tolerances, service_reports};
use crate::share_replan::replan_shared;
use crate::share_rich;
use crate::spread::spread_segments;
use crate::strategy::Strategy;

/// What to plan and how: the inputs, the strategy and its options, and
/// optionally the running plan to replan from and the deploy target to
/// place the plan on.
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    /// The services and profiles ([`PlanInputs`]).
    pub inputs: &'a PlanInputs,
    /// How to search.
    pub strategy: Strategy,
    /// The latency rule; `None` for the default (see the module docs).
    pub rule: Option<LatencyRule>,
    /// How requests arrive, for the percentile rule's capacities; `None`
    /// for the default (see the module docs).
    pub arrivals: Option<ArrivalModel>,
    /// The robustness margin of the percentile rule's capacities (every
    /// batch this share slower than profiled); `None` for the default (see
    /// the module docs).
    pub margin: Option<f64>,
    /// The GPU models the plan may use, with costs and limits (replaced by
    /// the target's GPUs when there is a target).
    pub fleet: Vec<GpuOffer>,
    /// Most MPS processes per segment.
    pub max_procs: u32,
    /// GPUs per node, for numbering nodes.
    pub gpus_per_node: u32,
    /// How long the `optimal` search may run before returning its best
    /// plan; `None` for no limit.
    pub time_limit: Option<Duration>,
    /// Whoever runs the request may cancel it ([`Cancel`]); `None`: no one.
    pub cancel: Option<&'a Cancel>,
    /// Most GPUs a plan may have, all models together.
    pub max_gpus: u64,
    /// Put every service with several segments on at least two GPUs
    /// (trading segments between same-profile instances; nothing else
    /// changes).
    pub spread: bool,
    /// Let light services share instances under this discipline (see
    /// [`PlanOptions::share`]).
    pub share: Option<Sharing>,
    /// The running plan to replan from, with the fewest reconfigurations.
    pub from: Option<ReplanFrom<'a>>,
    /// The deploy target whose nodes the plan is placed on.
    pub target: Option<&'a Inventory>,
    /// Predict each service's figures with the serving model (under a
    /// capacity rule and Poisson arrivals: its percentile latency,
    /// attainment, tolerance and busiest load; searches that take most of
    /// planning's time at fleet scale). Off, a service is met when its
    /// segments' capacities cover its rate (as they do by construction)
    /// and its report has no prediction. A caller that weighs many plans
    /// and keeps few (the autopilot) turns it off and asks
    /// [`with_figures`] for the plan it keeps.
    pub figures: bool,
}

/// Replanning from the plan that runs now.
#[derive(Debug, Clone)]
pub struct ReplanFrom<'a> {
    /// The running plan.
    pub current: &'a Plan,
    /// GPUs the replan may use beyond the fresh optimum.
    pub max_extra_gpus: u64,
    /// GPUs to empty before they are taken away (their services move).
    pub drained: Vec<GpuPosition>,
    /// GPUs already gone (their services are replanned onto the rest).
    pub lost: Vec<GpuPosition>,
    /// Move segments within the running MIG instances only (the
    /// layout-keeping plan's first round, free instances first, then those
    /// whose services can spare them), with no GPU added, no fresh optimum
    /// planned and no comparison with it ([`Planned::replan`] is `None`);
    /// the plan fails ([`PlanError::NotWithinLayouts`]) when the running
    /// instances cannot cover every service. With shared instances, a full
    /// replan (the sharing replanner has no such mode): the caller checks
    /// what it changes.
    pub within_layouts: bool,
}

impl<'a> ReplanFrom<'a> {
    /// Replanning from `current` as `options` ask.
    pub fn new(current: &'a Plan, options: &ReplanOptions) -> ReplanFrom<'a> {
        ReplanFrom {
            current,
            max_extra_gpus: options.max_extra_gpus,
            drained: options.drain.clone(),
            lost: options.lost.clone(),
            within_layouts: false,
        }
    }
}

/// A plan, and for a replan how it compares with planning from scratch.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The plan.
    pub plan: Plan,
    /// Replanning only: the fresh optimum and both diffs.
    pub replan: Option<ReplanComparison>,
}

/// How a replan compares with planning the new SLOs from scratch.
#[derive(Debug, Clone)]
pub struct ReplanComparison {
    /// The fresh optimal plan, numbered to match the running plan.
    pub fresh: Plan,
    /// From the running plan to the replan.
    pub diff: PlanDiff,
    /// From the running plan to the fresh plan.
    pub fresh_diff: PlanDiff,
    /// `true` when the replan is the fresh plan reseated (the
    /// layout-keeping plan missed an SLO or the bound, or changed more).
    pub from_fresh: bool,
}

impl<'a> PlanRequest<'a> {
    /// The defaults of [`PlanOptions::default`] (the `optimal` strategy
    /// under its default rule on one unlimited A100-80GB model), no
    /// replan, no target.
    pub fn new(inputs: &'a PlanInputs) -> PlanRequest<'a> {
        let options = PlanOptions::default();
        let time_limit = options.time_limit();
        PlanRequest {
            inputs,
            strategy: options.strategy,
            rule: options.latency_rule,
            arrivals: None,
            margin: options.margin,
            fleet: options.gpus,
            max_procs: options.max_procs,
            gpus_per_node: options.gpus_per_node,
            time_limit,
            cancel: None,
            max_gpus: options.max_gpus,
            spread: options.spread,
            share: options.share,
            from: None,
            target: None,
            figures: true,
        }
    }

    /// The request for `inputs` under `options`, replanning from `from`
    /// when given: the one place options become a request. Arrivals from
    /// a trace file must have been read first (see
    /// [`Arrivals::TraceFile`]): this crate reads no file.
    pub fn from_options(
        options: &PlanOptions,
        inputs: &'a PlanInputs,
        from: Option<ReplanFrom<'a>>,
    ) -> Result<PlanRequest<'a>, PlanError> {
        options.check()?;
        let arrivals = match &options.arrivals {
            None => None,
            Some(Arrivals::Model(model)) => Some(model.clone()),
            Some(Arrivals::TraceFile(path)) => return Err(PlanError::TraceNotRead(path.display().to_string())),
        };
        Ok(PlanRequest {
            strategy: options.strategy,
            rule: options.latency_rule,
            arrivals,
            margin: options.margin,
            fleet: options.gpus.clone(),
            max_procs: options.max_procs,
            gpus_per_node: options.gpus_per_node,
            time_limit: options.time_limit(),
            max_gpus: options.max_gpus,
            spread: options.spread,
            share: options.share,
            from,
            ..PlanRequest::new(inputs)
        })
    }

    /// The rule the plan is made under (see the module docs).
    pub fn resolved_rule(&self) -> Result<LatencyRule, PlanError> {
        let recorded = match &self.from {
            Some(from) => recorded_rule(from.current)?,
            None => None,
        };
        Ok(self.rule.or(recorded).unwrap_or(self.strategy.default_rule()))
    }

    /// The arrival model the plan is proven under: the one asked for;
    /// else, for a replan, the one the running plan records (a recorded
    /// trace must be asked for again: a plan names it, it does not hold
    /// it); else Poisson. Only the percentile rule takes one other than
    /// Poisson.
    pub fn resolved_arrivals(&self) -> Result<ArrivalModel, PlanError> {
        let recorded = match (&self.arrivals, &self.from) {
            (None, Some(from)) => recorded_arrivals(from.current)?,
            _ => None,
        };
        let arrivals = self.arrivals.clone().or(recorded).unwrap_or(ArrivalModel::Poisson);
        let rule = self.resolved_rule()?;
        if arrivals != ArrivalModel::Poisson && !rule.uses_capacity() {
            return Err(PlanError::ArrivalsNeedPercentile { rule: rule.name(), arrivals: arrivals.to_string() });
        }
        Ok(arrivals)
    }

    /// The robustness margin the plan is proven under: the one asked for;
    /// else, for a replan, the one the running plan records; else the
    /// rule's [`LatencyRule::default_margin`]. A margin above 0 needs a
    /// rule with capacities (the percentile rule).
    pub fn resolved_margin(&self) -> Result<f64, PlanError> {
        let rule = self.resolved_rule()?;
        let recorded = self.from.as_ref().and_then(|from| from.current.margin);
        let margin = self.margin.or(recorded).unwrap_or(rule.default_margin());
        if !(0.0..=MAX_MARGIN).contains(&margin) {
            return Err(PlanError::InvalidOption {
                field: "margin",
                message: format!("{} is not a share in [0, {MAX_MARGIN}]", number(margin, 3)),
            });
        }
        if margin > 0.0 && !rule.uses_capacity() {
            return Err(PlanError::MarginNeedsPercentile { rule: rule.name() });
        }
        Ok(margin)
    }

    /// The fleet: the target's GPUs priced as the request's fleet prices
    /// them, or the request's fleet.
    pub fn resolved_fleet(&self) -> Result<Vec<GpuOffer>, PlanError> {
        match self.target {
            Some(target) => target.offers(&self.fleet),
            None => Ok(self.fleet.clone()),
        }
    }

    /// The request's choices resolved (see the module docs), its inputs
    /// completed for its fleet.
    fn resolved(&self) -> Result<Resolved, PlanError> {
        let fleet = self.resolved_fleet()?;
        Ok(Resolved {
            rule: self.resolved_rule()?,
            arrivals: self.resolved_arrivals()?,
            margin: self.resolved_margin()?,
            completed: completed_for(self.inputs, &fleet)?,
            fleet,
        })
    }

    /// The inputs planned with under `resolved`: the request's, completed
    /// for its fleet where they had to be.
    fn inputs_under<'p>(&self, resolved: &'p Resolved) -> &'p PlanInputs
    where
        'a: 'p,
    {
        resolved.completed.as_ref().unwrap_or(self.inputs)
    }

    /// What one strategy solves under `resolved`.
    fn problem<'p>(&self, resolved: &'p Resolved) -> Problem<'p>
    where
        'a: 'p,
    {
        let inputs = self.inputs_under(resolved);
        Problem {
            fleet: resolved.fleet.clone(),
            catalog: inputs.catalog(),
            services: inputs.services(),
            rule: resolved.rule,
            max_procs: self.max_procs,
            gpus_per_node: self.gpus_per_node,
            time_limit: self.time_limit,
            max_gpus: self.max_gpus,
            arrivals: &resolved.arrivals,
            margin: resolved.margin,
            capacities: inputs.capacities(),
            cancel: self.cancel,
            figures: self.figures,
            points: Some(inputs.judged_points()),
        }
    }
}

/// A request's defaults resolved, once ([`PlanRequest::resolved`]).
struct Resolved {
    rule: LatencyRule,
    arrivals: ArrivalModel,
    margin: f64,
    fleet: Vec<GpuOffer>,
    /// The inputs completed for the fleet, when they had to be.
    completed: Option<PlanInputs>,
}

/// The latency rule `plan` records, if any (a ParvaGPU deployment map
/// records none); a name this build does not know is an error.
pub fn recorded_rule(plan: &Plan) -> Result<Option<LatencyRule>, PlanError> {
    match plan.latency_rule.as_str() {
        "" => Ok(None),
        name => name.parse().map(Some).map_err(PlanError::RecordedRule),
    }
}

/// The arrival model `plan` records, if any; a recorded trace is an error
/// (a plan names a trace, it does not hold it: it must be named again).
pub fn recorded_arrivals(plan: &Plan) -> Result<Option<ArrivalModel>, PlanError> {
    let Some(traffic) = &plan.traffic else { return Ok(None) };
    ArrivalModel::parse(&traffic.arrivals)
        .map(Some)
        .map_err(|error| PlanError::RecordedArrivals(format!("{error}: name the arrivals again")))
}

impl PlanRequest<'_> {
    /// Refuses at once, without looking at profiles, what [`plan`] would
    /// refuse of the request's options: a rule it cannot resolve, a replan
    /// by a strategy that cannot replan, a target without GPUs, a strategy
    /// asked for a rule it does not implement.
    pub fn check(&self) -> Result<(), PlanError> {
        let rule = self.resolved_rule()?;
        self.resolved_arrivals()?;
        self.resolved_margin()?;
        self.resolved_fleet()?;
        if self.from.is_some() && self.strategy != Strategy::Optimal {
            return Err(PlanError::ReplanNeedsOptimal { strategy: self.strategy.name() });
        }
        self.check_sharing(rule)?;
        self.strategy.check_rule(rule)
    }

    /// The discipline of shared instances: asked, else the running plan's
    /// when it has shared instances (a replan keeps sharing), else none.
    pub fn resolved_share(&self) -> Option<Sharing> {
        self.share.or_else(|| {
            let from = self.from.as_ref()?;
            from.current.shared_instances().next().map(|(_, shared)| shared.sharing)
        })
    }

    /// Refuses sharing where the serialized model does not hold or the
    /// planner cannot place it: another rule, arrivals or strategy, a
    /// fleet of several GPU models.
    fn check_sharing(&self, rule: LatencyRule) -> Result<(), PlanError> {
        let refuse = |message: &str| Err(PlanError::InvalidOption { field: "share", message: message.to_string() });
        if self.resolved_share().is_none() {
            return Ok(());
        }
        if rule != LatencyRule::Percentile || self.strategy != Strategy::Optimal {
            return refuse("shared instances are planned by the optimal strategy under the percentile rule");
        }
        if self.resolved_arrivals()? != ArrivalModel::Poisson {
            return refuse("shared instances are proven under Poisson arrivals only");
        }
        if self.resolved_fleet()?.len() != 1 {
            return refuse("shared instances are planned on a fleet of one GPU model");
        }
        Ok(())
    }
}

/// The images a plan carries: the inputs' (the SLO file's `image` and
/// `args` columns); a replan keeps the current plan's image of a service
/// still planned that the new inputs give none, and a changed image
/// replaces the old one.
fn images_of(inputs: &PlanInputs, current: Option<&Plan>) -> BTreeMap<String, ServiceImage> {
    let mut images: BTreeMap<String, ServiceImage> = current
        .into_iter()
        .flat_map(|current| &current.images)
        .filter(|(service, _)| inputs.services().iter().any(|slo| &slo.service == *service))
        .map(|(service, image)| (service.clone(), image.clone()))
        .collect();
    images.extend(inputs.images().iter().map(|(service, image)| (service.clone(), image.clone())));
    images
}

/// A replan's plan, and how it compares with the fresh optimum.
fn compared(replanned: Replan) -> (Plan, Option<ReplanComparison>) {
    let Replan { plan, fresh, diff, fresh_diff, from_fresh } = replanned;
    (plan, Some(ReplanComparison { fresh, diff, fresh_diff, from_fresh }))
}

/// Plans `request` (see the module docs).
pub fn plan(request: &PlanRequest<'_>) -> Result<Planned, PlanError> {
    let resolved = request.resolved()?;
    if request.from.is_some() && request.strategy != Strategy::Optimal {
        return Err(PlanError::ReplanNeedsOptimal { strategy: request.strategy.name() });
    }
    request.check_sharing(resolved.rule)?;
    let inputs = request.inputs_under(&resolved);
    let problem = request.problem(&resolved);
    let arrivals = &resolved.arrivals;
    let started = Instant::now();
    let (mut plan, mut replanned) = match &request.from {
        Some(from) => {
            let removed: Vec<GpuPosition> = from.drained.iter().chain(&from.lost).copied().collect();
            let replan_request = ReplanRequest {
                plan: problem,
                current: from.current,
                max_extra_gpus: from.max_extra_gpus,
                removed_gpus: &removed,
                fresh_memo: Some(inputs.fresh_memo()),
            };
            let (mut plan, comparison) = match request.resolved_share() {
                Some(_) => compared(replan_shared(&replan_request.plan, from.current, from.max_extra_gpus, &removed)?),
                None if from.within_layouts => (replan_within_layouts(&replan_request)?, None),
                None => compared(replan(&replan_request)?),
            };
            for position in &from.drained {
                plan.notes.push(format!("GPU {position} drained: its services run elsewhere before it is emptied"));
            }
            for position in &from.lost {
                plan.notes.push(format!("GPU {position} lost: its services are replanned onto the rest"));
            }
            (plan, comparison)
        }
        None if request.share.is_some() => (share_rich::plan_shared(&problem)?, None),
        None => {
            let plan = match request.strategy {
                Strategy::Optimal => plan_optimal(&problem)?,
                Strategy::Parva => plan_parva(&problem)?,
            };
            (plan, None)
        }
    };
    plan.notes.extend(inputs.notes().iter().cloned());
    if *arrivals != ArrivalModel::Poisson {
        plan.notes.push(format!(
            "capacities under {arrivals} arrivals were searched for with the request simulator, each segment alone \
             fed them at its rate (a random share of a bursty renewal stream is smoother, so this errs low); \
             `tessera verify --simulate` judges the whole plan"
        ));
    }
    plan.images = images_of(inputs, request.from.as_ref().map(|from| from.current));
    let unproven = plan.optimality.as_ref().is_some_and(|o| !o.proven_optimal);
    if let Some(limit) = request.time_limit.filter(|&limit| unproven && started.elapsed() >= limit) {
        plan.notes.push(format!(
            "planning stopped at its time limit of {} s: this is the best plan found, not proven optimal",
            limit.as_secs_f64()
        ));
    }
    if request.spread {
        let unspread = spread_segments(&mut plan);
        if let (Some(comparison), Some(from)) = (&mut replanned, &request.from) {
            // Trading segments restarts them: the replan's diff is the
            // spread plan's.
            comparison.diff = diff_plans(from.current, &plan);
        }
        plan.notes.push(if unspread.is_empty() {
            "spread: every service with several segments runs on at least two GPUs".to_string()
        } else {
            format!(
                "spread: {} still on one GPU each (no other GPU of the model has an instance of their profile to trade)",
                unspread.join(", ")
            )
        });
    }
    if let Some(target) = request.target {
        if let Some(from) = &request.from {
            // The replan numbers its GPUs as the running plan does: the
            // GPUs it keeps stay on the nodes that plan names.
            plan.node_names.clone_from(&from.current.node_names);
        }
        plan = target.place(&plan)?;
    }
    if request.figures {
        record_tolerances(&plan.gpus, &mut plan.services, &request.problem(&resolved));
    }
    // A request cancelled on the way may have skipped predictions: no plan.
    if request.cancel.is_some_and(Cancel::is_cancelled) {
        return Err(PlanError::Cancelled);
    }
    Ok(Planned { plan, replan: replanned })
}

/// `plan`, made with [`PlanRequest::figures`] off, with every service's
/// figures predicted as the planner predicts them, under the rule,
/// arrivals and margin the plan records. `inputs` holds the plan's
/// services at the rates it was made for, and their profiles. Reports of
/// services without an instance of their own (members of shared
/// instances, whose figures the sharing planner computed) are kept.
pub fn with_figures(inputs: &PlanInputs, mut plan: Plan) -> Result<Plan, PlanError> {
    let mut models: Vec<GpuModel> = plan.gpus.iter().map(|gpu| gpu.gpu_model).collect();
    models.sort();
    models.dedup();
    let fleet: Vec<GpuOffer> = models.into_iter().map(GpuOffer::plain).collect();
    let from =
        ReplanFrom { current: &plan, max_extra_gpus: 0, drained: Vec::new(), lost: Vec::new(), within_layouts: false };
    let resolved = PlanRequest { from: Some(from), fleet, ..PlanRequest::new(inputs) }.resolved()?;
    // The same request without the running plan (which is changed below),
    // predicting.
    let problem = PlanRequest::new(inputs).problem(&resolved);
    let mut predicted = service_reports(&plan.gpus, &problem);
    record_tolerances(&plan.gpus, &mut predicted, &problem);
    for report in predicted.into_iter().filter(|report| report.segments > 0) {
        if let Some(kept) = plan.services.iter_mut().find(|kept| kept.service == report.service) {
            *kept = report;
        }
    }
    Ok(plan)
}

/// The linear-programming bound of `request` (each service a convex
/// combination of covers, GPUs fractional per layout), solved as the
/// `optimal` strategy does, under the request's time limit: no plan uses
/// fewer GPUs (or costs less).
pub fn relaxation_bound(request: &PlanRequest<'_>) -> Result<RelaxationBound, PlanError> {
    let resolved = request.resolved()?;
    solve_relaxation(&request.problem(&resolved))
}

/// The inputs completed for `fleet`, when they were completed for other
/// GPU models (`None`: use them as they are).
fn completed_for(inputs: &PlanInputs, fleet: &[GpuOffer]) -> Result<Option<PlanInputs>, PlanError> {
    let missing: Vec<GpuModel> =
        fleet.iter().map(|offer| offer.model).filter(|model| !inputs.gpu_models().contains(model)).collect();
    if missing.is_empty() {
        return Ok(None);
    }
    inputs.completed_for_more(&missing).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan_options::DEFAULT_GPU_MODEL;

    #[test]
    fn a_trace_file_must_be_read_before_planning() {
        let inputs = PlanInputs::demo(&[DEFAULT_GPU_MODEL]).unwrap();
        let options = PlanOptions { arrivals: Some("trace=day.csv".parse().unwrap()), ..PlanOptions::default() };
        assert!(matches!(PlanRequest::from_options(&options, &inputs, None), Err(PlanError::TraceNotRead(_))));
    }

    #[test]
    fn figures_skipped_in_planning_are_the_planners_when_predicted_later() {
        let inputs = PlanInputs::demo(&[DEFAULT_GPU_MODEL]).unwrap();
        let recorded = plan(&PlanRequest::new(&inputs)).unwrap().plan;
        assert!(recorded.services.iter().all(|report| report.tolerance.is_some() && report.busiest_load.is_some()));
        // A margin other than the default: later the plan's own is used.
        let margin = Some(0.03);
        let recorded = plan(&PlanRequest { margin, ..PlanRequest::new(&inputs) }).unwrap().plan;
        let skipped = plan(&PlanRequest { margin, figures: false, ..PlanRequest::new(&inputs) }).unwrap().plan;
        assert!(skipped.services.iter().all(|report| report.met && report.predicted_attainment.is_none()));
        assert!(skipped.services.iter().all(|report| report.tolerance.is_none() && report.busiest_load.is_none()));
        let later = with_figures(&inputs, skipped).unwrap();
        assert_eq!(later, recorded);
    }

    #[test]
    fn the_margin_defaults_by_rule_and_needs_capacities() {
        let inputs = PlanInputs::demo(&[DEFAULT_GPU_MODEL]).unwrap();
        let margin =
            |options: PlanOptions| PlanRequest::from_options(&options, &inputs, None).unwrap().resolved_margin();
        assert_eq!(margin(PlanOptions::default()), Ok(crate::latency::DEFAULT_MARGIN));
        let parva = PlanOptions { latency_rule: Some(LatencyRule::Parva), ..PlanOptions::default() };
        assert_eq!(margin(parva.clone()), Ok(0.0), "the parva rule takes no margin");
        let asked = PlanOptions { margin: Some(0.05), ..parva };
        assert_eq!(margin(asked), Err(PlanError::MarginNeedsPercentile { rule: "parva" }));
    }

    #[test]
    fn a_cancelled_request_answers_no_plan() {
        let inputs = PlanInputs::demo(&[DEFAULT_GPU_MODEL]).unwrap();
        let cancel = Cancel::new();
        let request = PlanRequest { cancel: Some(&cancel), ..PlanRequest::new(&inputs) };
        assert!(plan(&request).is_ok());
        cancel.cancel();
        assert_eq!(plan(&request).err(), Some(PlanError::Cancelled));
    }

    #[test]
    fn planning_stops_soon_after_it_is_cancelled() {
        // 400 services with as many SLOs: seconds of the serving model's
        // capacities before any search, which the time limit does not bound.
        let models = ["bert-base", "gpt2", "mobilenetv2", "resnet50", "vit-b16"];
        let services: Vec<tessera_core::ServiceSlo> = (0..400u32)
            .map(|k| {
                let slo = 150.0 + 5.0 * f64::from(k);
                let model = models[k as usize % models.len()];
                tessera_core::ServiceSlo::new(format!("tenant-{k}"), model, 50.0 + f64::from(k), slo).unwrap()
            })
            .collect();
        let catalog = tessera_core::synthetic::builtin_catalog();
        let inputs = PlanInputs::new(services, catalog, crate::ProfileOrigin::Synthetic, &[DEFAULT_GPU_MODEL]).unwrap();
        let cancel = Cancel::new();
        let started = Instant::now();
        let planned = std::thread::scope(|scope| {
            let planning = scope.spawn(|| plan(&PlanRequest { cancel: Some(&cancel), ..PlanRequest::new(&inputs) }));
            std::thread::sleep(Duration::from_millis(20));
            cancel.cancel();
            planning.join().unwrap()
        });
        assert_eq!(planned.err(), Some(PlanError::Cancelled), "after {:?}", started.elapsed());
    }
}
