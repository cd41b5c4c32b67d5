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
//!   or a replayed timestamp trace, each scaled to the service's mean rate;
//!   [`ArrivalModel::parse`] reads the command-line syntax and
//!   [`ArrivalModel::stream`] gives a service's [`ArrivalStream`].
//! * [`Discipline`] — how requests reach a segment's processes and queue.
//! * [`ServingSystem`] — services (rate, latency SLO, percentile) and the
//!   segments that serve them with routing weights, checked; built by hand
//!   or from a plan ([`ServingSystem::from_plan`]).
//! * [`simulate`] — the request-level simulator, the referee of every
//!   plan: per service attainment, latency percentiles with confidence
//!   intervals, a latency CDF and attainment over time; per segment
//!   utilisation ([`ServingReport`]).
//!
//! Modules: `arrivals` (the models, their syntax and checks), `stream` (the
//! generators), `sampling` (exponential, gamma, hyperexponential and alias
//! draws), `system`, `histogram` (log-bucketed latency counts), `simulate`
//! (`queue`: the batching queue; `service`: one service's run; `report`;
//! `stats`: confidence intervals), `measured` (a run measured on a GPU).
//! * [`Capacities`] — a segment's capacity at a percentile SLO under any
//!   arrival model: exact under Poisson ([`analytic`]), searched for with
//!   the simulator under the others ([`simulated_capacity_rps`]); memoised.
//! * [`MeasuredServing`] — a serving run measured on a GPU and the model's
//!   percentiles for the same profile and rate
//!   ([`MeasuredServing::compare_with_model`]).
//! * [`analytic`] — the exact percentile latency of a segment under Poisson
//!   arrivals and random routing to its processes, and its capacity at a
//!   percentile SLO ([`analytic::CapacityCache`] memoises them).
//!
//! Invariant: no I/O, no global state; the same inputs and seed give the
//! same results on every machine.

pub mod analytic;
mod arrivals;
mod capacity;
mod discipline;
mod error;
mod histogram;
mod measured;
mod sampling;
mod shape;
mod simulate;
mod stream;
mod system;

pub use arrivals::{ArrivalModel, MAX_CV};
pub use capacity::{simulated_capacity_rps, Capacities, SIMULATED_REQUESTS, SIMULATED_STEPS};
pub use discipline::Discipline;
pub use error::ServingError;
pub use measured::{LevelComparison, MeasuredBatch, MeasuredLevel, MeasuredServing};
pub use shape::{ProfiledShape, SegmentShape};
pub use simulate::{
    simulate, CdfPoint, Interval, SegmentOutcome, ServiceMeasures, ServiceOutcome, ServingReport, SimulationOptions,
    SloVerdict, TimelineBucket, WindowsMet, WorstService, BATCHES, MAX_TIMELINE_BUCKETS, MAX_WAITING,
};
pub use stream::ArrivalStream;
pub use system::{ServedSegment, ServedService, ServicePrediction, ServingSystem};
