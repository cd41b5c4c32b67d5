//! Tessera's autopilot: keeping a running plan at its SLOs as request
//! rates move through the day.
//!
//! * [`diurnal`] (`diurnal`) — daily cycles of request rates (a
//!   `tessera_core::TrafficCurve`) with a phase per service, noise and
//!   bursts, deterministic by seed.
//! * [`Forecaster`] (`forecast`) — each service's rate over the next
//!   interval (the larger of a short window's highest rate and a smoothed
//!   trend projected ahead), with how far its forecasts were off.
//! * [`Controller`] (`controller`) — the state machine the live loop and
//!   the simulation share: fed an [`Observation`] per decision interval, it
//!   answers a [`Decision`] with its reason and journals it. It keeps the
//!   plan while the serving model predicts every SLO met at the forecast,
//!   replans from the running plan early when not, scales down late
//!   (hysteresis), rate-limits reconfigurations and never acts on stale
//!   or missing metrics. `free_slices` puts new segments in running GPUs'
//!   unused slices (a scale-up that stops nothing). `planner` makes its plans (the services at given
//!   rates, fresh or replanned from the running plan, under
//!   [`PlanSettings`]) and asks the serving model about them.
//! * [`Transition`] (`transition`) — the make-before-break steps from one
//!   plan to another, timed by [`ReconfigurationTimes`].
//! * [`simulate_day`] (`day`) — the controller over a traffic curve against
//!   two baselines (static provisioning at the peak, replanning from
//!   scratch at every interval), each measured with the request-level
//!   simulator hour by hour: a [`DayReport`].
//!
//! Invariant: no I/O; the same inputs and seeds give the same decisions
//! and figures (planning under a time limit aside: the planner may stop
//! at a different plan on a slower machine).

mod controller;
mod day;
mod diurnal;
mod error;
mod forecast;
mod free_slices;
mod planner;
mod transition;

pub use controller::{
    Action, ActionKind, Controller, ControllerConfig, Decision, JournalEntry, Observation, RateSample, Reconfiguration,
    DEFAULT_DIP_EXTRA_GPUS, DEFAULT_KEEP_HEADROOM, DEFAULT_MAX_EXTRA_GPUS, DEFAULT_MAX_RECONFIGURATIONS_PER_HOUR,
    DEFAULT_MAX_SAMPLE_AGE_S, DEFAULT_MAX_TRANSITION_S, DEFAULT_PLAN_HEADROOM, DEFAULT_SCALE_DOWN_HOLD_S,
    DEFAULT_SCALE_DOWN_MIN_GPUS,
};
pub use day::{
    simulate_day, DayProgress, DayReport, DayRequest, GpuStep, HourRow, Sampling, ServiceDay, StrategyDay, Tally,
    DEFAULT_INTERVAL_S, DEFAULT_MAX_REQUESTS, DEFAULT_WARMUP_S, DEFAULT_WINDOW_S, FULL_WINDOW_LOAD, MIN_WINDOW_BATCHES,
};
pub use diurnal::{
    diurnal, DiurnalOptions, DEFAULT_BURSTS_PER_DAY, DEFAULT_BURST_FACTOR, DEFAULT_BURST_MINUTES, DEFAULT_HOURS,
    DEFAULT_NOISE, DEFAULT_PEAK_HOUR, DEFAULT_PEAK_TO_TROUGH, DEFAULT_PHASE_SPREAD_H, DEFAULT_STEP_S,
};
pub use error::AutopilotError;
pub use forecast::{
    ForecastAccuracy, ForecastConfig, Forecaster, DEFAULT_HORIZON_INTERVALS, DEFAULT_LEVEL_SMOOTHING,
    DEFAULT_TREND_SMOOTHING, DEFAULT_WINDOW,
};
pub use planner::{PlanSettings, MIN_PLAN_RATE_RPS};
pub use transition::{
    ReconfigurationTimes, TimedStep, Transition, DEFAULT_CREATE_S, DEFAULT_DESTROY_S, DEFAULT_START_S, DEFAULT_STOP_S,
};
