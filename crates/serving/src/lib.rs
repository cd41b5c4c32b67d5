//! Tessera's serving model: how requests meet a plan.
//!
//! A plan is only as good as the traffic model it was proven under. This
//! crate holds that model in one place:
//!
//! * [`SegmentShape`] — how one segment serves: its MPS processes, its
//!   largest batch, and the latency of every batch size it may run (a
//!   partial batch runs at the profiled latency of the smallest profiled
//!   batch that holds it).
//! * [`ArrivalModel`] — how a service's requests arrive: Poisson, a renewal
//!   process with a given coefficient of variation, an on/off burst process,
//!   or a replayed timestamp trace, each scaled to the service's mean rate.
//! * [`Discipline`] — how requests reach a segment's processes and queue.
//! * [`analytic`] — the exact percentile latency of a segment under Poisson
//!   arrivals and random routing to its processes, and its capacity at a
//!   percentile SLO ([`analytic::CapacityCache`] memoises them).
//!
//! Invariant: no I/O, no global state; the same inputs and seed give the
//! same results on every machine.

pub mod analytic;
mod arrivals;
mod discipline;
mod error;
mod shape;

pub use arrivals::ArrivalModel;
pub use discipline::Discipline;
pub use error::ServingError;
pub use shape::SegmentShape;
