//! A transition from one plan to another, make before break, with the time
//! each step takes.
//!
//! The steps are [`transition_steps`]'s: new capacity first, then the GPUs
//! that stop segments, grouped while no service falls below its rate in the
//! new plan, the GPUs that only tear down last. A step's GPUs change
//! together; one GPU's change takes, in order, the time to stop its
//! segments (when it stops any), to destroy each MIG instance, to create
//! each one, and to start its segments (when it starts any: they start
//! together). A step lasts as long as its slowest GPU, and the steps run
//! one after the other. The defaults are assumptions, not measurements:
//! set them to what a cluster shows.

use serde::Serialize;
use tessera_core::{diff_plans, transition_steps, DiffTotals, Dip, Operation, Plan, Step};

use crate::error::AutopilotError;

/// Default seconds to stop a segment's processes (let them finish what
/// they hold).
pub const DEFAULT_STOP_S: f64 = 5.0;
/// Default seconds to destroy one MIG instance (its compute and GPU
/// instances).
pub const DEFAULT_DESTROY_S: f64 = 2.0;
/// Default seconds to create one MIG instance.
pub const DEFAULT_CREATE_S: f64 = 4.0;
/// Default seconds from starting a segment's processes to their serving
/// (a pod scheduled, its container started, its model loaded).
pub const DEFAULT_START_S: f64 = 30.0;

/// How long the parts of a reconfiguration take.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReconfigurationTimes {
    /// Seconds to stop a GPU's segments.
    pub stop_s: f64,
    /// Seconds to destroy one MIG instance.
    pub destroy_s: f64,
    /// Seconds to create one MIG instance.
    pub create_s: f64,
    /// Seconds for a GPU's new segments to serve.
    pub start_s: f64,
}

impl Default for ReconfigurationTimes {
    /// The documented defaults (the `DEFAULT_*` constants).
    fn default() -> Self {
        ReconfigurationTimes {
            stop_s: DEFAULT_STOP_S,
            destroy_s: DEFAULT_DESTROY_S,
            create_s: DEFAULT_CREATE_S,
            start_s: DEFAULT_START_S,
        }
    }
}

impl ReconfigurationTimes {
    /// Checks the times, naming the first that is negative or not finite.
    pub fn validate(&self) -> Result<(), AutopilotError> {
        for (field, value) in [
            ("stop_s", self.stop_s),
            ("destroy_s", self.destroy_s),
            ("create_s", self.create_s),
            ("start_s", self.start_s),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(AutopilotError::invalid(field, format!("{value} is not a duration of 0 s or more")));
            }
        }
        Ok(())
    }

    /// Seconds one GPU takes to run `operations`.
    fn gpu_s(&self, operations: &[Operation]) -> f64 {
        let count = |matches: fn(&Operation) -> bool| operations.iter().filter(|op| matches(op)).count() as f64;
        let stops = count(Operation::stops_serving);
        let starts = count(Operation::starts_serving);
        let destroys = count(|op| matches!(op, Operation::Destroy { .. }));
        let creates = count(|op| matches!(op, Operation::Create { .. }));
        (stops.min(1.0) * self.stop_s)
            + destroys * self.destroy_s
            + creates * self.create_s
            + (starts.min(1.0) * self.start_s)
    }
}

/// One step of a transition and how long it takes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimedStep {
    /// The step: each GPU's operations, and the services below their rate
    /// while it runs.
    pub step: Step,
    /// Seconds it takes (its slowest GPU).
    pub duration_s: f64,
}

/// The way from one plan to another.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    /// The steps, in order.
    pub steps: Vec<TimedStep>,
    /// What changes, in total.
    pub totals: DiffTotals,
}

impl Transition {
    /// The transition from `old` to `new` under `times`.
    pub fn between(old: &Plan, new: &Plan, times: &ReconfigurationTimes) -> Transition {
        let steps = transition_steps(old, new)
            .into_iter()
            .map(|step| {
                let duration_s = step.gpus.iter().map(|gpu| times.gpu_s(&gpu.operations)).fold(0.0, f64::max);
                TimedStep { step, duration_s }
            })
            .collect();
        Transition { steps, totals: diff_plans(old, new).totals }
    }

    /// Seconds the whole transition takes.
    pub fn duration_s(&self) -> f64 {
        self.steps.iter().map(|step| step.duration_s).sum()
    }

    /// Every dip of every step: a service below its new rate while a step
    /// runs.
    pub fn dips(&self) -> impl Iterator<Item = &Dip> {
        self.steps.iter().flat_map(|step| &step.step.dips)
    }

    /// `true` when no running segment stops and no MIG instance is
    /// destroyed: the transition only adds (segments in free slices, new
    /// GPUs), so nothing that serves is disturbed.
    pub fn only_adds(&self) -> bool {
        let disturbs = |op: &Operation| op.stops_serving() || matches!(op, Operation::Destroy { .. });
        !self.steps.iter().flat_map(|step| &step.step.gpus).flat_map(|gpu| &gpu.operations).any(disturbs)
    }

    /// `true` when no GPU's MIG layout changes and no GPU is added or
    /// removed: only which service's processes run on instances that stay
    /// (or none of it changes).
    pub fn keeps_layouts(&self) -> bool {
        self.totals.gpus_reconfigured() == 0
    }

    /// `true` when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}
