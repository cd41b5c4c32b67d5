//! The live loop's turn: at each decision time it reads every service's
//! rate (and, where asked, its burstiness), lets the controller decide
//! (tessera-autopilot's, which makes every decision), acts on a new plan
//! through the [`DeployTarget`], and counts it all in the loop's metrics.
//! With leader election a replica decides only while it leads.

use tessera_autopilot::{observed_arrivals, renewal_cv, Action, ActionKind, Controller, Observation};
use tessera_core::Plan;
use tessera_store::AutopilotDecision;

use crate::burstiness::PrometheusCounts;
use crate::metrics::LoopMetrics;
use crate::rates::RateSource;
use crate::target::{DecisionNote, DeployTarget, Outcome};

/// Every action's name, for the metrics.
const ACTIONS: [ActionKind; 5] =
    [ActionKind::Start, ActionKind::Keep, ActionKind::Hold, ActionKind::ScaleUp, ActionKind::ScaleDown];

/// The loop's parts, wired.
pub struct LiveLoop {
    controller: Controller,
    source: Box<dyn RateSource>,
    counts: Option<PrometheusCounts>,
    target: Box<dyn DeployTarget>,
    metrics: LoopMetrics,
    /// The services' names, in the controller's order.
    names: Vec<String>,
    /// Whether this replica led at the last decision time (`None` before
    /// the first).
    leading: Option<bool>,
}

/// What one decision time came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Another replica leads: nothing was read or decided.
    StoodBy,
    /// A decision, as the journal records it.
    Decided(AutopilotDecision),
}

impl LiveLoop {
    /// The loop of `controller`, its rates from `source`, its burstiness
    /// from `counts` where asked, its new plans to `target`.
    pub fn new(
        controller: Controller,
        source: Box<dyn RateSource>,
        counts: Option<PrometheusCounts>,
        target: Box<dyn DeployTarget>,
    ) -> LiveLoop {
        let metrics = LoopMetrics::new(&ACTIONS.map(ActionKind::name));
        let names = controller.services().iter().map(|slo| slo.service.clone()).collect();
        LiveLoop { controller, source, counts, target, metrics, names, leading: None }
    }

    /// Where the rates come from.
    pub fn source(&self) -> &dyn RateSource {
        self.source.as_ref()
    }

    /// Where new plans go.
    pub fn target(&self) -> &dyn DeployTarget {
        self.target.as_ref()
    }

    /// The loop's metrics (shared: serve them with [`LoopMetrics::serve`]).
    pub fn metrics(&self) -> &LoopMetrics {
        &self.metrics
    }

    /// Decides at `now_s` (seconds since the Unix epoch): what the rates,
    /// the controller and the target came to. What the loop has to say
    /// besides (leadership, an apply's steps) goes to `note`.
    pub fn turn(&mut self, now_s: f64, note: &mut dyn FnMut(&str)) -> Turn {
        if !self.target.may_decide(&mut self.leading, &mut self.controller, note) {
            self.metrics.set_leader(false);
            return Turn::StoodBy;
        }
        self.metrics.set_leader(true);
        let rates = self.source.rates(now_s);
        let arrivals_change = self.observe_burstiness(now_s);
        self.metrics.set_arrival_cv(renewal_cv(&self.controller.arrivals()));
        let gpus_before = gpu_count(self.controller.plan());
        let decision = self.controller.observe(&Observation { time_s: now_s, samples: rates.samples.clone() });
        let mut reason = match arrivals_change {
            Some(words) => format!("{words}; {}", decision.reason),
            None => decision.reason.clone(),
        };
        if !rates.faults.is_empty() {
            reason.push_str(&format!(" ({})", rates.faults.join("; ")));
        }
        let new_plan = match &decision.action {
            Action::Start(plan) => Some(plan),
            Action::ScaleUp(change) | Action::ScaleDown(change) => Some(&change.plan),
            Action::Keep | Action::Hold => None,
        };
        let (mut outcome, failed) = match new_plan {
            None => ("nothing to do".to_string(), false),
            Some(plan) => {
                let outcome = self.target.apply(&self.controller.with_figures(plan.clone()), note);
                self.metrics.record_transition(outcome.metric_name());
                if let Outcome::Failed { running: Some(running), .. } = &outcome {
                    self.controller.adopt(running.as_ref().clone());
                }
                (outcome.words(), matches!(outcome, Outcome::Failed { .. }))
            }
        };
        let event_note = format!("{reason} ({outcome})");
        let kind = decision.action.kind();
        let recorded = DecisionNote { time_s: now_s, action: kind, note: &event_note, failed };
        if let Some(error) = self.target.record(&recorded) {
            outcome.push_str(&format!("; its event was not recorded: {error}"));
        }
        let forecast = self.controller.forecast_rps();
        let accuracy = self.controller.forecast_accuracy();
        self.metrics.record_forecast_error(accuracy.mean_abs_relative_error, accuracy.under_share);
        let observed_rps: Vec<Option<f64>> = rates.samples.iter().map(|s| s.map(|s| s.rate_rps)).collect();
        let names = &self.names;
        let record = AutopilotDecision {
            time_s: now_s,
            action: kind.name().to_string(),
            reason,
            gpus_before,
            gpus_after: gpu_count(self.controller.plan()),
            observed_rps: names.iter().cloned().zip(observed_rps.iter().copied()).collect(),
            forecast_rps: names.iter().cloned().zip(forecast.iter().copied()).collect(),
            outcome,
        };
        let observed: Vec<(&str, Option<f64>)> = names.iter().map(String::as_str).zip(observed_rps).collect();
        let forecast: Vec<(&str, f64)> = names.iter().map(String::as_str).zip(forecast.iter().copied()).collect();
        self.metrics.record(now_s, &record.action, record.gpus_after, &observed, &forecast);
        Turn::Decided(record)
    }

    /// Reads every service's burstiness (where asked) and, when the
    /// fleet's arrival model changes, plans under the new one: what
    /// changed, in words.
    fn observe_burstiness(&mut self, now_s: f64) -> Option<String> {
        let reading = self.counts.as_ref()?.read(now_s);
        for observed in &reading.observed {
            self.metrics.record_observed_cv(&observed.service, observed.cv);
        }
        let change = observed_arrivals(&self.controller.arrivals(), &reading.observed)?;
        self.controller.set_arrivals(change.model.clone());
        Some(match reading.missing.as_slice() {
            [] => change.words,
            missing => format!("{} (no estimate for {})", change.words, missing.join("; ")),
        })
    }
}

/// GPUs of `plan`, 0 without one.
fn gpu_count(plan: Option<&Plan>) -> usize {
    plan.map_or(0, |plan| plan.gpu_count)
}
