//! Tessera's GPU memory oversubscription simulator: clients share one GPU
//! whose memory cannot hold all their data; a schedule orders their
//! operations on the compute engine and policies decide what to evict and
//! what to fetch ahead. The simulator reports the makespan, stalls, bytes
//! moved and every engine's busy intervals.
//!
//! Invariant: no I/O, no global state, no unseeded randomness; the same trace,
//! schedule and policies always give the same result.
//!
//! # Model
//!
//! The numbers this crate produces depend on these choices:
//!
//! - **Engines.** One compute engine runs operations one at a time, in
//!   schedule order. One host-to-device (H2D) and one device-to-host (D2H)
//!   copy engine each run one copy at a time. Copies of different buffers
//!   never overlap on one engine; H2D and D2H overlap with each other and
//!   with compute.
//! - **Time.** Integer nanoseconds. A copy of `b` bytes takes
//!   `copy_latency_ns + ceil(b × 1e9 / bytes_per_s)`; `compute_ms` is
//!   rounded to the nanosecond. At one instant all completions are applied
//!   before any decision (so memory freed at `t` can be used at `t`).
//! - **Memory.** A copy takes its bytes of memory when it *starts*; a job
//!   therefore holds memory from the start of its transfer. Ephemeral bytes
//!   are taken when compute starts and given back when it ends. A clean
//!   buffer's memory is free the moment it is evicted; a dirty one's when
//!   its D2H write-back ends.
//! - **Copy granularity.** Demand, `Passive` and `Lookahead` copy whole
//!   buffers, one copy (and one latency) per buffer. `Active` copies a
//!   buffer in chunks sized by the free memory at the time, each chunk a
//!   separate copy paying the latency; so under `Active` a job's transfer
//!   can split around other jobs' memory being freed. Demand evicts before
//!   each buffer copy until that buffer fits (never partially).
//! - **When a copy may start.** Demand fetch: only when the compute engine
//!   is idle and the next operation's data is missing; this has priority
//!   over any prefetch. `Passive`: the first operation from the next one to
//!   compute onwards whose data is not all resident, only once all its
//!   missing bytes fit in free memory (no eviction, no skipping ahead).
//!   `Active`: the same first operation, whatever part of it fits now.
//!   `Lookahead(k)`: the first of the next `k` operations (after the
//!   running one) with missing data, evicting only buffers whose next use
//!   is after that operation (do no harm); if that is not enough it waits.
//! - **Eviction.** Never a buffer of the running operation, a buffer being
//!   copied, or a buffer of the operation being fetched for. `Lru` orders
//!   by last use (compute start or end) or arrival; `Belady` by next use
//!   from the next operation to start, never-again first. Ties go to the
//!   lower buffer id (first appearance in the schedule). Nothing is evicted
//!   unless the bytes needed can be reached.
//! - **Dead buffers** follow [`Retention`]: released after their last use
//!   (a job frees its memory when it ends) or kept as cache until evicted.
//!   Dirty buffers are written back before release; the makespan includes
//!   those write-backs.
//! - **Dirtiness.** A buffer becomes dirty when an operation that lists it
//!   with `dirty: true` ends, and clean again after its write-back.
//! - **Ties.** Events of one instant apply in the order write-back ends,
//!   compute ends, copy-in ends, each kind in the order scheduled.
//!
//! # Bounds
//!
//! [`lower_bound_ns`] counts copies and compute only; [`memory_lower_bound_ns`]
//! also counts the waits memory forces at the client switches every
//! schedule has (the argument is in `memory_bound.rs`). Both hold for every
//! schedule and policy; tests check them against exhaustive search.
//!
//! # Searching
//!
//! The genetic search simulates many schedules of one trace from a compiled
//! form (no labels, no intervals), a generation's simulations in parallel
//! (rayon; no I/O), with every random draw on one thread, so its result for
//! a seed does not depend on threads or timing. A run records, for each
//! instant, the furthest schedule position any decision so far looked at;
//! a schedule that agrees with it up to there resumes from a checkpoint
//! instead of starting over (used by local search's moves).
//!
//! # Running for real
//!
//! [`execution_plan`] turns a simulated run into commands for an executor
//! (copies, write-backs, computes, frees; each with the commands of other
//! engines it must wait for), which `tessera-gpu` runs on a GPU.
//!
//! # Design notes
//!
//! A tour of the modules; ARCHITECTURE.md holds the crate's invariants and
//! the tests that enforce them.
//!
//! **API boundary:** private modules, root re-exports. `trace` is the JSON
//! trace schema (a GPU's memory and copy engines; clients as chains of
//! operations over persistent buffers, clean or dirty, and ephemeral bytes),
//! validated so that every time fits the `u64` ns clock, with its
//! oversubscription (persistent bytes over the memory beside the largest
//! scratch). `schedule` is a checked order of operations; `workload` compiles a
//! trace once (buffers numbered, times in ns) and resolves it under a schedule;
//! `engine` the discrete-event simulator (one compute, one H2D and one D2H
//! engine; `memory` the resident set), which records intervals and frees for
//! `simulate` and only totals for a search, and can save checkpoints and
//! resume from one for any schedule that agrees up to the furthest position a
//! decision looked at; `policy` eviction (LRU, Belady), prefetch (none,
//! passive, active, lookahead-k) and retention; `result` makespan, stalls,
//! bytes, engine intervals and frees; `bound` the plain lower bound and
//! Johnson's rule, `memory_bound` the memory-aware bound (client-switch waits
//! as a min-cost flow; memory × time); `schedulers` round-robin, Johnson per
//! round, the weight-based greedy, client-by-client orders, the genetic
//! algorithm (generations simulated in parallel with rayon, local search
//! resuming from checkpoints) and exhaustive search; `execution` a simulated
//! run as commands for an executor (`ExecutionPlan`); `measured` runs of
//! those commands on a GPU beside their simulations (`compare_runs`); `generate` synthetic
//! traces from a table of public model figures; `gantt` an SVG chart. The
//! crate docs list every modelling choice. Error type: `SimError`.

#![warn(missing_docs)]

mod bound;
mod engine;
mod error;
mod execution;
mod gantt;
mod generate;
mod measured;
mod memory;
mod memory_bound;
mod policy;
mod result;
mod schedule;
mod schedulers;
mod trace;
mod workload;

pub use bound::{johnson, lower_bound_ns, memory_lower_bound_ns, JohnsonPlan};
pub use engine::simulate;
pub use error::SimError;
pub use execution::{execution_plan, After, Command, CommandKind, ExecutionPlan, Totals, EXECUTION_PLAN_VERSION};
pub use gantt::gantt_svg;
pub use generate::{generate, GenerateParams, Link};
pub use measured::{compare_runs, Gain, MeasuredRun, RunComparison, ScheduleComparison};
pub use policy::{Eviction, Policies, Prefetch, Retention};
pub use result::{EngineKind, Free, Interval, SimResult};
pub use schedule::Schedule;
pub use schedulers::{
    genetic_search, plan_schedule, GeneticParams, SchedulerKind, SearchStats, EXHAUSTIVE_MAX_OPERATIONS,
};
pub use trace::{Buffer, Client, Gpu, Operation, Trace};
