//! The local search: every service's cheapest choice as a start, repaired
//! to hold the fleet's limits, then single services moved to other choices
//! while the objective improves.

use std::time::Instant;

use tessera_core::SizeCounts;

use super::table::{past, Choice, OptionTable};
use crate::fleet_model::FleetModel;
use crate::objective::Objective;
use crate::options::Mix;

/// Local search over single-service moves.
pub(super) struct LocalSearch<'a> {
    pub models: &'a [FleetModel],
    pub table: &'a OptionTable,
    pub choices: &'a [Vec<Choice>],
    pub deadline: Option<Instant>,
}

impl LocalSearch<'_> {
    fn mix(&self, service: usize, choice: Choice) -> &Mix {
        &self.table[choice.model][service].as_ref().expect("choices exist only where options do").mixes[choice.mix]
    }

    /// Every service's choice with the lowest `score` (first on ties); with
    /// `unlimited_first`, among its choices on unlimited models if it has any.
    pub(super) fn cheapest_start(&self, score: impl Fn(usize, &Mix) -> f64, unlimited_first: bool) -> Vec<Choice> {
        self.choices
            .iter()
            .enumerate()
            .map(|(s, choices)| {
                let value = |c: &Choice| score(c.model, self.mix(s, *c));
                let unlimited = |c: &&Choice| self.models[c.model].offer.limit.is_none();
                let pool: Vec<&Choice> = match choices.iter().filter(unlimited).collect::<Vec<_>>() {
                    free if unlimited_first && !free.is_empty() => free,
                    _ => choices.iter().collect(),
                };
                *pool
                    .into_iter()
                    .reduce(|best, c| if value(c) < value(best) - 1e-12 { c } else { best })
                    .expect("a choice")
            })
            .collect()
    }

    /// Instances per model of `choice`.
    fn counts(&self, choice: &[Choice]) -> Vec<SizeCounts> {
        let mut counts = vec![SizeCounts::EMPTY; self.models.len()];
        for (s, c) in choice.iter().enumerate() {
            counts[c.model] = counts[c.model].plus(&self.mix(s, *c).counts);
        }
        counts
    }

    /// The compute cost of a choice: its model's cost per slice × slices.
    fn compute_cost(&self, service: usize, choice: Choice) -> f64 {
        let model = &self.models[choice.model];
        model.cost * f64::from(self.mix(service, choice).gpcs) / model.slices as f64
    }

    /// Repairs `choice` so that every limited model holds at most its
    /// limit: from a model over its limit, services move to their cheapest
    /// choice (in compute cost) on a model with room, those that cost least
    /// per compute slice freed first. Fails with the model still over and
    /// its GPUs when moving every service it can does not suffice.
    pub(super) fn within_limits(&self, mut choice: Vec<Choice>) -> Result<Vec<Choice>, (usize, u64)> {
        let mut counts = self.counts(&choice);
        for (m, model) in self.models.iter().enumerate() {
            let Some(limit) = model.offer.limit else { continue };
            if model.packer.min_gpus(&counts[m]) <= limit {
                continue;
            }
            let elsewhere = |s: usize| self.choices[s].iter().copied().filter(move |c| c.model != m);
            let mut ranked: Vec<(f64, usize)> = (0..choice.len())
                .filter(|&s| choice[s].model == m)
                .filter_map(|s| {
                    let cheapest = elsewhere(s).map(|c| self.compute_cost(s, c)).fold(f64::INFINITY, f64::min);
                    let freed = f64::from(self.mix(s, choice[s]).gpcs);
                    cheapest.is_finite().then(|| ((cheapest - self.compute_cost(s, choice[s])) / freed, s))
                })
                .collect();
            ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (_, s) in ranked {
                if model.packer.min_gpus(&counts[m]) <= limit {
                    break;
                }
                let target = elsewhere(s)
                    .filter(|c| {
                        let to = &self.models[c.model];
                        let gpus = to.packer.min_gpus(&counts[c.model].plus(&self.mix(s, *c).counts));
                        to.offer.limit.is_none_or(|limit| gpus <= limit)
                    })
                    .min_by(|a, b| self.compute_cost(s, *a).total_cmp(&self.compute_cost(s, *b)));
                if let Some(target) = target {
                    counts[m] = counts[m].minus(&self.mix(s, choice[s]).counts);
                    counts[target.model] = counts[target.model].plus(&self.mix(s, target).counts);
                    choice[s] = target;
                }
            }
            let gpus = model.packer.min_gpus(&counts[m]);
            if gpus > limit {
                return Err((m, gpus));
            }
        }
        Ok(choice)
    }

    /// Moves single services to other choices while that improves the
    /// objective, never taking a model over its limit (or further over
    /// it), until no move helps or the deadline passes; returns the final
    /// choice and its value.
    pub(super) fn improve(&self, mut choice: Vec<Choice>) -> (Vec<Choice>, Objective) {
        let mut counts = self.counts(&choice);
        let (mut slack, mut segments) = (0.0, 0u64);
        for (s, c) in choice.iter().enumerate() {
            let mix = self.mix(s, *c);
            slack += mix.slack;
            segments += u64::from(mix.segments);
        }
        let mut gpus: Vec<u64> = self.models.iter().zip(&counts).map(|(m, c)| m.packer.min_gpus(c)).collect();
        let cost = |m: usize, gpus: u64| self.models[m].cost * gpus as f64;
        let mut current = Objective { cost: gpus.iter().enumerate().map(|(m, &g)| cost(m, g)).sum(), slack, segments };
        loop {
            let mut improved = false;
            for (s, chosen) in choice.iter_mut().enumerate() {
                if past(self.deadline) {
                    return (choice, current);
                }
                let (from, old) = (chosen.model, self.mix(s, *chosen));
                let without = counts[from].minus(&old.counts);
                for &candidate in &self.choices[s] {
                    let (to, new) = (candidate.model, self.mix(s, candidate));
                    // The new counts and GPUs of the one or two models touched.
                    let (from_counts, to_counts) = if from == to {
                        (without.plus(&new.counts), without.plus(&new.counts))
                    } else {
                        (without, counts[to].plus(&new.counts))
                    };
                    let from_gpus = self.models[from].packer.min_gpus(&from_counts);
                    let to_gpus = if from == to { from_gpus } else { self.models[to].packer.min_gpus(&to_counts) };
                    if !self.models[from].allows(from_gpus, gpus[from]) || !self.models[to].allows(to_gpus, gpus[to]) {
                        continue;
                    }
                    let cost = if from == to {
                        current.cost - cost(from, gpus[from]) + cost(from, from_gpus)
                    } else {
                        current.cost - cost(from, gpus[from]) - cost(to, gpus[to])
                            + cost(from, from_gpus)
                            + cost(to, to_gpus)
                    };
                    let value = Objective {
                        cost,
                        slack: current.slack - old.slack + new.slack,
                        segments: current.segments - u64::from(old.segments) + u64::from(new.segments),
                    };
                    if value.better_than(&current) {
                        (counts[from], gpus[from]) = (from_counts, from_gpus);
                        (counts[to], gpus[to]) = (to_counts, to_gpus);
                        (*chosen, current, improved) = (candidate, value, true);
                        break;
                    }
                }
            }
            if !improved {
                return (choice, current);
            }
        }
    }
}
