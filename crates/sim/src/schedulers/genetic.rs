//! The genetic search (see [`super::GeneticParams`]).
//!
//! A genome is a client-id sequence with each client as many times as it
//! has operations, so every genome is a valid schedule. Crossover is order
//! crossover (OX) on occurrence labels: position `p` of a genome is labelled
//! `(client, k)` when it is that client's `k`-th occurrence; the child takes
//! a random slice of positions from the first parent and fills the other
//! positions with the remaining labels in the second parent's order, so
//! multiplicities are preserved. Mutation swaps two positions holding
//! different clients. After each generation a local search tries swap and
//! insert moves on the fittest genome and keeps the best that improves it.
//!
//! Speed without giving up determinism: every random draw happens on one
//! thread, in a fixed order; only the simulations of a generation's new
//! genomes (and of a batch of moves) run in parallel (rayon), and their
//! results are used in genome order. Simulations are cached by genome. A
//! move changes the genome from its first moved position on, so its
//! simulation resumes from the fittest genome's last checkpoint that no
//! later position influenced (see `engine::Checkpoint`).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use rayon::prelude::*;
use tessera_core::rng::SplitMix64;

use super::{heuristics, shuffle, GeneticParams};
use crate::engine::{simulate_compiled, Checkpoint};
use crate::error::SimError;
use crate::policy::Policies;
use crate::trace::{Gpu, Trace};
use crate::workload::{Compiled, Workload};

/// A genome and its (fitness, makespan).
#[derive(Clone)]
struct Scored {
    ids: Vec<usize>,
    fitness: f64,
    makespan_ns: u64,
}

fn check(params: &GeneticParams) -> Result<(), SimError> {
    let bad = |name, rule, value: String| Err(SimError::GeneticParams { name, rule, value });
    if params.population == 0 {
        return bad("population", "at least 1", params.population.to_string());
    }
    if params.elite > params.population {
        return bad("elite", "at most the population", params.elite.to_string());
    }
    if !(0.0..=1.0).contains(&params.mutation_rate) {
        return bad("mutation_rate", "in [0, 1]", params.mutation_rate.to_string());
    }
    if !(0.0..1.0).contains(&params.min_improvement) {
        return bad("min_improvement", "in [0, 1)", params.min_improvement.to_string());
    }
    if !(params.bytes_weight.is_finite() && params.bytes_weight >= 0.0) {
        return bad("bytes_weight", "a finite number at least 0", params.bytes_weight.to_string());
    }
    Ok(())
}

/// A fast hash for genomes (the cache's keys; no untrusted input).
#[derive(Default)]
struct GenomeHasher(u64);

impl Hasher for GenomeHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type GenomeMap<V> = HashMap<Vec<usize>, V, BuildHasherDefault<GenomeHasher>>;
type GenomeSet<'g> = HashSet<&'g Vec<usize>, BuildHasherDefault<GenomeHasher>>;

/// Checkpoints of the genome local search starts from.
struct Anchor {
    ids: Vec<usize>,
    checkpoints: Vec<Checkpoint>,
}

/// Checkpoints per anchor genome (at most about this many).
const CHECKPOINTS: usize = 64;

struct Evaluator<'a> {
    gpu: &'a Gpu,
    compiled: &'a Compiled,
    policies: Policies,
    bytes_weight: f64,
    cache: GenomeMap<(f64, u64)>,
    /// Simulated operations, and those skipped by resuming from a checkpoint.
    simulated_steps: u64,
    resumed_steps: u64,
}

impl Evaluator<'_> {
    fn fitness(&self, (makespan_ns, bytes): (u64, u64)) -> (f64, u64) {
        (makespan_ns as f64 + self.bytes_weight * bytes as f64, makespan_ns)
    }

    /// Scores every genome (simulating those not cached, in parallel),
    /// in order. With an anchor, each genome's simulation resumes from the
    /// anchor's checkpoint before its first difference.
    fn score_all(&mut self, genomes: Vec<Vec<usize>>, anchor: Option<&Anchor>) -> Result<Vec<Scored>, SimError> {
        let mut seen = GenomeSet::default();
        let todo: Vec<&Vec<usize>> =
            genomes.iter().filter(|ids| !self.cache.contains_key(*ids) && seen.insert(*ids)).collect();
        let (gpu, compiled, policies) = (self.gpu, self.compiled, self.policies);
        // ((makespan, bytes), operations skipped by resuming) per genome.
        type Outcome = Result<((u64, u64), usize), SimError>;
        let results: Vec<Outcome> = todo
            .par_iter()
            .map(|ids| {
                let work = Workload::new(compiled, ids);
                let resume = anchor.and_then(|anchor| {
                    let first = anchor.ids.iter().zip(ids.iter()).position(|(a, b)| a != b).unwrap_or(ids.len());
                    let usable = anchor.checkpoints.partition_point(|c| c.horizon() < first);
                    usable.checked_sub(1).map(|i| &anchor.checkpoints[i])
                });
                let skipped = resume.map_or(0, Checkpoint::started);
                Ok((simulate_compiled(gpu, &work, policies, resume, None)?, skipped))
            })
            .collect();
        for (ids, result) in todo.iter().zip(results) {
            let (value, skipped) = result?;
            self.simulated_steps += (ids.len() - skipped) as u64;
            self.resumed_steps += skipped as u64;
            let scored = self.fitness(value);
            self.cache.insert((*ids).clone(), scored);
        }
        Ok(genomes
            .into_iter()
            .map(|ids| {
                let (fitness, makespan_ns) = self.cache[&ids];
                Scored { ids, fitness, makespan_ns }
            })
            .collect())
    }

    /// Checkpoints of `ids` (one more simulation, not cached).
    fn anchor(&self, ids: &[usize]) -> Result<Anchor, SimError> {
        let work = Workload::new(self.compiled, ids);
        let mut checkpoints = Vec::new();
        let every = ids.len().div_ceil(CHECKPOINTS);
        simulate_compiled(self.gpu, &work, self.policies, None, Some((&mut checkpoints, every)))?;
        Ok(Anchor { ids: ids.to_vec(), checkpoints })
    }
}

/// Order crossover on occurrence labels (see the module documentation).
fn crossover(a: &[usize], b: &[usize], offsets: &[usize], rng: &mut SplitMix64) -> Vec<usize> {
    let n = a.len();
    let labels = |genome: &[usize]| {
        let mut seen = vec![0usize; offsets.len()];
        genome
            .iter()
            .map(|&c| {
                seen[c] += 1;
                offsets[c] + seen[c] - 1
            })
            .collect::<Vec<usize>>()
    };
    let (la, lb) = (labels(a), labels(b));
    let (mut i, mut j) = (rng.below(n), rng.below(n));
    if i > j {
        std::mem::swap(&mut i, &mut j);
    }
    let mut taken = vec![false; n];
    for &label in &la[i..=j] {
        taken[label] = true;
    }
    let mut fill = lb.iter().filter(|&&label| !taken[label]);
    a.iter()
        .enumerate()
        .map(|(p, &c)| if (i..=j).contains(&p) { c } else { client_of(*fill.next().expect("labels left"), offsets) })
        .collect()
}

/// The client a label belongs to (`offsets` is increasing, one per client).
fn client_of(label: usize, offsets: &[usize]) -> usize {
    offsets.partition_point(|&o| o <= label) - 1
}

/// Swaps two positions holding different clients (a few tries).
fn mutate(ids: &mut [usize], rng: &mut SplitMix64) {
    for _ in 0..8 {
        let (p, q) = (rng.below(ids.len()), rng.below(ids.len()));
        if ids[p] != ids[q] {
            ids.swap(p, q);
            return;
        }
    }
}

/// Binary tournament: the fitter of two random genomes.
fn tournament<'p>(population: &'p [Scored], rng: &mut SplitMix64) -> &'p Scored {
    let (x, y) = (&population[rng.below(population.len())], &population[rng.below(population.len())]);
    if y.fitness < x.fitness {
        y
    } else {
        x
    }
}

fn sort(population: &mut [Scored]) {
    population.sort_by(|x, y| x.fitness.total_cmp(&y.fitness).then_with(|| x.ids.cmp(&y.ids)));
}

/// A move of local search: swap two positions, or take one out and put it
/// back elsewhere.
#[derive(Clone, Copy)]
enum Move {
    Swap(usize, usize),
    Insert { from: usize, to: usize },
}

impl Move {
    fn random(ids: &[usize], rng: &mut SplitMix64) -> Option<Move> {
        for _ in 0..8 {
            let (p, q) = (rng.below(ids.len()), rng.below(ids.len()));
            if ids[p] == ids[q] {
                continue;
            }
            return Some(if rng.below(2) == 0 { Move::Swap(p, q) } else { Move::Insert { from: p, to: q } });
        }
        None
    }

    fn apply(self, ids: &[usize]) -> Vec<usize> {
        let mut moved = ids.to_vec();
        match self {
            Move::Swap(p, q) => moved.swap(p, q),
            Move::Insert { from, to } => {
                let client = moved.remove(from);
                moved.insert(to, client);
            }
        }
        moved
    }
}

/// What the search reports when it ends (for benchmarks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Generations run after the initial population.
    pub generations: usize,
    /// Schedules simulated (cache hits not counted).
    pub simulations: usize,
    /// Operations simulated, and operations skipped by resuming a move's
    /// simulation from a checkpoint.
    pub simulated_steps: u64,
    /// See `simulated_steps`.
    pub resumed_steps: u64,
    /// Whether the search stopped because its best makespan met the bound.
    pub met_bound: bool,
}

pub(crate) fn search(
    trace: &Trace,
    policies: Policies,
    params: &GeneticParams,
    bound_ns: u64,
    progress: &mut dyn FnMut(usize, u64),
) -> Result<(Vec<usize>, SearchStats), SimError> {
    check(params)?;
    let mut rng = SplitMix64::new(params.seed);
    let compiled = Compiled::new(trace);
    let mut eval = Evaluator {
        gpu: &trace.gpu,
        compiled: &compiled,
        policies,
        bytes_weight: params.bytes_weight,
        cache: GenomeMap::default(),
        simulated_steps: 0,
        resumed_steps: 0,
    };
    let mut offsets = Vec::with_capacity(trace.clients.len());
    let mut total = 0;
    for client in &trace.clients {
        offsets.push(total);
        total += client.operations.len();
    }

    let fifo = heuristics::fifo_order(trace);
    let mut seeds: Vec<Vec<usize>> = Vec::new();
    for seed in [
        fifo.clone(),
        heuristics::johnson_order(trace),
        heuristics::greedy_order(trace),
        heuristics::blocks_johnson_order(trace),
        heuristics::blocks_by_working_set_order(trace),
    ] {
        if !seeds.contains(&seed) {
            seeds.push(seed);
        }
    }
    let size = params.population.max(seeds.len());
    let mut genomes = seeds;
    while genomes.len() < size {
        let mut ids = fifo.clone();
        shuffle(&mut ids, &mut rng);
        genomes.push(ids);
    }
    let mut population = eval.score_all(genomes, None)?;
    sort(&mut population);
    let mut best = population[0].clone();
    progress(0, best.makespan_ns);
    // With fitness = makespan, a makespan at the lower bound is optimal.
    let optimal = |best: &Scored| params.bytes_weight == 0.0 && best.makespan_ns <= bound_ns;
    let mut stats = SearchStats::default();

    let (mut stale, mut reference) = (0, best.fitness);
    for generation in 1..=params.generations {
        if optimal(&best) {
            stats.met_bound = true;
            break;
        }
        stats.generations = generation;
        let elite = params.elite.min(size);
        let mut children = Vec::with_capacity(size - elite);
        while elite + children.len() < size {
            let a = tournament(&population, &mut rng);
            let b = tournament(&population, &mut rng);
            let mut child = crossover(&a.ids, &b.ids, &offsets, &mut rng);
            if rng.uniform(0.0, 1.0) < params.mutation_rate {
                mutate(&mut child, &mut rng);
            }
            children.push(child);
        }
        let mut next: Vec<Scored> = population[..elite].to_vec();
        next.extend(eval.score_all(children, None)?);
        sort(&mut next);
        population = next;
        let improved = local_search(&mut eval, &population[0], params.local_moves, &mut rng)?;
        if improved.fitness < population[0].fitness {
            population.insert(0, improved);
            population.truncate(size);
        }
        if population[0].fitness < best.fitness {
            best = population[0].clone();
        }
        // Patience counts generations since the best last improved on the
        // best of that time by at least `min_improvement` (relative).
        if best.fitness < reference * (1.0 - params.min_improvement) {
            reference = best.fitness;
            stale = 0;
        } else {
            stale += 1;
        }
        progress(generation, best.makespan_ns);
        if stale >= params.patience {
            break;
        }
    }
    stats.met_bound |= optimal(&best);
    stats.simulations = eval.cache.len();
    stats.simulated_steps = eval.simulated_steps;
    stats.resumed_steps = eval.resumed_steps;
    Ok((best.ids, stats))
}

/// Most rounds of local search per generation.
const LOCAL_ROUNDS: usize = 8;

/// Up to [`LOCAL_ROUNDS`] rounds of `moves` random moves around `start` (one batch simulated in
/// parallel, resuming from `start`'s checkpoints); each round moves to the
/// best improving neighbour (the first drawn among equals) and the search
/// ends at the first round without one. Returns the best genome found.
fn local_search(eval: &mut Evaluator, start: &Scored, moves: usize, rng: &mut SplitMix64) -> Result<Scored, SimError> {
    let mut current = start.clone();
    if moves == 0 {
        return Ok(current);
    }
    for _ in 0..LOCAL_ROUNDS {
        let anchor = eval.anchor(&current.ids)?;
        let neighbours: Vec<Vec<usize>> =
            (0..moves).filter_map(|_| Move::random(&current.ids, rng)).map(|m| m.apply(&current.ids)).collect();
        let scored = eval.score_all(neighbours, Some(&anchor))?;
        let Some(better) = scored.into_iter().fold(None, |best: Option<Scored>, s| match &best {
            Some(b) if b.fitness <= s.fitness => best,
            _ => Some(s),
        }) else {
            return Ok(current);
        };
        if better.fitness >= current.fitness {
            return Ok(current);
        }
        current = better;
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossover_and_mutation_keep_multiplicities() {
        let offsets = [0, 3, 4];
        let a = vec![0, 1, 0, 2, 2, 0];
        let b = vec![2, 2, 1, 0, 0, 0];
        let mut rng = SplitMix64::new(3);
        let count = |g: &[usize]| (0..3).map(|c| g.iter().filter(|&&x| x == c).count()).collect::<Vec<_>>();
        for _ in 0..200 {
            let mut child = crossover(&a, &b, &offsets, &mut rng);
            mutate(&mut child, &mut rng);
            assert_eq!(count(&child), [3, 1, 2]);
        }
        assert_eq!((client_of(0, &offsets), client_of(2, &offsets), client_of(3, &offsets)), (0, 0, 1));
        assert_eq!(client_of(5, &offsets), 2);
    }
}
