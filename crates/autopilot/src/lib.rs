//! Tessera's autopilot: keeping a running plan at its SLOs as request
//! rates move through the day.
//!
//! * [`diurnal`] (`diurnal`) — daily cycles of request rates (a
//!   `tessera_core::TrafficCurve`) with a phase per service, noise and
//!   bursts, deterministic by seed.
//! * [`observed_arrivals`] (`burstiness`) — each service's burstiness
//!   estimated from its request counts in equal windows, and the arrival
//!   model the fleet is planned under (the burstiest service's, up at once,
//!   down late).
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
//!   scratch at every interval), each measured hour by hour (a steady
//!   service by the serving model's share, a backlog past a service's
//!   throughput carried from piece to piece, any other with the
//!   request-level simulator): a [`DayReport`].
//!
//! Invariant: no I/O; the same inputs and seeds give the same decisions
//! and figures (planning under a time limit aside: the planner may stop
//! at a different plan on a slower machine).
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! **API boundary:** private modules, root re-exports. Traffic is
//! tessera-core's `TrafficCurve`; `diurnal` draws daily cycles
//! (peak over trough, a phase per service, noise, bursts) by seed;
//! `forecast` the `Forecaster` (the larger of a short window's highest rate
//! and Holt's trend projected ahead) and its `ForecastAccuracy`; `planner`
//! the services at given rates planned fresh or replanned from a running
//! plan under `PlanSettings` (tessera-plan's `PlanOptions`, placed on a
//! cluster's nodes when it names a target `Inventory`), the arrival model
//! the day's traffic is simulated with (the options'), and what the serving
//! model predicts of a plan at given rates (its shortfalls: exact under
//! Poisson, a rate above the plan's capacity under another model); `transition` a `Transition` (core's
//! make-before-break steps timed by `ReconfigurationTimes`); `controller` the
//! `Controller`, a state machine fed an `Observation` (each service's
//! `RateSample`) per interval, answering a `Decision` (`Action`: start, keep,
//! hold, scale up, scale down, with the new plan and its transition) with its
//! reason, journaled (`JournalEntry`): hold on missing or stale metrics and
//! while a transition runs, keep while the serving model predicts every SLO
//! met at the forecast, scale up early (first a swap: instances of
//! services with spare over what the keep test needs change service, no MIG
//! layout changes; else a short service planned for the forecast plus the
//! headroom, no other giving up capacity unless it has been spare for the
//! hold, and never in a transition that dips; a replan that dips or takes
//! longer than `max_transition_s` retried wider, then as GPUs added to the
//! untouched plan), scale down late (a replan releasing enough GPUs for long
//! enough while the GPUs needed do not rise, a service short within the
//! hold keeping its capacity; half as
//! many released, then half again, rather than dip or take long), a rate limit on reconfigurations that stop something (beyond it a
//! scale-up only swaps or adds segments: `free_slices`). `day` is `simulate_day`: the
//! controller over a traffic curve, one decision per interval, against static
//! provisioning at the peak and replanning from scratch (`timeline`: spans of
//! serving segments and GPUs held, both plans' during a transition; `measure`:
//! each piece of constant segments and rates measured per service, a steady
//! one (Poisson, every segment below `MODEL_BELOW_LOAD`) by the serving
//! model, any other simulated alone on a sampled window (shortened for a
//! busy service unless it runs near capacity; services in parallel with
//! rayon), a service unchanged since it was last measured keeping that
//! measure, each weighted by its requests, requests lost being those a transition serves below its rate and both plans' capacity; `report`: the `DayReport`, per hour and in total). Error
//! type: `AutopilotError`.

mod burstiness;
mod controller;
mod day;
mod diurnal;
mod error;
mod forecast;
mod free_slices;
mod planner;
mod transition;

pub use burstiness::{
    estimate_cv, observed_arrivals, renewal_cv, ArrivalsChange, ObservedCv, LOWER_BY_CV, MIN_REQUESTS_PER_WINDOW,
    MIN_WINDOWS, POISSON_BELOW_CV,
};
pub use controller::{
    Action, ActionKind, Controller, ControllerConfig, Decision, JournalEntry, Observation, RateSample, Reconfiguration,
    DEFAULT_DIP_EXTRA_GPUS, DEFAULT_DRAIN_S, DEFAULT_KEEP_HEADROOM, DEFAULT_MAX_EXTRA_GPUS,
    DEFAULT_MAX_RECONFIGURATIONS_PER_HOUR, DEFAULT_MAX_SAMPLE_AGE_S, DEFAULT_MAX_TRANSITION_S, DEFAULT_PLAN_HEADROOM,
    DEFAULT_SCALE_DOWN_HOLD_S, DEFAULT_SCALE_DOWN_MIN_GPUS,
};
pub use day::{
    simulate_day, DayProgress, DayReport, DayRequest, GpuStep, HourRow, Sampling, ServiceDay, StrategyDay, Tally,
    DEFAULT_INTERVAL_S, DEFAULT_MAX_REQUESTS, DEFAULT_WARMUP_S, DEFAULT_WINDOW_S, FULL_WINDOW_LOAD, MIN_WINDOW_BATCHES,
    MODEL_BELOW_LOAD,
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
