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
//! `measure` turns each strategy's day into figures, carrying a service's
//! queue from piece to piece where it runs past its throughput
//! (`backlog`); `report` sums them.
//!
//! **Side by side.** The autopilot and the scratch baseline decide on
//! two threads (neither depends on the other's decisions); then the three
//! days are measured at once, each measure spreading its groups over
//! rayon's pool. What a strategy measures does not depend on which thread
//! runs it, or when. A thread that fails stops the others at their next
//! step; the day's error is the failure.

mod backlog;
mod groups;
mod measure;
mod report;
mod timeline;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use rayon::prelude::*;

use tessera_plan::{align_to, reseat, PlanInputs};
use tessera_serving::analytic::AttainmentCache;
use tessera_serving::ArrivalModel;

use crate::controller::{Action, Controller, ControllerConfig, Observation, RateSample};
use crate::error::AutopilotError;
use crate::forecast::Forecaster;
use crate::planner::{PlanSettings, Planner};
use crate::transition::Transition;
use tessera_core::{CoreError, TrafficCurve};
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
    /// Deciding: the autopilot and the scratch baseline decide at once,
    /// each on its own thread.
    Deciding {
        /// Decisions the autopilot made.
        autopilot: usize,
        /// Decisions the scratch baseline made.
        scratch: usize,
        /// Decisions each makes in all.
        each: usize,
    },
    /// Measuring: pieces simulated, of all (the three strategies' days
    /// are measured at once).
    Measuring {
        /// Done.
        done: usize,
        /// In all.
        total: usize,
    },
}

/// One step of a day's work, as a worker thread reports it.
enum Step {
    /// The autopilot decided once.
    Autopilot,
    /// The scratch baseline decided once.
    Scratch,
    /// A strategy's day is decided and cut into this many pieces.
    Pieces(usize),
    /// A piece was measured.
    Piece,
}

/// Relays the [`Step`]s of a day's work to `progress` as two phases:
/// deciding, then measuring once every strategy's pieces are known.
struct Relay<'p> {
    progress: &'p mut dyn FnMut(DayProgress),
    /// Decisions each strategy makes.
    each: usize,
    autopilot: usize,
    scratch: usize,
    /// Strategies whose pieces are known, and their pieces in all.
    cut: usize,
    total: usize,
    done: usize,
}

impl Relay<'_> {
    fn hear(&mut self, step: Step) {
        match step {
            Step::Autopilot => self.autopilot += 1,
            Step::Scratch => self.scratch += 1,
            Step::Pieces(pieces) => (self.cut, self.total) = (self.cut + 1, self.total + pieces),
            Step::Piece => self.done += 1,
        }
        let (autopilot, scratch, each) = (self.autopilot, self.scratch, self.each);
        match (self.cut, &step) {
            (STRATEGIES, Step::Piece | Step::Pieces(_)) => {
                (self.progress)(DayProgress::Measuring { done: self.done, total: self.total })
            }
            (_, Step::Autopilot | Step::Scratch) => (self.progress)(DayProgress::Deciding { autopilot, scratch, each }),
            _ => {}
        }
    }
}

/// What `thread` returned; its panic is the caller's.
fn joined<T>(thread: std::thread::ScopedJoinHandle<'_, T>) -> T {
    thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The strategies of a day: the autopilot, static peak and scratch.
const STRATEGIES: usize = 3;

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
    let peaks = request.traffic.peak_rates_rps(end_s);
    let hours = request.hours.ceil() as usize;
    let model = AttainmentCache::new();
    let measuring = measure::Measuring {
        sampling: &request.sampling,
        arrivals_by_service: &request.arrivals_by_service,
        model: &model,
    };
    // Set when a thread fails: the other stops at its next step.
    let failed = &AtomicBool::new(false);
    let go_on = |steps: &mpsc::Sender<Step>, step: Step| {
        let _ = steps.send(step);
        !failed.load(Ordering::Relaxed)
    };
    let each = decisions.len();
    let (sender, steps) = mpsc::channel();
    let work = move || -> Result<_, AutopilotError> {
        let steps = &sender;
        // The autopilot and the scratch baseline decide side by side.
        let (autopilot, baselines) = std::thread::scope(|scope| {
            let baselines = scope.spawn(|| {
                let decided = &mut || go_on(steps, Step::Scratch);
                let scratch = run_scratch(request, &planner, &decisions, &observed, decided);
                let static_plan = planner.fresh(&peaks).map_err(|cause| AutopilotError::Plan {
                    what: "for each service's peak rate".to_string(),
                    cause: Box::new(cause),
                });
                let outcome = scratch.map(|scratch| scratch.map(|scratch| (scratch, static_plan)));
                outcome.inspect_err(|_| failed.store(true, Ordering::Relaxed))
            });
            let decided = &mut || go_on(steps, Step::Autopilot);
            let autopilot = run_autopilot(request, &decisions, &observed, decided)
                .inspect_err(|_| failed.store(true, Ordering::Relaxed));
            (autopilot, joined(baselines))
        });
        // A thread stops early only when the other failed: its error is
        // the day's.
        let (Some((autopilot, controller)), Some((scratch, static_plan))) = (autopilot?, baselines?) else {
            unreachable!("a day's thread stopped early while the other succeeded")
        };
        let static_peak = Timeline::new(&static_plan?, end_s);
        // Then the three days are measured at once; each measure is the
        // same whichever thread runs it.
        let timelines = [&autopilot, &static_peak, &scratch];
        for timeline in timelines {
            let _ = steps.send(Step::Pieces(measure::piece_count(timeline, request.traffic)));
        }
        let measured: Vec<Option<measure::Measured>> = timelines
            .par_iter()
            .map(|timeline| {
                let step = &mut || go_on(steps, Step::Piece);
                let measured = measure::measure(&planner, timeline, request.traffic, measuring, hours, step);
                measured.inspect_err(|_| failed.store(true, Ordering::Relaxed))
            })
            .collect::<Result<_, _>>()?;
        // In the timelines' order: the autopilot, static peak, scratch.
        let Some(measured) = measured.into_iter().collect::<Option<Vec<_>>>() else {
            unreachable!("a measure stopped early while none failed")
        };
        Ok((autopilot, controller, static_peak, scratch, measured))
    };
    let (autopilot, controller, static_peak, scratch, measured) = std::thread::scope(|scope| {
        let worker = scope.spawn(work);
        let mut relay = Relay { progress, each, autopilot: 0, scratch: 0, cut: 0, total: 0, done: 0 };
        // The channel closes when the work is done.
        steps.into_iter().for_each(|step| relay.hear(step));
        joined(worker)
    })?;
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
        model_evaluations: model.evaluations(),
        services_reused: measured.iter().map(|m| m.services_reused).sum(),
        services_backlogged: measured.iter().map(|m| m.services_backlogged).sum(),
    })
}

/// The autopilot's day, and the controller that ran it; `decided` is
/// called after each decision and answers whether to go on (`None`: it
/// said stop).
fn run_autopilot(
    request: &DayRequest<'_>,
    decisions: &[f64],
    observed: &[Vec<f64>],
    decided: &mut dyn FnMut() -> bool,
) -> Result<Option<(Timeline, Controller)>, AutopilotError> {
    let end_s = request.hours * 3600.0;
    let mut controller = Controller::new(request.inputs.clone(), request.settings.clone(), request.controller, None)?;
    let mut timeline: Option<Timeline> = None;
    for (&time_s, rates) in decisions.iter().zip(observed) {
        let samples = rates.iter().map(|&rate_rps| Some(RateSample { rate_rps, observed_at_s: time_s })).collect();
        let decision = controller.observe(&Observation { time_s, samples });
        match (&decision.action, &mut timeline) {
            (Action::Start(plan), None) => timeline = Some(Timeline::new(plan, end_s)),
            (Action::ScaleUp(change) | Action::ScaleDown(change), Some(timeline)) => {
                timeline.reconfigure(time_s, &change.plan, &change.transition);
            }
            (_, None) => {
                return Err(AutopilotError::invalid(
                    "traffic",
                    format!("the autopilot has no plan at {time_s} s: {}", decision.reason),
                ))
            }
            _ => {}
        }
        if !decided() {
            return Ok(None);
        }
    }
    let timeline = timeline.ok_or_else(|| AutopilotError::invalid("hours", "no decision was made"))?;
    Ok(Some((timeline, controller)))
}

/// The scratch baseline's day; `decided` as for [`run_autopilot`].
fn run_scratch(
    request: &DayRequest<'_>,
    planner: &Planner,
    decisions: &[f64],
    observed: &[Vec<f64>],
    decided: &mut dyn FnMut() -> bool,
) -> Result<Option<Timeline>, AutopilotError> {
    let end_s = request.hours * 3600.0;
    let headroom = 1.0 + request.controller.plan_headroom;
    let mut forecaster = Forecaster::new(planner.services().len(), request.controller.forecast)?;
    let mut running = None;
    let mut timeline: Option<Timeline> = None;
    let mut busy_until_s = f64::NEG_INFINITY;
    for (&time_s, rates) in decisions.iter().zip(observed) {
        forecaster.observe(rates);
        if !decided() {
            return Ok(None);
        }
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
                    busy_until_s = timeline.reconfigure(time_s, &new, &transition);
                    running = Some(new);
                }
            }
            _ => {
                timeline = Some(Timeline::new(&fresh, end_s));
                running = Some(fresh);
            }
        }
    }
    timeline.ok_or_else(|| AutopilotError::invalid("hours", "no decision was made")).map(Some)
}
