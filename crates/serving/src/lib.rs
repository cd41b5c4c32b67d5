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
//!   utilisation ([`ServingReport`]). [`simulate_attainment`] counts only
//!   the requests within each SLO, the same counts, without running the
//!   requests a queue far past its throughput surely serves late.
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
//! * `ServingSystem::with_shared` — shared instances: members whose one
//!   executor the simulator runs as the serialized discipline says.
//! * [`serialized`] — a shared instance under the serialized discipline
//!   (one executor, one batch at a time, the oldest head first): the
//!   waiting time its members' requests see under Poisson arrivals, exact
//!   to a grid and rounded up.
//! * [`analytic`] — the exact percentile latency of a segment under Poisson
//!   arrivals and random routing to its processes, and its capacity at a
//!   percentile SLO ([`analytic::CapacityCache`] memoises them;
//!   [`analytic::AttainmentCache`] answers a segment's share within an SLO
//!   from a grid of rates, to within [`analytic::ATTAINMENT_TOLERANCE`]).
//!
//! Invariant: no I/O, no global state; the same inputs and seed give the
//! same results on every machine.
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! **API boundary:** private modules and root re-exports, plus the public
//! `analytic` module. The serving model: how requests meet a plan, in one
//! place for the planner, the verifier, the simulator and the reports.
//! `shape` is a `SegmentShape` (MPS processes, the largest batch, and the
//! latency of each batch size a process may run: a partial batch runs at the
//! profiled latency of the smallest profiled batch that holds it;
//! `SegmentShape::from_profile` builds it from a catalogue and
//! `SegmentShape::conservative` from any profiled points, saying what they
//! had to raise to keep latency non-decreasing; where the profile carries a
//! `BatchTiming`, each batch is slowed by its serving slowdown and followed
//! by its dispatch gap, and the shape's `p99_ratio` spreads its run times:
//! the analytic model charges every request that share of a full batch,
//! the simulator draws each batch's run time around its mean); `arrivals` the
//! `ArrivalModel`s (Poisson, a renewal process of a given coefficient of
//! variation, an on/off burst process, a replayed trace) and their
//! command-line syntax; `stream` their generators; `sampling` the random
//! variates (on `core::rng::SplitMix64`); `discipline` how requests reach a
//! segment's processes (`Discipline`: random per-process queues, what the
//! deployment sets up, and join-shortest-queue, round-robin and one shared
//! queue); `system` a `ServingSystem` (services, their segments and routing
//! weights; `from_plan` weighs segments by their recorded capacities, and
//! `predict` gives a service's analytic percentile latency and attainment);
//! `simulate` the request-level simulator (`queue` a batching FIFO queue in
//! front of its processes, `service` one service's run in one replication,
//! `shared` one shared instance's members run together,
//! `report` the summed `ServingReport`, `stats` Student's t intervals over
//! replications or batches of a run), services simulated on threads (rayon)
//! with streams of their own so the result does not depend on the thread
//! count; `histogram` log-bucketed latencies; `measured` a serving run measured
//! on a GPU (`MeasuredServing`, the JSON `examples/workloads/torch_serve.py`
//! writes) beside the model's percentiles for its profile and rate, and
//! `measured_shared` a shared instance measured so (`MeasuredShared`,
//! `torch_serve.py --members`) beside the serialized model's members. `analytic` is the exact
//! percentile latency of one process under Poisson arrivals and greedy
//! dynamic batching (`chain` the queue at batch starts, `ladder` the
//! full-batch random walk's ladder heights, `latency` `P(T > t)`, `poisson`
//! windowed Poisson terms, `process` a process's latency levels, `search`
//! the two searches: latency at a percentile, capacity at an SLO; `predict`
//! both figures of a segment from one tabulation) and `CapacityCache`, its
//! memo. `capacity` is `Capacities`, the memo the planner and the verifier
//! share: a segment's capacity under any arrival model, the analytic one
//! under Poisson and, under the others, a search with the simulator (the
//! segment alone fed the model, a trial passing on the lower end of its
//! attainment's interval). Error type: `ServingError`.

pub mod analytic;
mod arrivals;
mod capacity;
mod discipline;
mod error;
mod histogram;
mod measured;
mod measured_shared;
mod sampling;
pub mod serialized;
mod shape;
mod simulate;
mod stream;
mod system;

pub use arrivals::{ArrivalModel, MAX_CV};
pub use capacity::{simulated_capacity_rps, Capacities, SIMULATED_REQUESTS, SIMULATED_STEPS};
pub use discipline::Discipline;
pub use error::ServingError;
pub use measured::{LevelComparison, MeasuredBatch, MeasuredLevel, MeasuredServing};
pub use measured_shared::{MeasuredMember, MeasuredShared, MemberComparison, SharedComparison};
pub use shape::{ProfiledShape, SegmentShape};
pub use simulate::{
    simulate, simulate_attainment, Attained, CdfPoint, Interval, SegmentOutcome, ServiceMeasures, ServiceOutcome,
    ServingReport, SimulationOptions, SloVerdict, TimelineBucket, WindowsMet, WorstService, BATCHES,
    MAX_TIMELINE_BUCKETS, MAX_WAITING,
};
pub use stream::ArrivalStream;
pub use system::{ServedSegment, ServedService, ServicePrediction, ServingSystem};
