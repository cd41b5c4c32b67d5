//! Tessera's planners: from services with SLOs and segment profiles to a
//! [`Plan`](tessera_core::Plan) of MIG instances with MPS segments.
//!
//! * [`configure`] — the segment configurator: per service, which
//!   (size, batch, processes) triplets to run and how many segments.
//! * [`allocate`] — the segment allocator: which GPU each segment goes to,
//!   on the real MIG placement lattice.
//! * [`parva`] — the `parva` strategy, ParvaGPU's configurator + allocator
//!   with physically valid placements and nothing dropped.
//! * [`options`] and [`optimal`] — the `optimal` strategy: every minimal way
//!   to serve each service, and a search for the fewest GPUs with a bound.
//! * [`verify`] — an independent checker of any plan against profiles and
//!   SLOs; it shares no code with the planners except the latency rule.
//!
//! Invariant: no I/O, no global state.

pub mod allocate;
mod assemble;
pub mod bound;
mod branch;
pub mod configure;
pub mod error;
pub mod estimate;
pub mod latency;
mod objective;
pub mod optimal;
pub mod options;
pub mod parva;
pub mod report;
pub mod request;
pub mod verify;

pub use error::PlanError;
pub use estimate::{complete_for_fleet, Estimate, EstimateSource, ProfileOrigin};
pub use latency::LatencyRule;
pub use optimal::plan_optimal;
pub use parva::plan_parva;
pub use request::PlanRequest;
pub use verify::{verify, VerifyRequest, Violation};
