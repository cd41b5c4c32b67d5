//! Schedulers: ways to choose the [`Schedule`] a trace runs in, each judged
//! by [`simulate`] under the given policies.
//!
//! - [`SchedulerKind::Fifo`]: round-robin over the clients.
//! - [`SchedulerKind::Johnson`]: Johnson's rule, round by round.
//! - [`SchedulerKind::Greedy`]: the weight-based policy of the design notes.
//! - [`SchedulerKind::Genetic`]: a genetic search seeded with the three above.
//! - [`SchedulerKind::Exhaustive`]: every distinct interleaving (small traces).
//!
//! A *round* `r` is every client's `r`-th operation (clients with fewer
//! operations drop out of later rounds). The heuristic schedulers emit one
//! round after another.
//!
//! Everything here is deterministic: the genetic search draws from a
//! [`SplitMix64`] seeded by [`GeneticParams::seed`], so the same trace,
//! policies and parameters always give the same schedule.

mod exhaustive;
mod genetic;
mod heuristics;

use tessera_core::rng::SplitMix64;

use crate::engine::simulate;
use crate::error::SimError;
use crate::policy::Policies;
use crate::schedule::Schedule;
use crate::trace::Trace;

pub use exhaustive::EXHAUSTIVE_MAX_OPERATIONS;

/// Which scheduler [`plan_schedule`] runs.
#[derive(Debug, Clone, PartialEq)]
pub enum SchedulerKind {
    /// Round-robin: client 0's first operation, client 1's first, …, then
    /// every client's second operation, and so on.
    Fifo,
    /// Johnson's rule (copy in, then compute, as a two-machine flow shop).
    /// On a one-pass trace this is exactly [`crate::johnson`]'s order. With
    /// several operations per client the rule is applied to each round on
    /// its own (an operation's copy time counts all its buffers, as if none
    /// were resident), and the rounds run one after another.
    Johnson,
    /// The design notes' weight-based policy; see `greedy_order`.
    Greedy,
    /// A genetic search over client-id sequences (see [`GeneticParams`]).
    Genetic(GeneticParams),
    /// Every distinct interleaving, simulated; the one with the smallest
    /// makespan wins (ties: fewer bytes moved, then the first enumerated in
    /// lexicographic order of client ids). Refuses traces with more than
    /// [`EXHAUSTIVE_MAX_OPERATIONS`] operations.
    Exhaustive,
}

impl SchedulerKind {
    /// The scheduler's name for people: `round-robin`, `Johnson's rule`,
    /// `greedy`, `genetic algorithm` or `exhaustive search`.
    pub fn name(&self) -> &'static str {
        match self {
            SchedulerKind::Fifo => "round-robin",
            SchedulerKind::Johnson => "Johnson's rule",
            SchedulerKind::Greedy => "greedy",
            SchedulerKind::Genetic(_) => "genetic algorithm",
            SchedulerKind::Exhaustive => "exhaustive search",
        }
    }
}

/// Parameters of the genetic search.
///
/// Fitness (smaller is better) is `makespan_ns + bytes_weight × bytes moved`
/// (host-to-device plus device-to-host). Each generation keeps the `elite`
/// fittest genomes, fills the rest of the population with children of
/// parents picked by binary tournament (order crossover on occurrence
/// labels), and mutates each child with probability `mutation_rate` by
/// swapping two positions. The search stops after `generations`
/// generations or after `patience` generations without a strictly better
/// fitness, and returns the fittest genome ever seen, so it is never worse
/// (in fitness) than the Fifo, Johnson and Greedy schedules it starts from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeneticParams {
    /// Genomes per generation (at least 1; the seeds are always included).
    pub population: usize,
    /// Most generations after the initial one.
    pub generations: usize,
    /// Fittest genomes copied unchanged into the next generation (at most `population`).
    pub elite: usize,
    /// Probability in `[0, 1]` that a child gets one swap mutation.
    pub mutation_rate: f64,
    /// Stop after this many generations without improvement.
    pub patience: usize,
    /// Nanoseconds of fitness per byte moved (finite, at least 0).
    pub bytes_weight: f64,
    /// Seed of the random generator.
    pub seed: u64,
}

impl Default for GeneticParams {
    fn default() -> Self {
        GeneticParams {
            population: 100,
            generations: 200,
            elite: 10,
            mutation_rate: 0.2,
            patience: 40,
            bytes_weight: 0.0,
            seed: 0,
        }
    }
}

/// Plans a schedule for `trace` under `policies` with the scheduler `kind`.
///
/// `progress(generation, best_makespan_ns)` is called by the searching
/// schedulers: [`SchedulerKind::Genetic`] once per generation (0 is the
/// initial population) with the makespan of the fittest genome so far;
/// [`SchedulerKind::Exhaustive`] at every new best, with the number of
/// schedules simulated so far in place of the generation. The heuristic
/// schedulers never call it.
pub fn plan_schedule(
    trace: &Trace,
    policies: Policies,
    kind: &SchedulerKind,
    progress: &mut dyn FnMut(usize, u64),
) -> Result<Schedule, SimError> {
    trace.validate()?;
    let ids = match kind {
        SchedulerKind::Fifo => heuristics::fifo_order(trace),
        SchedulerKind::Johnson => heuristics::johnson_order(trace),
        SchedulerKind::Greedy => greedy_order(trace),
        SchedulerKind::Genetic(params) => genetic::search(trace, policies, params, progress)?,
        SchedulerKind::Exhaustive => exhaustive::search(trace, policies, progress)?,
    };
    Schedule::new(trace, &ids)
}

pub use heuristics::greedy_order;

/// Makespan and bytes moved of one client-id sequence.
pub(crate) fn evaluate(trace: &Trace, ids: &[usize], policies: Policies) -> Result<(u64, u64), SimError> {
    let schedule = Schedule::new(trace, ids)?;
    let result = simulate(trace, &schedule, policies)?;
    Ok((result.makespan_ns, result.h2d_bytes.saturating_add(result.d2h_bytes)))
}

/// Fisher–Yates shuffle drawing from `rng`.
pub(crate) fn shuffle(ids: &mut [usize], rng: &mut SplitMix64) {
    for i in (1..ids.len()).rev() {
        let j = rng.below(i + 1);
        ids.swap(i, j);
    }
}
