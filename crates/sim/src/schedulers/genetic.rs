//! The genetic search (see [`super::GeneticParams`]).
//!
//! A genome is a client-id sequence with each client as many times as it
//! has operations, so every genome is a valid schedule. Crossover is order
//! crossover (OX) on occurrence labels: position `p` of a genome is labelled
//! `(client, k)` when it is that client's `k`-th occurrence; the child takes
//! a random slice of positions from the first parent and fills the other
//! positions with the remaining labels in the second parent's order, so
//! multiplicities are preserved. Mutation swaps two positions holding
//! different clients. Simulations are cached by genome.

use std::collections::HashMap;

use tessera_core::rng::SplitMix64;

use super::{evaluate, heuristics, shuffle, GeneticParams};
use crate::error::SimError;
use crate::policy::Policies;
use crate::trace::Trace;

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
    if !(params.bytes_weight.is_finite() && params.bytes_weight >= 0.0) {
        return bad("bytes_weight", "a finite number at least 0", params.bytes_weight.to_string());
    }
    Ok(())
}

struct Evaluator<'a> {
    trace: &'a Trace,
    policies: Policies,
    bytes_weight: f64,
    cache: HashMap<Vec<usize>, (f64, u64)>,
}

impl Evaluator<'_> {
    fn score(&mut self, ids: Vec<usize>) -> Result<Scored, SimError> {
        let (fitness, makespan_ns) = match self.cache.get(&ids) {
            Some(&hit) => hit,
            None => {
                let (makespan_ns, bytes) = evaluate(self.trace, &ids, self.policies)?;
                let value = (makespan_ns as f64 + self.bytes_weight * bytes as f64, makespan_ns);
                self.cache.insert(ids.clone(), value);
                value
            }
        };
        Ok(Scored { ids, fitness, makespan_ns })
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

pub(crate) fn search(
    trace: &Trace,
    policies: Policies,
    params: &GeneticParams,
    progress: &mut dyn FnMut(usize, u64),
) -> Result<Vec<usize>, SimError> {
    check(params)?;
    let mut rng = SplitMix64::new(params.seed);
    let mut eval = Evaluator { trace, policies, bytes_weight: params.bytes_weight, cache: HashMap::new() };
    let mut offsets = Vec::with_capacity(trace.clients.len());
    let mut total = 0;
    for client in &trace.clients {
        offsets.push(total);
        total += client.operations.len();
    }

    let fifo = heuristics::fifo_order(trace);
    let mut seeds = vec![fifo.clone(), heuristics::johnson_order(trace), heuristics::greedy_order(trace)];
    seeds.dedup();
    if seeds.len() == 3 && seeds[0] == seeds[2] {
        seeds.pop();
    }
    let size = params.population.max(seeds.len());
    let mut population = Vec::with_capacity(size);
    for ids in seeds {
        population.push(eval.score(ids)?);
    }
    while population.len() < size {
        let mut ids = fifo.clone();
        shuffle(&mut ids, &mut rng);
        population.push(eval.score(ids)?);
    }
    sort(&mut population);
    let mut best = population[0].clone();
    progress(0, best.makespan_ns);

    let mut stale = 0;
    for generation in 1..=params.generations {
        let mut next: Vec<Scored> = population[..params.elite.min(size)].to_vec();
        while next.len() < size {
            let a = tournament(&population, &mut rng);
            let b = tournament(&population, &mut rng);
            let mut child = crossover(&a.ids, &b.ids, &offsets, &mut rng);
            if rng.uniform(0.0, 1.0) < params.mutation_rate {
                mutate(&mut child, &mut rng);
            }
            next.push(eval.score(child)?);
        }
        sort(&mut next);
        population = next;
        if population[0].fitness < best.fitness {
            best = population[0].clone();
            stale = 0;
        } else {
            stale += 1;
        }
        progress(generation, best.makespan_ns);
        if stale >= params.patience {
            break;
        }
    }
    Ok(best.ids)
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
