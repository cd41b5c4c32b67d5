//! Tessera's planners: from services with SLOs and segment profiles to a
//! [`Plan`](tessera_core::Plan) of MIG instances with MPS segments.
//!
//! The crate's interface is this page: a [`PlanRequest`] (with its
//! defaults and the GPU ceiling), the two strategies [`plan_optimal`] and
//! [`plan_parva`], the [`LatencyRule`]s, the independent checker
//! [`verify`], [`complete_for_fleet`], which estimates the profiles a
//! fleet's GPU models lack, and [`complete_profiles`] and
//! [`suggest_measurements`], which predict a profile grid from a few
//! measured points and say which to measure next. Inside:
//!
//! * `configure` and `allocate` — ParvaGPU's segment configurator (which
//!   segments each service runs) and allocator (which GPU each goes to, on
//!   the real MIG placement lattice); `parva` wires them into the `parva`
//!   strategy, physically valid and dropping nothing.
//! * `options`, `cover`, `lp`, `bound`, `round`, `objective`, `branch` and
//!   `optimal` — the `optimal` strategy: every minimal way to serve each
//!   service, the linear-programming bound solved exactly (cheapest covers
//!   per service at prices per instance size, Kelley's cutting planes over a
//!   small simplex), the relaxation rounded to a plan, a local search within
//!   the fleet's limits and a best-bound-first branch and bound.
//! * `assemble` and `report` — per-GPU segments into a plan with explicit
//!   placements and per-service summaries.
//! * `verify` — checks any plan against profiles, SLOs, the lattice and its
//!   fleet; it shares no code with the planners but the latency rule.
//! * `estimate` — profiles for GPU models without measurements.
//! * `complete` — profile completion: a latency model fitted per model
//!   under a prior learned across models, intervals from leave-one-out
//!   residuals, memory inferred only from measurements, and suggestions.
//!
//! Invariant: no I/O, no global state (the `optimal` search reads the clock
//! for its time limit).

mod allocate;
mod assemble;
mod bound;
mod branch;
mod complete;
mod configure;
mod cover;
mod error;
mod estimate;
mod latency;
mod lp;
mod objective;
mod optimal;
mod options;
mod parva;
mod replan;
mod report;
mod request;
mod round;
mod spread;
mod verify;

pub use complete::{
    complete_profiles, suggest_measurements, CompletionMethod, CompletionRequest, Feasibility, Interval,
    ModelCompletion, Prediction, ProfileGrid, Suggestion, GRID_BATCHES, GRID_PROCS, INTERVAL_COVERAGE, SEED_POINTS,
};
pub use error::{PlanError, UnmeetableSlo};
pub use estimate::{complete_for_fleet, Estimate, EstimateSource, ProfileOrigin};
pub use latency::LatencyRule;
pub use optimal::{plan_optimal, relaxation_bound, RelaxationBound, DEFAULT_TIME_LIMIT};
pub use parva::plan_parva;
pub use replan::{align_to, replan, reseat, GpuPosition, Replan, ReplanRequest};
pub use request::{PlanRequest, DEFAULT_GPUS_PER_NODE, DEFAULT_MAX_GPUS, DEFAULT_MAX_PROCS, MAX_GPUS_LIMIT};
pub use spread::spread_segments;
pub use verify::{verify, InstanceRef, VerifyRequest, Violation};
