//! Profile completion: from a few measured points of each model, predict
//! every other configuration of the profile grid, with an interval, and
//! say which configurations are assumed to fit in memory.
//!
//! * `model` — the latency model (floor, own compute, shared capacity) and
//!   its penalised fit with leave-one-out residuals; the default method.
//! * `interpolate` — plain local-linear interpolation in log space, the
//!   baseline the model is measured against.
//! * `memory` — conservative feasibility from measured fitting and
//!   out-of-memory configurations.
//! * `suggest` — which configurations to measure next.
//!
//! Each model is fitted twice: first under a weak prior, then under a prior
//! learned from every model's first fit (their median and spread), which
//! carries what the other models show into a model with few points.
//! Intervals come from the leave-one-out residuals of the measured points,
//! widened by the parameters' uncertainty where a configuration is far
//! from what was measured, and scaled so that the pooled leave-one-out
//! residuals of all models meet [`INTERVAL_COVERAGE`]. Planners use the
//! conservative end of each interval (lowest throughput, highest latency).
//!
//! Inside: `interface` (the request and the answer), `completion` (the
//! fits, intervals and predictions), and the pieces above.

mod completion;
mod interface;
mod interpolate;
mod linalg;
mod memory;
mod model;
mod residual;
mod suggest;

pub use completion::complete_profiles;
pub use interface::{
    CompletionMethod, CompletionRequest, Feasibility, Interval, ModelCompletion, Prediction, ProfileGrid, GRID_BATCHES,
    GRID_PROCS, INTERVAL_COVERAGE,
};
pub use suggest::{suggest_measurements, Suggestion, SEED_POINTS};
