//! The controller: a state machine fed each service's observed rate, one
//! observation per decision interval, answering what to do with the plan
//! that runs, and why.
//!
//! Its rules, in the order they are tried:
//!
//! 1. **Metrics first.** An observation with a service's rate missing, not
//!    a rate, or older than [`ControllerConfig::max_sample_age_s`] changes
//!    nothing: the controller holds the plan and names the services.
//! 2. **One transition at a time.** While the last reconfiguration is
//!    still running (by the [`Transition`]'s timing), it holds.
//! 3. **Keep while the plan holds.** The plan is kept while the serving
//!    model predicts every service's share of requests within its SLO at
//!    its forecast rate times `1 + keep_headroom` to reach its percentile.
//! 4. **Scale up early.** When a service falls short there, the controller
//!    replans from the running plan (the fewest reconfigurations, within
//!    `max_extra_gpus` of the fresh optimum) for the forecast times
//!    `1 + plan_headroom`, every service at no less than its capacity in
//!    the running plan (a scale-up takes capacity from none: scaling down
//!    is rule 5's).
//! 5. **Scale down late.** Otherwise, when a replan for the forecast times
//!    `1 + plan_headroom` would release at least `scale_down_min_gpus` GPUs
//!    when first tried, a cheap estimate (each service's share of GPUs
//!    scaled by its forecast over its capacity) says so at every decision
//!    for `scale_down_hold_s`, and a replan then still does, the
//!    controller takes it.
//! 6. **No dip.** A transition dips when, while one of its steps runs, a
//!    service has less capacity than both its forecast times
//!    `1 + keep_headroom` and its capacity before. A scale-up that dips is
//!    tried again with room to keep every running GPU and add up to
//!    `dip_extra_gpus`, then as the running plan untouched with GPUs added
//!    for what each service lacks (more GPUs for a while: a later
//!    scale-down consolidates them), and goes ahead with a dip only when
//!    all of these dip. A scale-down that dips is tried releasing up to
//!    `dip_extra_gpus` fewer GPUs (at least `scale_down_min_gpus`), else it
//!    waits.
//! 7. **Rate limit.** At most `max_reconfigurations_per_hour`
//!    reconfigurations start in any hour; beyond, it holds and says so.
//!
//! Every decision is journaled with its reason. A decision to reconfigure
//! takes effect at once in the controller (the plan it returns is the one
//! it then considers running); a caller whose apply failed says what runs
//! with [`Controller::adopt`].

use std::collections::VecDeque;

use serde::Serialize;
use tessera_core::text::count;
use tessera_core::{GpuAssignment, Plan, ServiceSlo};
use tessera_plan::{PlanError, PlanInputs};

use crate::error::AutopilotError;
use crate::forecast::{ForecastAccuracy, ForecastConfig, Forecaster};
use crate::planner::{PlanSettings, Planner};
use crate::transition::{ReconfigurationTimes, Transition};

/// Default headroom of a plan over the forecast: plans are made for the
/// forecast times 1.15.
pub const DEFAULT_PLAN_HEADROOM: f64 = 0.15;
/// Default headroom of the keep test: the plan is kept while it is
/// predicted to meet every SLO at the forecast times 1.05.
pub const DEFAULT_KEEP_HEADROOM: f64 = 0.05;
/// Default fewest GPUs a scale-down must release.
pub const DEFAULT_SCALE_DOWN_MIN_GPUS: u64 = 1;
/// Default time a scale-down must have been possible before it is taken,
/// seconds (30 minutes).
pub const DEFAULT_SCALE_DOWN_HOLD_S: f64 = 1800.0;
/// Default most reconfigurations started in any hour.
pub const DEFAULT_MAX_RECONFIGURATIONS_PER_HOUR: usize = 6;
/// Default oldest a rate sample may be, seconds.
pub const DEFAULT_MAX_SAMPLE_AGE_S: f64 = 120.0;
/// Default GPUs a replan may use beyond the fresh optimum.
pub const DEFAULT_MAX_EXTRA_GPUS: u64 = 0;
/// Default GPUs a replan may keep to avoid a dip: a scale-up may keep
/// every running GPU and add this many, a scale-down may release this
/// many fewer.
pub const DEFAULT_DIP_EXTRA_GPUS: u64 = 2;

/// How the controller decides (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ControllerConfig {
    /// Plans are made for the forecast times `1 + plan_headroom`.
    pub plan_headroom: f64,
    /// The plan is kept while predicted to meet every SLO at the forecast
    /// times `1 + keep_headroom` (at most `plan_headroom`).
    pub keep_headroom: f64,
    /// The fewest GPUs a scale-down must release.
    pub scale_down_min_gpus: u64,
    /// How long a scale-down must have been possible before it is taken,
    /// seconds.
    pub scale_down_hold_s: f64,
    /// Most reconfigurations started in any hour.
    pub max_reconfigurations_per_hour: usize,
    /// Oldest a rate sample may be, seconds.
    pub max_sample_age_s: f64,
    /// GPUs a replan may use beyond the fresh optimum.
    pub max_extra_gpus: u64,
    /// GPUs a replan may keep to avoid a dip (see rule 6).
    pub dip_extra_gpus: u64,
    /// How rates are forecast.
    pub forecast: ForecastConfig,
    /// How long reconfigurations take (when the next may start).
    pub reconfiguration: ReconfigurationTimes,
}

impl Default for ControllerConfig {
    /// The documented defaults (the `DEFAULT_*` constants).
    fn default() -> Self {
        ControllerConfig {
            plan_headroom: DEFAULT_PLAN_HEADROOM,
            keep_headroom: DEFAULT_KEEP_HEADROOM,
            scale_down_min_gpus: DEFAULT_SCALE_DOWN_MIN_GPUS,
            scale_down_hold_s: DEFAULT_SCALE_DOWN_HOLD_S,
            max_reconfigurations_per_hour: DEFAULT_MAX_RECONFIGURATIONS_PER_HOUR,
            max_sample_age_s: DEFAULT_MAX_SAMPLE_AGE_S,
            max_extra_gpus: DEFAULT_MAX_EXTRA_GPUS,
            dip_extra_gpus: DEFAULT_DIP_EXTRA_GPUS,
            forecast: ForecastConfig::default(),
            reconfiguration: ReconfigurationTimes::default(),
        }
    }
}

impl ControllerConfig {
    /// Checks the configuration, naming the first field out of range.
    pub fn validate(&self) -> Result<(), AutopilotError> {
        if !(self.plan_headroom.is_finite() && self.plan_headroom >= 0.0) {
            return Err(AutopilotError::invalid(
                "plan_headroom",
                format!("{} is not a finite share of 0 or more", self.plan_headroom),
            ));
        }
        if !(self.keep_headroom >= 0.0 && self.keep_headroom <= self.plan_headroom) {
            return Err(AutopilotError::invalid(
                "keep_headroom",
                format!(
                    "{} is not in [0, {}] (a plan must pass the keep test at the rates it is made for)",
                    self.keep_headroom, self.plan_headroom
                ),
            ));
        }
        if self.scale_down_min_gpus == 0 {
            return Err(AutopilotError::invalid("scale_down_min_gpus", "a scale-down must release a GPU at least"));
        }
        for (field, value) in
            [("scale_down_hold_s", self.scale_down_hold_s), ("max_sample_age_s", self.max_sample_age_s)]
        {
            if !(value.is_finite() && value >= 0.0) {
                return Err(AutopilotError::invalid(field, format!("{value} is not a duration of 0 s or more")));
            }
        }
        if self.max_reconfigurations_per_hour == 0 {
            return Err(AutopilotError::invalid(
                "max_reconfigurations_per_hour",
                "at least one reconfiguration per hour is needed to follow traffic",
            ));
        }
        self.forecast.validate()?;
        self.reconfiguration.validate()
    }
}

/// One service's rate as a metrics source reported it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RateSample {
    /// The rate over the last interval, requests per second.
    pub rate_rps: f64,
    /// When it was measured, on the controller's clock (seconds).
    pub observed_at_s: f64,
}

/// What the controller is told at one decision time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    /// Now, seconds (non-decreasing from one observation to the next).
    pub time_s: f64,
    /// Each service's latest sample, in [`Controller::services`]' order;
    /// `None` when the metrics source has none.
    pub samples: Vec<Option<RateSample>>,
}

/// A change of plan the controller decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconfiguration {
    /// The new plan.
    pub plan: Plan,
    /// The way there from the running plan, timed.
    pub transition: Transition,
    /// GPUs of the fresh optimum at the same rates.
    pub fresh_gpus: usize,
}

/// What the controller decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// No plan ran: the first plan, made from scratch.
    Start(Plan),
    /// The running plan holds: nothing to do.
    Keep,
    /// Nothing is done although something might be needed: metrics are
    /// missing or stale, a transition is running, the rate limit is
    /// reached, or planning failed (the reason says which).
    Hold,
    /// More capacity: replanned from the running plan.
    ScaleUp(Reconfiguration),
    /// Less capacity: replanned from the running plan.
    ScaleDown(Reconfiguration),
}

impl Action {
    /// The kind of action, for the journal.
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::Start(_) => ActionKind::Start,
            Action::Keep => ActionKind::Keep,
            Action::Hold => ActionKind::Hold,
            Action::ScaleUp(_) => ActionKind::ScaleUp,
            Action::ScaleDown(_) => ActionKind::ScaleDown,
        }
    }
}

/// The kinds of [`Action`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// [`Action::Start`].
    Start,
    /// [`Action::Keep`].
    Keep,
    /// [`Action::Hold`].
    Hold,
    /// [`Action::ScaleUp`].
    ScaleUp,
    /// [`Action::ScaleDown`].
    ScaleDown,
}

impl ActionKind {
    /// Its name in tables, e.g. `scale up`.
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::Start => "start",
            ActionKind::Keep => "keep",
            ActionKind::Hold => "hold",
            ActionKind::ScaleUp => "scale up",
            ActionKind::ScaleDown => "scale down",
        }
    }
}

/// A decision: what to do, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// When it was made, seconds.
    pub time_s: f64,
    /// What to do.
    pub action: Action,
    /// Why, in words.
    pub reason: String,
}

/// A decision as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JournalEntry {
    /// When it was made, seconds.
    pub time_s: f64,
    /// What was decided.
    pub action: ActionKind,
    /// Why.
    pub reason: String,
    /// GPUs of the plan running after it (0 before the first plan).
    pub gpus: usize,
    /// GPUs whose MIG layout it changes (created, changed or torn down).
    pub gpus_reconfigured: usize,
    /// MPS processes it starts.
    pub processes_started: u64,
    /// Seconds its transition takes.
    pub transition_s: f64,
}

/// A replan the controller may take.
#[derive(Debug, Clone)]
struct Candidate {
    plan: Plan,
    transition: Transition,
    fresh_gpus: usize,
    /// A service its transition leaves below its forecast, in words.
    dip: Option<String>,
}

/// The controller (see the module documentation).
#[derive(Debug, Clone)]
pub struct Controller {
    planner: Planner,
    config: ControllerConfig,
    forecaster: Forecaster,
    plan: Option<Plan>,
    /// When the last transition ends.
    busy_until_s: f64,
    /// Since when a scale-down has been possible at every decision.
    down_since_s: Option<f64>,
    /// When the reconfigurations of the last hour started.
    recent_s: VecDeque<f64>,
    last_time_s: Option<f64>,
    journal: Vec<JournalEntry>,
}

impl Controller {
    /// A controller of `inputs`' services (their rates are replaced by the
    /// observed ones) planning under `settings` and deciding under
    /// `config`, with the plan that runs now, if any.
    pub fn new(
        inputs: PlanInputs,
        settings: PlanSettings,
        config: ControllerConfig,
        running: Option<Plan>,
    ) -> Result<Controller, AutopilotError> {
        config.validate()?;
        let forecaster = Forecaster::new(inputs.services().len(), config.forecast)?;
        Ok(Controller {
            planner: Planner::new(inputs, settings),
            config,
            forecaster,
            plan: running,
            busy_until_s: f64::NEG_INFINITY,
            down_since_s: None,
            recent_s: VecDeque::new(),
            last_time_s: None,
            journal: Vec::new(),
        })
    }

    /// The services, in the order observations give their rates.
    pub fn services(&self) -> &[ServiceSlo] {
        self.planner.services()
    }

    /// The plan the controller considers running.
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    /// Tells the controller which plan runs (e.g. when applying its last
    /// decision failed part-way).
    pub fn adopt(&mut self, plan: Plan) {
        self.plan = Some(plan);
    }

    /// The current forecast, req/s per service.
    pub fn forecast_rps(&self) -> Vec<f64> {
        self.forecaster.forecast()
    }

    /// How far the forecasts were off so far.
    pub fn forecast_accuracy(&self) -> ForecastAccuracy {
        self.forecaster.accuracy()
    }

    /// Every decision so far, oldest first.
    pub fn journal(&self) -> &[JournalEntry] {
        &self.journal
    }

    /// The configuration.
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// Decides what to do at `observation` (see the module documentation),
    /// and journals it.
    pub fn observe(&mut self, observation: &Observation) -> Decision {
        let time_s = observation.time_s;
        let rates = self.rates_of(observation);
        if time_s.is_finite() && self.last_time_s.is_none_or(|last| time_s >= last) {
            self.last_time_s = Some(time_s);
        }
        let (action, reason) = match rates {
            Err(reason) => (Action::Hold, reason),
            Ok(rates_rps) => {
                self.forecaster.observe(&rates_rps);
                self.decide(time_s)
            }
        };
        let gpus = self.plan.as_ref().map_or(0, |plan| plan.gpu_count);
        let (gpus_reconfigured, processes_started, transition_s) = match &action {
            Action::ScaleUp(change) | Action::ScaleDown(change) => (
                change.transition.totals.gpus_reconfigured(),
                change.transition.totals.processes_restarted,
                change.transition.duration_s(),
            ),
            _ => (0, 0, 0.0),
        };
        self.journal.push(JournalEntry {
            time_s,
            action: action.kind(),
            reason: reason.clone(),
            gpus,
            gpus_reconfigured,
            processes_started,
            transition_s,
        });
        Decision { time_s, action, reason }
    }

    /// The observed rates, or why they cannot be used.
    fn rates_of(&self, observation: &Observation) -> Result<Vec<f64>, String> {
        let time_s = observation.time_s;
        if !time_s.is_finite() || self.last_time_s.is_some_and(|last| time_s < last) {
            return Err(format!(
                "holding: observation time {time_s} s is not after the previous one ({} s)",
                self.last_time_s.unwrap_or(f64::NAN)
            ));
        }
        let services = self.services();
        if observation.samples.len() != services.len() {
            return Err(format!(
                "holding: {} for {}",
                count(observation.samples.len(), "rate sample"),
                count(services.len(), "service")
            ));
        }
        let (mut missing, mut stale, mut invalid) = (Vec::new(), Vec::new(), Vec::new());
        let mut rates_rps = Vec::with_capacity(services.len());
        for (slo, sample) in services.iter().zip(&observation.samples) {
            match sample {
                None => missing.push(slo.service.as_str()),
                Some(sample) if !(sample.rate_rps.is_finite() && sample.rate_rps >= 0.0) => {
                    invalid.push(format!("{} ({})", slo.service, sample.rate_rps));
                }
                Some(sample) if stale_at(sample, time_s, self.config.max_sample_age_s) => {
                    stale.push(format!("{} ({:.0} s old)", slo.service, time_s - sample.observed_at_s));
                }
                Some(sample) => rates_rps.push(sample.rate_rps),
            }
        }
        let mut faults = Vec::new();
        if !missing.is_empty() {
            faults.push(format!("no rate for {}", missing.join(", ")));
        }
        if !stale.is_empty() {
            faults.push(format!(
                "stale rates (older than {} s) for {}",
                self.config.max_sample_age_s,
                stale.join(", ")
            ));
        }
        if !invalid.is_empty() {
            faults.push(format!("no valid rate for {}", invalid.join(", ")));
        }
        if faults.is_empty() {
            Ok(rates_rps)
        } else {
            Err(format!("holding the plan: {}", faults.join("; ")))
        }
    }

    /// The decision on a fresh forecast.
    fn decide(&mut self, time_s: f64) -> (Action, String) {
        let forecast_rps = self.forecaster.forecast();
        let plan_rps = scaled(&forecast_rps, 1.0 + self.config.plan_headroom);
        let Some(running) = self.plan.clone() else {
            return match self.planner.fresh(&plan_rps) {
                Ok(plan) => {
                    let reason = format!(
                        "no plan ran: planned from scratch for the forecast +{:.0}%: {}",
                        self.config.plan_headroom * 100.0,
                        count(plan.gpu_count, "GPU")
                    );
                    self.plan = Some(plan.clone());
                    (Action::Start(plan), reason)
                }
                Err(error) => (Action::Hold, format!("holding: no plan runs and planning failed: {error}")),
            };
        };
        if time_s < self.busy_until_s {
            return (Action::Hold, format!("holding: a transition runs until {:.0} s", self.busy_until_s));
        }
        let keep_rps = scaled(&forecast_rps, 1.0 + self.config.keep_headroom);
        let attainment = match self.planner.predicted_attainment(&running, &keep_rps) {
            Ok(attainment) => attainment,
            Err(error) => return (Action::Hold, format!("holding: the serving model cannot judge the plan: {error}")),
        };
        let short: Vec<String> = self
            .services()
            .iter()
            .zip(&attainment)
            .zip(&keep_rps)
            .filter(|((slo, &predicted), _)| predicted < slo.percentile / 100.0)
            .map(|((slo, predicted), rate)| {
                format!("{} at {rate:.1} req/s: {:.2}% < {}%", slo.service, predicted * 100.0, slo.percentile)
            })
            .collect();
        if short.is_empty() {
            return self.consider_scale_down(time_s, &running, &plan_rps, &keep_rps);
        }
        self.down_since_s = None;
        let why = format!(
            "predicted within SLO at the forecast +{:.0}%: {}",
            self.config.keep_headroom * 100.0,
            short.join("; ")
        );
        if let Some(limit) = self.rate_limited(time_s) {
            return (Action::Hold, format!("holding although {why}: {limit}"));
        }
        // No service gives up capacity in a scale-up: the replan has no
        // segment to take from one, so its transition stops none it needs.
        let up_rps: Vec<f64> =
            plan_rps.iter().zip(self.capacities_rps(&running)).map(|(rate, capacity)| rate.max(capacity)).collect();
        let candidate = self.scale_up_candidate(&running, &up_rps, &keep_rps);
        match candidate {
            Err(error) => (Action::Hold, format!("holding although {why}: the replan failed: {error}")),
            Ok(candidate) if candidate.transition.is_empty() => {
                (Action::Keep, format!("keeping: {why}, but a replan changes nothing"))
            }
            Ok(candidate) => {
                let dip = candidate.dip.as_ref().map_or(String::new(), |dip| format!("; it dips: {dip}"));
                let reason = format!(
                    "scaling up: {why}; replanned for the forecast +{:.0}%: {}{dip}",
                    self.config.plan_headroom * 100.0,
                    change_words(&running, &candidate)
                );
                (Action::ScaleUp(self.commit(time_s, candidate)), reason)
            }
        }
    }

    /// Every service holds at the forecast: scale down when a replan has
    /// released enough for long enough, else keep.
    fn consider_scale_down(
        &mut self,
        time_s: f64,
        running: &Plan,
        plan_rps: &[f64],
        keep_rps: &[f64],
    ) -> (Action, String) {
        let threshold = self.config.scale_down_min_gpus as usize;
        let holds = format!(
            "keeping: every service predicted within its SLO at the forecast +{:.0}%",
            self.config.keep_headroom * 100.0
        );
        let estimate = self.estimated_gpus(running, plan_rps);
        if (running.gpu_count as f64) - estimate < threshold as f64 {
            self.down_since_s = None;
            return (Action::Keep, format!("{holds}; no scale-down in sight (about {estimate:.1} GPUs needed)"));
        }
        // A replan confirms the estimate when a scale-down first looks
        // possible and when it has for long enough; in between, the
        // estimate alone keeps it possible.
        let waited_s = self.down_since_s.map(|since_s| time_s - since_s);
        if let Some(waited_s) = waited_s.filter(|&waited_s| waited_s < self.config.scale_down_hold_s) {
            return (
                Action::Keep,
                format!(
                    "{holds}; a scale-down to about {estimate:.1} GPUs is possible for {:.0} of {:.0} min",
                    waited_s / 60.0,
                    self.config.scale_down_hold_s / 60.0
                ),
            );
        }
        let candidate = match self.replan_for(running, plan_rps, keep_rps, self.config.max_extra_gpus) {
            Ok(candidate) => candidate,
            Err(error) => {
                self.down_since_s = None;
                return (Action::Keep, format!("{holds}; a scale-down replan failed: {error}"));
            }
        };
        let released = running.gpu_count.saturating_sub(candidate.plan.gpu_count);
        if released < threshold {
            self.down_since_s = None;
            return (Action::Keep, format!("{holds}; a replan would release {}", count(released, "GPU")));
        }
        let Some(waited_s) = waited_s else {
            self.down_since_s = Some(time_s);
            return (
                Action::Keep,
                format!(
                    "{holds}; a replan would release {}: possible from now, taken after {:.0} min",
                    count(released, "GPU"),
                    self.config.scale_down_hold_s / 60.0
                ),
            );
        };
        if let Some(limit) = self.rate_limited(time_s) {
            return (Action::Hold, format!("holding a scale-down of {}: {limit}", count(released, "GPU")));
        }
        let candidate = match candidate.dip.clone() {
            None => candidate,
            Some(dip) => {
                // Releasing fewer GPUs may leave the dipping service alone.
                let fewer = (1..=self.config.dip_extra_gpus)
                    .map(|more| self.replan_for(running, plan_rps, keep_rps, self.config.max_extra_gpus + more))
                    .take_while(|tried| tried.as_ref().is_ok_and(|c| running.gpu_count >= c.plan.gpu_count + threshold))
                    .flatten()
                    .find(|tried| tried.dip.is_none());
                match fewer {
                    Some(fewer) => fewer,
                    None => return (Action::Keep, format!("{holds}; a scale-down would dip ({dip}): waiting")),
                }
            }
        };
        let reason = format!(
            "scaling down: a replan for the forecast +{:.0}% has released at least {} for {:.0} min: {}",
            self.config.plan_headroom * 100.0,
            count(threshold, "GPU"),
            waited_s / 60.0,
            change_words(running, &candidate)
        );
        self.down_since_s = None;
        (Action::ScaleDown(self.commit(time_s, candidate)), reason)
    }

    /// A replan from `running` for `plan_rps` within `extra_gpus` of the
    /// fresh optimum, with its first dip.
    fn replan_for(
        &self,
        running: &Plan,
        plan_rps: &[f64],
        keep_rps: &[f64],
        extra_gpus: u64,
    ) -> Result<Candidate, PlanError> {
        let planned = self.planner.replan(plan_rps, running, extra_gpus)?;
        let fresh_gpus = planned.replan.as_ref().map_or(planned.plan.gpu_count, |c| c.fresh.gpu_count);
        Ok(self.candidate(running, planned.plan, fresh_gpus, keep_rps))
    }

    /// The scale-up to `up_rps`: the replan with the fewest
    /// reconfigurations; if it dips, the replan with room to keep every
    /// running GPU and add up to [`ControllerConfig::dip_extra_gpus`]; if
    /// that dips too, the running plan with GPUs added
    /// ([`Controller::added_to`]); the first without a dip (else the first).
    fn scale_up_candidate(&self, running: &Plan, up_rps: &[f64], keep_rps: &[f64]) -> Result<Candidate, PlanError> {
        let first = self.replan_for(running, up_rps, keep_rps, self.config.max_extra_gpus)?;
        if first.dip.is_none() {
            return Ok(first);
        }
        let room = (running.gpu_count as u64 + self.config.dip_extra_gpus).saturating_sub(first.fresh_gpus as u64);
        if room > self.config.max_extra_gpus {
            if let Ok(wider) = self.replan_for(running, up_rps, keep_rps, room) {
                if wider.dip.is_none() {
                    return Ok(wider);
                }
            }
        }
        Ok(match self.added_to(running, up_rps, keep_rps) {
            Ok(added) if added.dip.is_none() => added,
            _ => first,
        })
    }

    /// `running` with new GPUs for what each service lacks of `up_rps` (a
    /// fresh plan of the shortfalls, numbered after the running GPUs): no
    /// running segment stops. The planner checks the whole (a replan of it
    /// that changes nothing) and reports its services.
    fn added_to(&self, running: &Plan, up_rps: &[f64], keep_rps: &[f64]) -> Result<Candidate, PlanError> {
        let shortfalls: Vec<(usize, f64)> = up_rps
            .iter()
            .zip(self.capacities_rps(running))
            .enumerate()
            .filter(|(_, (&rate, capacity))| rate > *capacity * (1.0 + 1e-9))
            .map(|(index, (rate, capacity))| (index, rate - capacity))
            .collect();
        let extra = self.planner.fresh_for(&shortfalls)?;
        let per_node = running.gpus_per_node.max(1);
        let next = running.gpus.iter().map(|gpu| gpu.node * per_node + gpu.index + 1).max().unwrap_or(0);
        let mut merged = running.clone();
        for (offset, gpu) in (0..).zip(extra.gpus) {
            let global = next + offset;
            merged.gpus.push(GpuAssignment { node: global / per_node, index: global % per_node, ..gpu });
        }
        merged.gpu_count = merged.gpus.len();
        let planned = self.planner.replan(up_rps, &merged, merged.gpu_count as u64)?;
        let fresh_gpus = planned.replan.as_ref().map_or(planned.plan.gpu_count, |c| c.fresh.gpu_count);
        Ok(self.candidate(running, planned.plan, fresh_gpus, keep_rps))
    }

    /// `plan` as a candidate from `running`: its timed transition and its
    /// first dip (a service below its rate in `keep_rps` and below its
    /// capacity in `running` while a step runs).
    fn candidate(&self, running: &Plan, plan: Plan, fresh_gpus: usize, keep_rps: &[f64]) -> Candidate {
        let floor_rps: Vec<f64> =
            keep_rps.iter().zip(self.capacities_rps(running)).map(|(keep, capacity)| keep.min(capacity)).collect();
        let transition = Transition::between(running, &plan, &self.config.reconfiguration);
        let dip = self.dip_below(&transition, &floor_rps);
        Candidate { plan, transition, fresh_gpus, dip }
    }

    /// The first service `transition` leaves below its rate in `floor_rps`
    /// while a step runs, in words.
    fn dip_below(&self, transition: &Transition, floor_rps: &[f64]) -> Option<String> {
        transition.dips().find_map(|dip| {
            let index = self.services().iter().position(|slo| slo.service == dip.service)?;
            (dip.provisioned_rps < floor_rps[index] * (1.0 - 1e-9)).then(|| {
                format!(
                    "{} at {:.1} req/s while a step runs, below its {:.1}",
                    dip.service, dip.provisioned_rps, floor_rps[index]
                )
            })
        })
    }

    /// GPUs `running` would need at `rates_rps`, roughly: each service's
    /// share of its GPUs (compute slices) times its rate over its capacity.
    fn estimated_gpus(&self, running: &Plan, rates_rps: &[f64]) -> f64 {
        let mut gpus = vec![0.0; self.services().len()];
        for gpu in &running.gpus {
            let slices = f64::from(gpu.gpu_model.spec().compute_slices);
            for instance in &gpu.instances {
                if let Some(index) = self.services().iter().position(|slo| slo.service == instance.service) {
                    gpus[index] += f64::from(instance.size) / slices;
                }
            }
        }
        let capacities = self.capacities_rps(running);
        (0..gpus.len())
            .map(|index| match capacities[index] {
                capacity_rps if capacity_rps > 0.0 => gpus[index] * rates_rps[index] / capacity_rps,
                _ => gpus[index],
            })
            .sum()
    }

    /// Each service's capacity in `plan` (req/s, in the services' order).
    fn capacities_rps(&self, plan: &Plan) -> Vec<f64> {
        self.services()
            .iter()
            .map(|slo| {
                let report = plan.services.iter().find(|report| report.service == slo.service);
                report.map_or(0.0, |report| report.provisioned_rps)
            })
            .collect()
    }

    /// Why a reconfiguration may not start now, if the rate limit says so.
    fn rate_limited(&mut self, time_s: f64) -> Option<String> {
        while self.recent_s.front().is_some_and(|&start_s| time_s - start_s >= 3600.0) {
            self.recent_s.pop_front();
        }
        (self.recent_s.len() >= self.config.max_reconfigurations_per_hour).then(|| {
            format!(
                "the rate limit of {} per hour is reached",
                count(self.config.max_reconfigurations_per_hour, "reconfiguration")
            )
        })
    }

    /// Takes `plan` as running from `time_s`, busy for its transition.
    fn commit(&mut self, time_s: f64, candidate: Candidate) -> Reconfiguration {
        let Candidate { plan, transition, fresh_gpus, .. } = candidate;
        self.busy_until_s = time_s + transition.duration_s();
        self.recent_s.push_back(time_s);
        self.plan = Some(plan.clone());
        Reconfiguration { plan, transition, fresh_gpus }
    }
}

/// Whether `sample` is older than `max_age_s` at `time_s` (or of no
/// known age).
fn stale_at(sample: &RateSample, time_s: f64, max_age_s: f64) -> bool {
    let age_s = time_s - sample.observed_at_s;
    age_s.is_nan() || age_s > max_age_s
}

/// Every rate times `factor`.
fn scaled(rates_rps: &[f64], factor: f64) -> Vec<f64> {
    rates_rps.iter().map(|rate| rate * factor).collect()
}

/// A change of plan in words: `6 → 7 GPUs, 1 reconfigured, 2 processes
/// started, 41 s`.
fn change_words(old: &Plan, new: &Candidate) -> String {
    format!(
        "{} → {} (fresh optimum {}), {} reconfigured, {} started, {:.0} s",
        old.gpu_count,
        count(new.plan.gpu_count, "GPU"),
        new.fresh_gpus,
        new.transition.totals.gpus_reconfigured(),
        count(new.transition.totals.processes_restarted, "process"),
        new.transition.duration_s()
    )
}
