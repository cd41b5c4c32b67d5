//! How the controller decides: its configuration, with documented
//! defaults.

use serde::Serialize;

use crate::error::AutopilotError;
use crate::forecast::ForecastConfig;
use crate::transition::ReconfigurationTimes;

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
/// Default most reconfigurations that stop something started in any hour.
pub const DEFAULT_MAX_RECONFIGURATIONS_PER_HOUR: usize = 6;
/// Default oldest a rate sample may be, seconds.
pub const DEFAULT_MAX_SAMPLE_AGE_S: f64 = 120.0;
/// Default GPUs a replan may use beyond the fresh optimum.
pub const DEFAULT_MAX_EXTRA_GPUS: u64 = 0;
/// Default GPUs a scale-up may add to the running ones to avoid a dip or
/// a long transition; a scale-down that dips tries draining each of this
/// many plus one least used GPUs.
pub const DEFAULT_DIP_EXTRA_GPUS: u64 = 2;
/// Default time within which a service's estimated backlog is to be
/// drained, seconds (see [`ControllerConfig::drain_s`]).
pub const DEFAULT_DRAIN_S: f64 = 60.0;
/// Default longest transition a replan takes when a smaller one will do,
/// seconds (5 minutes; another transition cannot start while one runs).
pub const DEFAULT_MAX_TRANSITION_S: f64 = 300.0;

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
    /// and a service's spare capacity must have lasted before a scale-up
    /// takes it back (rule 4), seconds.
    pub scale_down_hold_s: f64,
    /// Most reconfigurations that stop a running segment or destroy a MIG
    /// instance started in any hour (rule 7).
    pub max_reconfigurations_per_hour: usize,
    /// Oldest a rate sample may be, seconds.
    pub max_sample_age_s: f64,
    /// GPUs a replan may use beyond the fresh optimum.
    pub max_extra_gpus: u64,
    /// GPUs a scale-up may add to the running ones to avoid a dip or a
    /// long transition; a scale-down that dips tries draining each of this
    /// many plus one least used GPUs (see rule 6).
    pub dip_extra_gpus: u64,
    /// A replan whose transition would take longer, seconds, gives way to a
    /// smaller one (see rule 6): a scale-up keeps the running GPUs, a
    /// scale-down releases fewer.
    pub max_transition_s: f64,
    /// A service whose observed rate ran above its segments' full-batch
    /// throughput has requests queued (rule 8): it is forecast at its
    /// rate plus what drains them within this many seconds; 0: backlogs
    /// are not estimated.
    pub drain_s: f64,
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
            max_transition_s: DEFAULT_MAX_TRANSITION_S,
            drain_s: DEFAULT_DRAIN_S,
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
        for (field, value) in [
            ("scale_down_hold_s", self.scale_down_hold_s),
            ("max_sample_age_s", self.max_sample_age_s),
            ("max_transition_s", self.max_transition_s),
            ("drain_s", self.drain_s),
        ] {
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
