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
//!    its forecast rate times `1 + keep_headroom` to reach its percentile,
//!    and, for a plan with a robustness margin, at its forecast with every
//!    batch that margin slower: the plan bears traffic above the forecast
//!    or a GPU slower than profiled, either alone.
//! 4. **Scale up early.** When a service falls short there, the controller
//!    first tries a swap: segments moved within the running MIG instances
//!    (no fresh optimum planned: a swap is cheap) for each short service
//!    as below and every other at what rule 3 asks of it, its forecast
//!    times `1 + keep_headroom` (its capacity if it fell short within
//!    `scale_down_hold_s`), taken when it changes no GPU's MIG layout,
//!    adds no GPU and leaves no service below its swap rate (or its
//!    capacity before, when lower) while a step runs. Instances of
//!    services with spare over what the keep test needs change service,
//!    only processes restart, and the fleet meets a burst or a rise from
//!    the headroom it holds, without growing, or releasing later what it
//!    grew by; a service that gave too much falls short at a later
//!    decision and is swapped back in the same way. Else it replans from the running plan (the fewest
//!    reconfigurations, within `max_extra_gpus` of the fresh optimum):
//!    every service for its forecast times `1 + plan_headroom` but no less
//!    than its capacity in the running plan (a short service gets no more
//!    than the others: capacity kept is given back only after the hold,
//!    so more would stay above its need for that long), unless that
//!    capacity has been
//!    above its forecast times `1 + 2 × plan_headroom` at every decision
//!    for `scale_down_hold_s`: such a service gives its spare back (with many
//!    services, one always rises somewhere, and spare capacity would
//!    otherwise only ever grow); a replan giving spare back that dips
//!    (rule 6) gives way to one keeping it.
//! 5. **Scale down late.** Otherwise, when a replan for the forecast times
//!    `1 + plan_headroom` (a service that fell short within
//!    `scale_down_hold_s` keeps its capacity: what a scale-up just gave a
//!    rising service is not taken back) would release at least
//!    `scale_down_min_gpus` GPUs when first tried, a cheap estimate (each
//!    service's share of GPUs scaled by its forecast over its capacity)
//!    says so at every decision without a service falling short for
//!    `scale_down_hold_s`, and a replan then still does, the controller
//!    takes it, unless the estimate is `scale_down_min_gpus` or more above
//!    the one of `scale_down_hold_s` before (demand rises: the GPUs would
//!    soon be added back). Scale-ups in between do not restart the hold
//!    (with many services, one always rises somewhere), nor does a
//!    scale-down: with more to release, the next step follows its
//!    transition. A replan that releases too few is not tried again on
//!    the same plan until the estimate has fallen by another
//!    `scale_down_min_gpus` GPUs.
//! 6. **No dip, no long transition.** A transition dips when, while one
//!    of its steps runs, a service has less capacity than both its
//!    forecast times `1 + plan_headroom` (a forecast a little short must
//!    not lose requests) and its capacity before; it is long when it takes
//!    more than `max_transition_s` (nothing else acts while it runs, rule
//!    2). A scale-up that dips or is long is tried again with room to keep
//!    every running GPU and add up to `dip_extra_gpus`, as the running plan
//!    untouched with segments added for what each service lacks (in free
//!    slices or on new GPUs), and draining each of the `dip_extra_gpus + 1`
//!    least used GPUs (their segments move before they are torn down); the
//!    one without a dip and not long on the fewest GPUs is taken, else the
//!    one without a dip on the fewest, one with a dip only when all dip. A
//!    scale-down that dips or is long releases half as many GPUs, then half
//!    again, down to `scale_down_min_gpus` (a release that dips tried
//!    draining), else it waits.
//! 7. **Rate limit.** At most `max_reconfigurations_per_hour`
//!    reconfigurations that stop a running segment or destroy a MIG
//!    instance start in any hour, swaps (rule 4) aside. Beyond, a scale-up
//!    that finds no swap only adds segments (`added_to`: in free slices or
//!    on new GPUs, disturbing nothing that serves, and not counted), and
//!    anything else holds and says so.
//!
//! 8. **Queues drained.** Each service's backlog is estimated from its
//!    observed rates: over each interval, what arrived above its
//!    segments' full-batch throughput (as profiled, in the plan that
//!    runs) joined its queue, and the throughput left over drained it. A
//!    service with requests queued is forecast, for every rule above, at
//!    its forecast plus what drains them within
//!    [`ControllerConfig::drain_s`]: a burst met a minute late is given
//!    the capacity to catch up, not only to keep up. A service on a
//!    shared instance is not estimated.
//!
//! Every decision is journaled with its reason. A decision to reconfigure
//! takes effect at once in the controller (the plan it returns is the one
//! it then considers running); a caller whose apply failed says what runs
//! with [`Controller::adopt`]. Its plans carry each service's capacity,
//! which is all a decision reads, but not the serving model's figures
//! (percentile latency, attainment, tolerance, busiest load): predicting
//! them for every service of every plan a fleet passes through would cost
//! more than deciding, so [`Controller::with_figures`] predicts them for
//! the plan a caller deploys or shows.

mod candidates;
mod config;
mod decision;
mod queues;

use std::collections::VecDeque;

use tessera_core::text::{count, percent};
use tessera_core::{Plan, ServiceSlo};
use tessera_plan::PlanInputs;
use tessera_serving::ArrivalModel;

use crate::error::AutopilotError;
use crate::forecast::{ForecastAccuracy, Forecaster};
use crate::planner::{PlanSettings, Planner};
use crate::transition::Transition;
use candidates::{change_words, Candidate, Replanner};

pub use config::{
    ControllerConfig, DEFAULT_DIP_EXTRA_GPUS, DEFAULT_DRAIN_S, DEFAULT_KEEP_HEADROOM, DEFAULT_MAX_EXTRA_GPUS,
    DEFAULT_MAX_RECONFIGURATIONS_PER_HOUR, DEFAULT_MAX_SAMPLE_AGE_S, DEFAULT_MAX_TRANSITION_S, DEFAULT_PLAN_HEADROOM,
    DEFAULT_SCALE_DOWN_HOLD_S, DEFAULT_SCALE_DOWN_MIN_GPUS,
};
pub use decision::{Action, ActionKind, Decision, JournalEntry, Observation, RateSample, Reconfiguration};

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
    /// The estimate of the GPUs needed when a replan last released too few
    /// to scale down (while the same plan runs).
    refused_estimate: Option<f64>,
    /// Per service, since when its capacity has been well above its
    /// forecast (see [`Controller::scale_up_rates`]).
    spare_since_s: Vec<Option<f64>>,
    /// Per service, when it last fell short (see
    /// [`Controller::scale_down_rates`]).
    short_at_s: Vec<Option<f64>>,
    /// The estimates of the GPUs needed at the scale-down decisions of
    /// about the last hold, oldest first, with their times (rule 5).
    recent_estimates: VecDeque<(f64, f64)>,
    /// When the rate-limited reconfigurations of the last hour started.
    recent_s: VecDeque<f64>,
    /// Per service, the requests estimated queued beyond what its segments
    /// serve (rule 8).
    queued: Vec<f64>,
    last_time_s: Option<f64>,
    journal: Vec<JournalEntry>,
}

impl Controller {
    /// A controller of `inputs`' services (their rates are replaced by the
    /// observed ones) planning under `settings` and deciding under
    /// `config`, with the plan that runs now, if any (its shared instances
    /// are kept by replans, and fresh plans share where the settings ask).
    /// Options every plan would be refused for are refused here.
    pub fn new(
        inputs: PlanInputs,
        settings: PlanSettings,
        config: ControllerConfig,
        running: Option<Plan>,
    ) -> Result<Controller, AutopilotError> {
        config.validate()?;
        let service_count = inputs.services().len();
        let planner = Planner::new(inputs, settings);
        planner.check()?;
        let forecaster = Forecaster::new(service_count, config.forecast)?;
        Ok(Controller {
            planner,
            config,
            forecaster,
            plan: running,
            busy_until_s: f64::NEG_INFINITY,
            down_since_s: None,
            refused_estimate: None,
            spare_since_s: vec![None; service_count],
            short_at_s: vec![None; service_count],
            recent_s: VecDeque::new(),
            recent_estimates: VecDeque::new(),
            queued: vec![0.0; service_count],
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
        self.refused_estimate = None;
    }

    /// `plan`, one of this controller's, with every service's figures
    /// predicted at the rates it was made for (as `tessera plan` predicts
    /// them); as it is when they cannot be computed.
    pub fn with_figures(&self, plan: Plan) -> Plan {
        self.planner.with_figures(plan)
    }

    /// The arrival model plans are made under.
    pub fn arrivals(&self) -> ArrivalModel {
        self.planner.arrivals()
    }

    /// Plans from now on are made under `model` (e.g. the burstiness
    /// observed, [`crate::observed_arrivals`]); a running plan proven under
    /// calmer arrivals is then short everywhere, and replanned.
    pub fn set_arrivals(&mut self, model: ArrivalModel) {
        self.planner.set_arrivals(model);
        self.refused_estimate = None;
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
        let elapsed_s = self.last_time_s.map(|last| time_s - last);
        if time_s.is_finite() && self.last_time_s.is_none_or(|last| time_s >= last) {
            self.last_time_s = Some(time_s);
        }
        let (action, reason) = match rates {
            Err(reason) => (Action::Hold, reason),
            Ok(rates_rps) => {
                self.estimate_queues(&rates_rps, elapsed_s);
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
        let forecast_rps = self.forecast_with_queues();
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
        let capacities_rps = self.replanner().capacities_rps(&running);
        self.track_spare_capacity(time_s, &capacities_rps, &forecast_rps);
        let keep_rps = scaled(&forecast_rps, 1.0 + self.config.keep_headroom);
        let margin = running.margin.unwrap_or(0.0);
        // Traffic above the forecast, or a GPU slower than profiled: the
        // plan must bear either alone.
        let shortfalls = self.planner.shortfalls(&running, &keep_rps, 0.0).and_then(|faster| {
            let slower = match margin > 0.0 {
                true => self.planner.shortfalls(&running, &forecast_rps, margin)?,
                false => vec![None; faster.len()],
            };
            Ok(faster.into_iter().zip(slower).map(|(faster, slower)| faster.or(slower)).collect::<Vec<_>>())
        });
        let shortfalls = match shortfalls {
            Ok(shortfalls) => shortfalls,
            Err(error) => return (Action::Hold, format!("holding: the serving model cannot judge the plan: {error}")),
        };
        let short: Vec<(usize, String)> =
            shortfalls.into_iter().enumerate().filter_map(|(index, words)| Some((index, words?))).collect();
        for (index, _) in &short {
            self.short_at_s[*index] = Some(time_s);
        }
        if short.is_empty() {
            let down_rps = self.scale_down_rates(time_s, &capacities_rps, &plan_rps);
            return self.consider_scale_down(time_s, &running, &down_rps, &plan_rps);
        }
        let why = format!(
            "predicted within SLO {}: {}{}",
            self.keep_test(margin),
            short.iter().map(|(_, words)| words.as_str()).collect::<Vec<_>>().join("; "),
            self.queued_words(&short)
        );
        let up_rps = self.scale_up_rates(time_s, &capacities_rps, &forecast_rps, &short, true);
        let kept_rps = self.scale_up_rates(time_s, &capacities_rps, &forecast_rps, &short, false);
        let limit = self.rate_limited(time_s);
        let swap_rps = self.swap_rates(time_s, &capacities_rps, &keep_rps, &short, &kept_rps);
        let candidate = match (self.replanner().swapped(&running, &swap_rps, &swap_rps), &limit) {
            (Some(swap), _) => Ok(swap),
            // Spare is given back only by a transition without a dip.
            (None, None) => match self.replanner().scale_up(&running, &up_rps, &plan_rps) {
                Ok(dips) if dips.dip.is_some() && up_rps != kept_rps => {
                    self.replanner().scale_up(&running, &kept_rps, &plan_rps)
                }
                tried => tried,
            },
            (None, Some(_)) => self.replanner().added_to(&running, &kept_rps, &plan_rps),
        };
        match candidate {
            Err(error) => (Action::Hold, format!("holding although {why}: the replan failed: {error}")),
            Ok(candidate) if candidate.transition.is_empty() => {
                (Action::Keep, format!("keeping: {why}, but a replan changes nothing"))
            }
            Ok(candidate) => match (limit, exempt_from_the_limit(&candidate.transition)) {
                (Some(limit), false) => (Action::Hold, format!("holding although {why}: {limit}")),
                (limit, _) => {
                    let how = match !candidate.transition.only_adds() && candidate.transition.keeps_layouts() {
                        true => "instances swapped".to_string(),
                        false => limit.map_or("replanned".to_string(), |limit| format!("{limit}: segments added")),
                    };
                    let dip = candidate.dip.as_ref().map_or(String::new(), |dip| format!("; it dips: {dip}"));
                    let reason = format!("scaling up: {why}; {how}: {}{dip}", change_words(&running, &candidate));
                    (Action::ScaleUp(self.commit(time_s, candidate)), reason)
                }
            },
        }
    }

    /// The rates a scale-up at `time_s` plans for (rule 4): each service at
    /// the forecast times `1 + plan_headroom` and no less than its capacity
    /// in the running plan (`capacities_rps`), unless `give_back`, it is
    /// not in `short` and it has had more than `2 × plan_headroom` spare
    /// for the scale-down hold.
    fn scale_up_rates(
        &self,
        time_s: f64,
        capacities_rps: &[f64],
        forecast_rps: &[f64],
        short: &[(usize, String)],
        give_back: bool,
    ) -> Vec<f64> {
        let headroom = self.config.plan_headroom;
        (0..forecast_rps.len())
            .map(|index| {
                let plan_rps = forecast_rps[index] * (1.0 + headroom);
                let spare_since_s = self.spare_since_s[index];
                let is_short = short.iter().any(|(short, _)| *short == index);
                match give_back
                    && !is_short
                    && spare_since_s.is_some_and(|since_s| time_s - since_s >= self.config.scale_down_hold_s)
                {
                    true => plan_rps,
                    false => plan_rps.max(capacities_rps[index]),
                }
            })
            .collect()
    }

    /// The rates a swap at `time_s` plans for (rule 4): each service in
    /// `short` at its scale-up rate in `up_rps`, every other at what the
    /// keep test asks of it (`keep_rps`), or its capacity if it fell short
    /// within the hold.
    fn swap_rates(
        &self,
        time_s: f64,
        capacities_rps: &[f64],
        keep_rps: &[f64],
        short: &[(usize, String)],
        up_rps: &[f64],
    ) -> Vec<f64> {
        let mut swap_rps = self.scale_down_rates(time_s, capacities_rps, keep_rps);
        for &(index, _) in short {
            swap_rps[index] = up_rps[index];
        }
        swap_rps
    }

    /// The rates a scale-down at `time_s` plans for (rule 5): each
    /// service's `plan_rps`, but no less than its capacity in the running
    /// plan (`capacities_rps`) for a service that fell short within the
    /// scale-down hold (what a scale-up just gave a rising service is not
    /// taken back at once).
    fn scale_down_rates(&self, time_s: f64, capacities_rps: &[f64], plan_rps: &[f64]) -> Vec<f64> {
        let recently = |short_at_s: &Option<f64>| {
            short_at_s.is_some_and(|short_at_s| time_s - short_at_s < self.config.scale_down_hold_s)
        };
        (self.short_at_s.iter().zip(capacities_rps).zip(plan_rps))
            .map(|((short_at_s, &capacity_rps), &plan_rps)| match recently(short_at_s) {
                true => plan_rps.max(capacity_rps),
                false => plan_rps,
            })
            .collect()
    }

    /// Notes, per service, since when its capacity in the running plan
    /// (`capacities_rps`) has been above its forecast times
    /// `1 + 2 × plan_headroom` (the spare a scale-up takes back after the
    /// hold).
    fn track_spare_capacity(&mut self, time_s: f64, capacities_rps: &[f64], forecast_rps: &[f64]) {
        let factor = 1.0 + 2.0 * self.config.plan_headroom;
        let services = self.spare_since_s.iter_mut().zip(capacities_rps).zip(forecast_rps);
        for ((since_s, capacity_rps), forecast_rps) in services {
            if *capacity_rps > forecast_rps * factor {
                since_s.get_or_insert(time_s);
            } else {
                *since_s = None;
            }
        }
    }

    /// What the keep test asks, in words: the forecast plus the keep
    /// headroom at the profiled speed and, for a plan with a margin, the
    /// forecast with every batch that much slower.
    fn keep_test(&self, margin: f64) -> String {
        let faster = format!("at the forecast +{:.0}%", self.config.keep_headroom * 100.0);
        match margin > 0.0 {
            true => format!("{faster} and at the forecast with every batch {} slower", percent(margin)),
            false => faster,
        }
    }

    /// Every service holds at the forecast: scale down to `down_rps` (see
    /// [`Controller::scale_down_rates`]) when a replan has released enough
    /// for long enough, else keep.
    fn consider_scale_down(
        &mut self,
        time_s: f64,
        running: &Plan,
        down_rps: &[f64],
        dip_rps: &[f64],
    ) -> (Action, String) {
        let threshold = self.config.scale_down_min_gpus as usize;
        let holds = format!(
            "keeping: every service predicted within its SLO {}",
            self.keep_test(running.margin.unwrap_or(0.0))
        );
        let estimate = self.replanner().estimated_gpus(running, down_rps);
        let hold_ago = self.estimate_hold_ago(time_s, estimate);
        if (running.gpu_count as f64) - estimate < threshold as f64 {
            self.down_since_s = None;
            self.refused_estimate = None;
            return (Action::Keep, format!("{holds}; no scale-down in sight (about {estimate:.1} GPUs needed)"));
        }
        // While demand rises (by a scale-down's worth over the hold), GPUs
        // released now would be added back soon.
        if let Some((then_s, then)) = hold_ago.filter(|&(_, then)| estimate >= then + threshold as f64) {
            return (
                Action::Keep,
                format!(
                    "{holds}; demand rises (about {estimate:.1} GPUs needed, against {then:.1} {:.0} min ago): \
                     no scale-down",
                    (time_s - then_s) / 60.0
                ),
            );
        }
        // A replan that released too few is tried again once the estimate
        // has fallen by as many GPUs again.
        if let Some(refused) = self.refused_estimate.filter(|refused| estimate > refused - threshold as f64) {
            return (
                Action::Keep,
                format!(
                    "{holds}; a replan released too few at about {refused:.1} GPUs needed, now {estimate:.1}: \
                     tried again below {:.1}",
                    refused - threshold as f64
                ),
            );
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
        let candidate = match self.replanner().replan_for(running, down_rps, dip_rps, self.config.max_extra_gpus) {
            Ok(candidate) => candidate,
            Err(error) => {
                self.down_since_s = None;
                return (Action::Keep, format!("{holds}; a scale-down replan failed: {error}"));
            }
        };
        let released = running.gpu_count.saturating_sub(candidate.plan.gpu_count);
        if released < threshold {
            self.down_since_s = None;
            self.refused_estimate = Some(estimate);
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
        let replanner = self.replanner();
        let candidate = match replanner.fits(&candidate) {
            true => candidate,
            false => match replanner.scale_down_within_limits(running, down_rps, dip_rps, threshold, &candidate) {
                Some(smaller) => smaller,
                None => {
                    let why = candidate.dip.clone().map_or_else(
                        || format!("its transition takes {:.0} s", candidate.transition.duration_s()),
                        |dip| format!("it dips: {dip}"),
                    );
                    return (Action::Keep, format!("{holds}; a scale-down of {} waits: {why}", count(released, "GPU")));
                }
            },
        };
        // The hold stays met: with more to release, the next step may
        // follow once this transition ends.
        let reason = format!(
            "scaling down: a replan for the forecast +{:.0}% has released at least {} for {:.0} min: {}",
            self.config.plan_headroom * 100.0,
            count(threshold, "GPU"),
            waited_s / 60.0,
            change_words(running, &candidate)
        );
        (Action::ScaleDown(self.commit(time_s, candidate)), reason)
    }

    /// Notes `estimate` (GPUs needed, rule 5) at `time_s`, and answers the
    /// latest one noted at least `scale_down_hold_s` earlier (else the
    /// oldest), with its time.
    fn estimate_hold_ago(&mut self, time_s: f64, estimate: f64) -> Option<(f64, f64)> {
        let hold_s = self.config.scale_down_hold_s;
        while self.recent_estimates.get(1).is_some_and(|&(then_s, _)| time_s - then_s >= hold_s) {
            self.recent_estimates.pop_front();
        }
        let hold_ago = self.recent_estimates.front().copied();
        self.recent_estimates.push_back((time_s, estimate));
        hold_ago
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

    /// The planner under this configuration, making candidates.
    fn replanner(&self) -> Replanner<'_> {
        Replanner { planner: &self.planner, config: &self.config }
    }

    /// Takes `plan` as running from `time_s`, busy for its transition.
    fn commit(&mut self, time_s: f64, candidate: Candidate) -> Reconfiguration {
        let Candidate { plan, transition, fresh_gpus, .. } = candidate;
        self.busy_until_s = time_s + transition.duration_s();
        self.refused_estimate = None;
        if !exempt_from_the_limit(&transition) {
            self.recent_s.push_back(time_s);
        }
        self.plan = Some(plan.clone());
        Reconfiguration { plan, transition, fresh_gpus }
    }
}

/// Whether `transition` is left out of the rate limit (rule 7): it only
/// adds, or it changes no GPU's MIG layout (a swap, rule 4).
fn exempt_from_the_limit(transition: &Transition) -> bool {
    transition.only_adds() || transition.keeps_layouts()
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
