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

use crate::bound::memory_lower_bound_ns;
use crate::error::SimError;
use crate::policy::Policies;
use crate::schedule::Schedule;
use crate::trace::Trace;

pub use exhaustive::EXHAUSTIVE_MAX_OPERATIONS;
pub use genetic::SearchStats;

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
/// (host-to-device plus device-to-host). The first population holds the
/// Fifo, Johnson and Greedy schedules, two client-by-client schedules
/// (clients in Johnson's order of copy-in and total compute; clients by
/// increasing working set) and random shuffles. Each generation keeps the
/// `elite` fittest genomes, fills the rest of the population with children
/// of parents picked by binary tournament (order crossover on occurrence
/// labels), mutates each child with probability `mutation_rate` by swapping
/// two positions, and then improves the fittest genome by local search:
/// rounds of `local_moves` random swap or insert moves, each round taking
/// the best that improves (at most 8 rounds a generation). The search stops
/// after `generations` generations, after `patience` generations without
/// improving the fitness by `min_improvement`, or — when `bytes_weight` is 0 — as soon as the
/// best makespan equals [`crate::memory_lower_bound_ns`] (it is then
/// optimal). It returns the fittest genome ever seen, so it is never worse
/// (in fitness) than the schedules it starts from. The simulations of one
/// generation run on every core; the result does not depend on how many.
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
    /// What counts as an improvement for `patience`: the best fitness
    /// falling by at least this fraction (in `[0, 1)`; 0: any decrease)
    /// below the best when patience last restarted.
    pub min_improvement: f64,
    /// Nanoseconds of fitness per byte moved (finite, at least 0).
    pub bytes_weight: f64,
    /// Random moves tried per round of local search (0: none).
    pub local_moves: usize,
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
            min_improvement: 1e-3,
            bytes_weight: 0.0,
            local_moves: 32,
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
        SchedulerKind::Genetic(params) => return genetic_search(trace, policies, params, progress).map(|(s, _)| s),
        SchedulerKind::Exhaustive => exhaustive::search(trace, policies, progress)?,
    };
    Schedule::new(trace, &ids)
}

pub use heuristics::greedy_order;

/// [`plan_schedule`] with [`SchedulerKind::Genetic`], also returning what
/// the search did.
pub fn genetic_search(
    trace: &Trace,
    policies: Policies,
    params: &GeneticParams,
    progress: &mut dyn FnMut(usize, u64),
) -> Result<(Schedule, SearchStats), SimError> {
    let bound_ns = memory_lower_bound_ns(trace, policies)?;
    let (ids, stats) = genetic::search(trace, policies, params, bound_ns, progress)?;
    Ok((Schedule::new(trace, &ids)?, stats))
}

/// Fisher–Yates shuffle drawing from `rng`.
pub(crate) fn shuffle(ids: &mut [usize], rng: &mut SplitMix64) {
    for i in (1..ids.len()).rev() {
        let j = rng.below(i + 1);
        ids.swap(i, j);
    }
}
