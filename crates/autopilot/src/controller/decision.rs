//! What the controller is told and what it answers: observations,
//! decisions and the journal of them.

use serde::Serialize;
use tessera_core::Plan;

use crate::transition::Transition;

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
    /// Each service's latest sample, in [`Controller::services`](super::Controller::services)' order;
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
    /// GPUs of the fresh optimum at the same rates; `None` for a swap
    /// (planned within the running MIG instances, without one).
    pub fresh_gpus: Option<usize>,
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
