//! A simulated day: the controller run over a traffic curve, one decision
//! per interval, against two baselines on the same traffic, each measured
//! with the request-level simulator.
//!
//! At every decision time `t` (0, the interval, twice the interval, …,
//! before the day's end) the controller observes each service's mean rate
//! over the interval that just ended (at 0: the rates at 0), as a rate
//! query over a metrics source would. The first plan runs from the start
//! of the day at no cost; every later change of plan is a timed
//! [`Transition`](crate::Transition) (`timeline`: make before break, both
//! plans' GPUs held while it runs). The baselines:
//!
//! * **static peak** — one plan for the whole day, made for each service's
//!   highest rate of the day (known in advance: a generous baseline), with
//!   no headroom;
//! * **scratch** — a fresh plan at every decision for the same forecast and
//!   headroom as the autopilot, its GPUs numbered and its segments seated
//!   to match the running plan (`align_to`, `reseat`), so only what must
//!   change changes; it too waits for a running transition to end.
//!
//! `measure` turns each strategy's day into figures; `report` sums them.

mod measure;
mod report;
mod timeline;

use tessera_plan::{align_to, reseat, PlanInputs};
use tessera_serving::ArrivalModel;

use crate::controller::{Action, Controller, ControllerConfig, Observation, RateSample};
use crate::error::AutopilotError;
use crate::forecast::Forecaster;
use crate::planner::{PlanSettings, Planner};
use crate::transition::Transition;
use tessera_core::{CoreError, Plan, TrafficCurve};
use timeline::Timeline;

pub use measure::{
    Sampling, DEFAULT_MAX_REQUESTS, DEFAULT_WARMUP_S, DEFAULT_WINDOW_S, FULL_WINDOW_LOAD, MIN_WINDOW_BATCHES,
    MODEL_BELOW_LOAD,
};
pub use report::{DayReport, GpuStep, HourRow, ServiceDay, StrategyDay, Tally};

/// Default seconds between decisions (one minute: a burst is met a minute
/// or two after it starts).
pub const DEFAULT_INTERVAL_S: f64 = 60.0;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct DayRequest<'a> {
    /// The services (their SLOs and models) and profiles.
    pub inputs: &'a PlanInputs,
    /// How plans are made.
    pub settings: PlanSettings,
    /// How the controller decides.
    pub controller: ControllerConfig,
    /// The traffic, for the inputs' services in their order.
    pub traffic: &'a TrafficCurve,
    /// Hours to simulate.
    pub hours: f64,
    /// Seconds between decisions.
    pub interval_s: f64,
    /// How each piece of the day is measured.
    pub sampling: Sampling,
    /// How each service's requests arrive in the measurement, where they
    /// arrive otherwise than plans are made for (in the services' order;
    /// `None`, or an empty list for every service: as plans are made for).
    pub arrivals_by_service: Vec<Option<ArrivalModel>>,
}

/// Where a simulated day is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DayProgress {
    /// Deciding: decisions made (autopilot and scratch), of all.
    Deciding {
        /// Done.
        done: usize,
        /// In all.
        total: usize,
    },
    /// Measuring: pieces simulated, of all.
    Measuring {
        /// Done.
        done: usize,
        /// In all.
        total: usize,
    },
}

impl DayRequest<'_> {
    /// Checks the request, naming the first problem.
    pub fn validate(&self) -> Result<(), AutopilotError> {
        if !(self.hours.is_finite() && self.hours > 0.0 && self.hours <= 24.0 * 366.0) {
            return Err(AutopilotError::invalid("hours", format!("{} is not in (0, a year]", self.hours)));
        }
        if !(self.interval_s.is_finite() && self.interval_s >= 1.0 && self.interval_s <= self.hours * 3600.0) {
            return Err(AutopilotError::invalid(
                "interval_s",
                format!("{} s is not between 1 s and the {} h simulated", self.interval_s, self.hours),
            ));
        }
        self.sampling.validate()?;
        self.controller.validate()?;
        let names: Vec<&str> = self.inputs.services().iter().map(|slo| slo.service.as_str()).collect();
        if !self.arrivals_by_service.is_empty() && self.arrivals_by_service.len() != names.len() {
            return Err(AutopilotError::invalid(
                "arrivals_by_service",
                format!("{} models for {} services", self.arrivals_by_service.len(), names.len()),
            ));
        }
        for (model, service) in self.arrivals_by_service.iter().zip(&names) {
            let Some(model) = model else { continue };
            model.validate()?;
            if self.settings.options.share.is_some() && *model != ArrivalModel::Poisson {
                return Err(AutopilotError::invalid(
                    "arrivals_by_service",
                    format!("{service} arrives as {model}: shared instances are measured under Poisson arrivals only"),
                ));
            }
        }
        if self.traffic.services() != names.as_slice() {
            return Err(AutopilotError::Traffic(CoreError::Traffic {
                index: None,
                field: "service",
                message: format!(
                    "the traffic is for {} but the services are {}",
                    self.traffic.services().join(", "),
                    names.join(", ")
                ),
            }));
        }
        Ok(())
    }
}

/// Simulates the day of `request` (see the module documentation);
/// `progress` hears how far it is.
pub fn simulate_day(
    request: &DayRequest<'_>,
    progress: &mut dyn FnMut(DayProgress),
) -> Result<DayReport, AutopilotError> {
    let planner = Planner::new(request.inputs.clone(), request.settings.clone());
    planner.check()?;
    request.validate()?;
    let end_s = request.hours * 3600.0;
    let decisions: Vec<f64> =
        (0..).map(|k| k as f64 * request.interval_s).take_while(|&time_s| time_s < end_s).collect();
    let observed: Vec<Vec<f64>> = decisions
        .iter()
        .map(|&time_s| request.traffic.mean_rates_rps((time_s - request.interval_s).max(0.0), time_s))
        .collect();
    let total = 2 * decisions.len();
    let mut done = 0;
    let mut decided = || {
        done += 1;
        progress(DayProgress::Deciding { done, total });
    };
    let (autopilot, controller) = run_autopilot(request, &decisions, &observed, &mut decided)?;
    let scratch = run_scratch(request, &planner, &decisions, &observed, &mut decided)?;
    let peaks = request.traffic.peak_rates_rps(end_s);
    let static_plan = planner.fresh(&peaks).map_err(|cause| AutopilotError::Plan {
        what: "for each service's peak rate".to_string(),
        cause: Box::new(cause),
    })?;
    let static_peak = Timeline::new(&static_plan, end_s);
    let hours = request.hours.ceil() as usize;
    let timelines = [&autopilot, &static_peak, &scratch];
    let total: usize = timelines.iter().map(|timeline| measure::piece_count(timeline, request.traffic)).sum();
    let mut done = 0;
    progress(DayProgress::Measuring { done, total });
    let mut measured = Vec::new();
    for timeline in timelines {
        let arrivals = (&request.sampling, request.arrivals_by_service.as_slice());
        measured.push(measure::measure(&planner, timeline, request.traffic, arrivals, hours, &mut || {
            done += 1;
            progress(DayProgress::Measuring { done, total });
        })?);
    }
    let names: Vec<String> = request.traffic.services().to_vec();
    let demand_rps = (0..hours)
        .map(|hour| {
            let from_s = hour as f64 * 3600.0;
            request.traffic.mean_rates_rps(from_s, (from_s + 3600.0).min(end_s)).iter().sum()
        })
        .collect();
    Ok(DayReport {
        hours: request.hours,
        interval_s: request.interval_s,
        sampling: request.sampling,
        controller: request.controller,
        autopilot: report::strategy_day(&names, &autopilot, &measured[0]),
        static_peak: report::strategy_day(&names, &static_peak, &measured[1]),
        scratch: report::strategy_day(&names, &scratch, &measured[2]),
        demand_rps,
        journal: controller.journal().to_vec(),
        forecast: controller.forecast_accuracy(),
        pieces_simulated: measured.iter().map(|m| m.pieces).sum(),
        requests_simulated: measured.iter().map(|m| m.requests_simulated).sum(),
        services_modelled: measured.iter().map(|m| m.services_modelled).sum(),
        services_reused: measured.iter().map(|m| m.services_reused).sum(),
    })
}

/// The autopilot's day, and the controller that ran it.
fn run_autopilot(
    request: &DayRequest<'_>,
    decisions: &[f64],
    observed: &[Vec<f64>],
    decided: &mut dyn FnMut(),
) -> Result<(Timeline, Controller), AutopilotError> {
    let end_s = request.hours * 3600.0;
    let mut controller = Controller::new(request.inputs.clone(), request.settings.clone(), request.controller, None)?;
    let mut timeline: Option<Timeline> = None;
    // The plan that runs, as the timeline has it.
    let mut running: Option<Plan> = None;
    for (&time_s, rates) in decisions.iter().zip(observed) {
        let samples = rates.iter().map(|&rate_rps| Some(RateSample { rate_rps, observed_at_s: time_s })).collect();
        let decision = controller.observe(&Observation { time_s, samples });
        match (&decision.action, &mut timeline, &mut running) {
            (Action::Start(plan), None, running) => {
                timeline = Some(Timeline::new(plan, end_s));
                *running = Some(plan.clone());
            }
            (Action::ScaleUp(change) | Action::ScaleDown(change), Some(timeline), Some(old)) => {
                timeline.reconfigure(time_s, old, &change.plan, &change.transition);
                *old = change.plan.clone();
            }
            (_, None, _) => {
                return Err(AutopilotError::invalid(
                    "traffic",
                    format!("the autopilot has no plan at {time_s} s: {}", decision.reason),
                ))
            }
            _ => {}
        }
        decided();
    }
    let timeline = timeline.ok_or_else(|| AutopilotError::invalid("hours", "no decision was made"))?;
    Ok((timeline, controller))
}

/// The scratch baseline's day.
fn run_scratch(
    request: &DayRequest<'_>,
    planner: &Planner,
    decisions: &[f64],
    observed: &[Vec<f64>],
    decided: &mut dyn FnMut(),
) -> Result<Timeline, AutopilotError> {
    let end_s = request.hours * 3600.0;
    let headroom = 1.0 + request.controller.plan_headroom;
    let mut forecaster = Forecaster::new(planner.services().len(), request.controller.forecast)?;
    let mut running = None;
    let mut timeline: Option<Timeline> = None;
    let mut busy_until_s = f64::NEG_INFINITY;
    for (&time_s, rates) in decisions.iter().zip(observed) {
        forecaster.observe(rates);
        decided();
        if time_s < busy_until_s {
            continue;
        }
        let plan_rps: Vec<f64> = forecaster.forecast().iter().map(|rate| rate * headroom).collect();
        let fresh = planner.fresh(&plan_rps).map_err(|cause| AutopilotError::Plan {
            what: format!("from scratch at {time_s} s"),
            cause: Box::new(cause),
        })?;
        match (&running, &mut timeline) {
            (Some(old), Some(timeline)) => {
                let new = reseat(old, align_to(old, fresh, &[]));
                let transition = Transition::between(old, &new, &request.controller.reconfiguration);
                if !transition.is_empty() {
                    busy_until_s = timeline.reconfigure(time_s, old, &new, &transition);
                    running = Some(new);
                }
            }
            _ => {
                timeline = Some(Timeline::new(&fresh, end_s));
                running = Some(fresh);
            }
        }
    }
    timeline.ok_or_else(|| AutopilotError::invalid("hours", "no decision was made"))
}
