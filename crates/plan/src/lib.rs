//! Tessera's planners: from services with SLOs and segment profiles to a
//! [`Plan`](tessera_core::Plan) of MIG instances with MPS segments.
//!
//! The crate's interface is this page. The one way to plan is [`plan`]: a
//! [`PlanRequest`] over [`PlanInputs`] (services and profiles, completed
//! for the fleet) names a [`Strategy`] and its options, optionally a
//! running plan to replan from ([`ReplanFrom`]) and a deploy target's
//! [`Inventory`] to place the plan on; every default (the [`LatencyRule`]
//! above all) is resolved there. The one way to check a plan is
//! [`verify_plan`], answering a [`Verification`]. Beside them:
//! [`relaxation_bound`], the LP bound a plan is proven against;
//! [`complete_profiles`] and [`suggest_measurements`], which predict a
//! profile grid from a few measured points and say which to measure next.
//! Inside:
//!
//! * `strategy`, `inputs`, `planning` and `verification` — the front door
//!   described above; `problem` is what one strategy solves once every
//!   default is resolved.
//! * `placement` — placing a plan on a deploy target's nodes (the pure half
//!   of every cluster adapter).
//! * `configure` and `allocate` — ParvaGPU's segment configurator (which
//!   segments each service runs) and allocator (which GPU each goes to, on
//!   the real MIG placement lattice); `parva` wires them into the `parva`
//!   strategy, physically valid and dropping nothing.
//! * `options`, `cover`, `lp`, `bound`, `round`, `objective`,
//!   `fleet_model`, `branch` and `optimal` — the `optimal` strategy: every
//!   minimal way to serve each service, the linear-programming bound solved
//!   exactly (cheapest covers per service at prices per instance size,
//!   Kelley's cutting planes over a small simplex), the relaxation rounded
//!   to a plan, a local search within the fleet's limits and a
//!   best-bound-first branch and bound; `optimal` is a folder of its phases
//!   (`table`, `bounds`, `candidates`, `rounded`, `local_search`,
//!   `finish`).
//! * `replan` — replanning from a running plan with the fewest changes, a
//!   folder of its steps (`inherit`, `stable`, `fill`, `residual`,
//!   `absorb`, `assemble`, `align`, `keep_layouts`); `spread` — spreading a
//!   service's segments over GPUs.
//! * `assemble` and `report` — per-GPU segments into a plan with explicit
//!   placements and per-service summaries.
//! * `verify` — checks any plan against profiles, SLOs, the lattice and its
//!   fleet; it shares no code with the planners but the latency rule.
//! * `estimate` — profiles for GPU models without measurements.
//! * `complete` — profile completion (`interface`, the request and the
//!   answer; `completion`, the fits and predictions): a latency model
//!   fitted per model under a prior learned across models, intervals from
//!   leave-one-out residuals, memory inferred only from measurements, and
//!   suggestions.
//!
//! Invariant: no I/O, no global state (the `optimal` search reads the clock
//! for its time limit). The modules form no cycle: shared types sit in a
//! module below those that use them, and a folder's `mod.rs` uses its
//! files, never they it.

mod allocate;
mod assemble;
mod bound;
mod branch;
mod complete;
mod configure;
mod cover;
mod error;
mod estimate;
mod fleet_model;
mod inputs;
mod judge;
mod latency;
mod lp;
mod objective;
mod optimal;
mod options;
mod parva;
mod placement;
mod plan_options;
mod planning;
mod problem;
mod replan;
mod report;
mod round;
mod service_check;
mod spread;
mod strategy;
mod tolerance;
mod verification;
mod verify;

pub use complete::{
    complete_profiles, suggest_measurements, CompletionMethod, CompletionRequest, Feasibility, Interval,
    ModelCompletion, Prediction, ProfileGrid, Suggestion, GRID_BATCHES, GRID_PROCS, INTERVAL_COVERAGE, SEED_POINTS,
};
pub use error::{PlanError, UnmeetableSlo};
pub use estimate::{complete_for_fleet, Estimate, EstimateSource, ProfileOrigin};
pub use inputs::PlanInputs;
pub use latency::{LatencyRule, DEFAULT_MARGIN, MAX_MARGIN};
pub use optimal::{RelaxationBound, DEFAULT_TIME_LIMIT};
pub use placement::{node_number, Inventory, NodeRef, TargetNode};
#[cfg(feature = "clap")]
pub use plan_options::parse_margin;
pub use plan_options::{Arrivals, PlanOptions, ReplanOptions, DEFAULT_GPU_MODEL};
pub use planning::{
    plan, recorded_arrivals, recorded_rule, relaxation_bound, PlanRequest, Planned, ReplanComparison, ReplanFrom,
};
pub use problem::{DEFAULT_GPUS_PER_NODE, DEFAULT_MAX_GPUS, DEFAULT_MAX_PROCS, MAX_GPUS_LIMIT};
pub use replan::{align_to, reseat, GpuPosition};
pub use service_check::ServiceCheck;
pub use strategy::Strategy;
pub use tolerance::TOLERANCE_RANGE;
pub use verification::{verify_plan, CheckOptions, Finding, Verification};
pub use verify::{check_structure, verify, verify_structure, InstanceRef, VerifyRequest, Violation};
